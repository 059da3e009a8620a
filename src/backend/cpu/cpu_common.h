// Element access shared by the CPU op implementations (internal to backend/cpu).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "backend/ops.h"
#include "core/bf16.h"
#include "core/status.h"
#include "core/tensor.h"

namespace ferry::cpu {

template <class T>
inline T* row_ptr(const TensorView& v, int64_t r) {
  return static_cast<T*>(v.data) + r * v.stride();
}

inline char* row_bytes(const TensorView& v, int64_t r) {
  return static_cast<char*>(v.data) + static_cast<size_t>(r * v.stride()) * dtype_size(v.dtype);
}

// Element c of row r as f32 (bf16 or f32 views).
inline float load_f32(const TensorView& v, int64_t r, int64_t c) {
  if (v.dtype == DType::bf16) return bf16_to_f32(row_ptr<const uint16_t>(v, r)[c]);
  return row_ptr<const float>(v, r)[c];
}

// Stores f into element c of row r, rounding to bf16 for bf16 views.
inline void store_f32(const TensorView& v, int64_t r, int64_t c, float f) {
  if (v.dtype == DType::bf16) {
    row_ptr<uint16_t>(v, r)[c] = f32_to_bf16(f);
  } else {
    row_ptr<float>(v, r)[c] = f;
  }
}

// Row r of a bf16|f32 view converted to f32 into out[0, cols).
inline void load_row_f32(const TensorView& v, int64_t r, float* out) {
  if (v.dtype == DType::bf16) {
    const uint16_t* p = row_ptr<const uint16_t>(v, r);
    for (int64_t c = 0; c < v.cols; ++c) out[c] = bf16_to_f32(p[c]);
  } else {
    const float* p = row_ptr<const float>(v, r);
    for (int64_t c = 0; c < v.cols; ++c) out[c] = p[c];
  }
}

// Checks that every index in an [n, k] i32 view lies in [0, limit).
inline Status check_indices(const char* op, const char* arg, const TensorView& idx, int64_t limit) {
  for (int64_t r = 0; r < idx.rows; ++r) {
    const int32_t* p = row_ptr<const int32_t>(idx, r);
    for (int64_t c = 0; c < idx.cols; ++c) {
      if (p[c] < 0 || p[c] >= limit) {
        return make_error(ErrorCode::invalid_argument, std::string(op) + ": " + arg + ": index " +
                                                           std::to_string(p[c]) + " at row " +
                                                           std::to_string(r) + " is outside [0, " +
                                                           std::to_string(limit) + ")");
      }
    }
  }
  return Status();
}

// Σ a[k]·b[k] over k < n in fp32 with a fixed order that depends on n only: eight interleaved
// partial sums (lane j takes k ≡ j mod 8 below the last multiple of 8), combined pairwise as
// ((s0+s1)+(s2+s3))+((s4+s5)+(s6+s7)), then the tail k = 8⌊n/8⌋.. added one by one.
// B is float or uint16_t (bf16 bits); the conversion is exact, so both give the same bits.
template <class B>
[[gnu::always_inline]] inline float dot_f32(const float* a, const B* b, int64_t n) {
  auto val = [](B x) -> float {
    if constexpr (sizeof(B) == 2) {
      return bf16_to_f32(x);
    } else {
      return x;
    }
  };
  float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const int64_t n8 = n - n % 8;
  for (int64_t k = 0; k < n8; k += 8) {
    for (int j = 0; j < 8; ++j) s[j] += a[k + j] * val(b[k + j]);
  }
  float total = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  for (int64_t k = n8; k < n; ++k) total += a[k] * val(b[k]);
  return total;
}

// The activations of ops.h, in fp32.
inline float silu(float u) {
  return u / (1.0f + std::exp(-u));
}
inline float gelu_tanh(float u) {
  constexpr float kBeta = 0.7978845608028654f;  // sqrt(2/pi)
  constexpr float kKappa = 0.044715f;
  return 0.5f * u * (1.0f + std::tanh(kBeta * (u + kKappa * u * u * u)));
}
inline float gelu_erf(float u) {
  constexpr float kInvSqrt2 = 0.7071067811865476f;
  return 0.5f * u * (1.0f + std::erf(u * kInvSqrt2));
}
inline float activate(Activation act, float u) {
  switch (act) {
    case Activation::none:
      return u;
    case Activation::silu:
      return silu(u);
    case Activation::gelu_tanh:
      return gelu_tanh(u);
    case Activation::gelu_erf:
      return gelu_erf(u);
  }
  return u;
}

// R dot products at once, of rows x + r·x_stride (r < R) with one bf16 row w: each weight block
// is converted once and reused R times. Every output is summed exactly as dot_f32 sums it.
template <int R>
[[gnu::always_inline]] inline void dot_rows_f32(const float* x, int64_t x_stride, const uint16_t* w,
                                                int64_t n, float* out) {
  float s[R][8] = {};
  const int64_t n8 = n - n % 8;
  for (int64_t k = 0; k < n8; k += 8) {
    float wf[8];
    for (int j = 0; j < 8; ++j) wf[j] = bf16_to_f32(w[k + j]);
    for (int r = 0; r < R; ++r) {
      for (int j = 0; j < 8; ++j) s[r][j] += x[r * x_stride + k + j] * wf[j];
    }
  }
  for (int r = 0; r < R; ++r) {
    const float* a = s[r];
    float total = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
    for (int64_t k = n8; k < n; ++k) total += x[r * x_stride + k] * bf16_to_f32(w[k]);
    out[r] = total;
  }
}

}  // namespace ferry::cpu
