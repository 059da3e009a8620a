// RMSNorm, LayerNorm and the rotary embedding ops.
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_common.h"
#include "backend/cpu/cpu_ops.h"
#include "core/thread_pool.h"

namespace ferry::cpu {
namespace {

int64_t rows_per_range(int64_t cols) {
  return std::max<int64_t>(1, 8192 / std::max<int64_t>(1, cols));
}

// Σ a[k] in the fixed order of dot_f32 (eight lanes, pairwise combine, tail).
float sum_f32(const float* a, int64_t n) {
  float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const int64_t n8 = n - n % 8;
  for (int64_t k = 0; k < n8; k += 8) {
    for (int j = 0; j < 8; ++j) s[j] += a[k + j];
  }
  float total = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  for (int64_t k = n8; k < n; ++k) total += a[k];
  return total;
}

}  // namespace

Status rms_norm(const RmsNorm& op, ThreadPool* pool) {
  const int64_t cols = op.x.cols;
  const int64_t dim = op.dim;
  const uint16_t* w = row_ptr<const uint16_t>(op.w, 0);
  const bool bf16 = op.x.dtype == DType::bf16;
  parallel_for(pool, op.x.rows, rows_per_range(cols), [&](int64_t begin, int64_t end) {
    std::vector<float> u(static_cast<size_t>(cols));
    for (int64_t r = begin; r < end; ++r) {
      load_row_f32(op.x, r, u.data());  // before any store: y may alias x
      for (int64_t c0 = 0; c0 < cols; c0 += dim) {
        const float* uc = u.data() + c0;
        const float mean = dot_f32(uc, uc, dim) / static_cast<float>(dim);
        const float inv = 1.0f / std::sqrt(mean + op.eps);
        for (int64_t j = 0; j < dim; ++j) {
          const float n = uc[j] * inv;
          if (bf16) {
            row_ptr<uint16_t>(op.y, r)[c0 + j] = f32_to_bf16(round_bf16(n) * bf16_to_f32(w[j]));
          } else {
            row_ptr<float>(op.y, r)[c0 + j] = n * bf16_to_f32(w[j]);
          }
        }
      }
    }
  });
  return Status();
}

Status layer_norm(const LayerNorm& op, ThreadPool* pool) {
  const int64_t cols = op.x.cols;
  const uint16_t* w = row_ptr<const uint16_t>(op.w, 0);
  const uint16_t* b = row_ptr<const uint16_t>(op.b, 0);
  parallel_for(pool, op.x.rows, rows_per_range(cols), [&](int64_t begin, int64_t end) {
    std::vector<float> u(static_cast<size_t>(cols));
    std::vector<float> d(static_cast<size_t>(cols));
    for (int64_t r = begin; r < end; ++r) {
      load_row_f32(op.x, r, u.data());  // before any store: y may alias x
      const float mean = sum_f32(u.data(), cols) / static_cast<float>(cols);
      for (int64_t c = 0; c < cols; ++c) d[c] = u[c] - mean;
      const float var = dot_f32(d.data(), d.data(), cols) / static_cast<float>(cols);
      const float inv = 1.0f / std::sqrt(var + op.eps);
      for (int64_t c = 0; c < cols; ++c) {
        store_f32(op.y, r, c, d[c] * inv * bf16_to_f32(w[c]) + bf16_to_f32(b[c]));
      }
    }
  });
  return Status();
}

Status rope(const Rope& op, ThreadPool* pool) {
  const int64_t half = op.head_dim / 2;
  const bool bf16_math = op.math == RopeMath::bf16;
  parallel_for(pool, op.x.rows, rows_per_range(op.x.cols), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* cs = row_ptr<const float>(op.cos, r);
      const float* sn = row_ptr<const float>(op.sin, r);
      for (int64_t h = 0; h < op.num_heads; ++h) {
        const int64_t base = h * op.head_dim;
        for (int64_t j = 0; j < half; ++j) {
          const float a = load_f32(op.x, r, base + j);
          const float b = load_f32(op.x, r, base + j + half);
          float lo, hi;
          if (bf16_math) {
            const float c = round_bf16(cs[j]);
            const float s = round_bf16(sn[j]);
            lo = round_bf16(round_bf16(a * c) + round_bf16(-b * s));
            hi = round_bf16(round_bf16(b * c) + round_bf16(a * s));
          } else {
            lo = a * cs[j] + (-b) * sn[j];
            hi = b * cs[j] + a * sn[j];
          }
          store_f32(op.x, r, base + j, lo);
          store_f32(op.x, r, base + j + half, hi);
        }
      }
    }
  });
  return Status();
}

Status rope_table(const RopeTable& op, ThreadPool* pool) {
  const int64_t half = op.head_dim / 2;
  std::vector<float> inv_freq(static_cast<size_t>(half));
  rope_inv_freq(op, inv_freq.data());
  // Which position column (t = 0, h = 1, w = 2) frequency j takes its angle from.
  std::vector<int> column(static_cast<size_t>(half));
  for (int64_t j = 0; j < half; ++j) {
    int c = 0;
    if (j % 3 == 1 && j < 3 * static_cast<int64_t>(op.sections[1])) c = 1;
    if (j % 3 == 2 && j < 3 * static_cast<int64_t>(op.sections[2])) c = 2;
    column[j] = c;
  }
  parallel_for(pool, op.pos.rows, rows_per_range(half), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int32_t* p = row_ptr<const int32_t>(op.pos, r);
      float* cs = row_ptr<float>(op.cos, r);
      float* sn = row_ptr<float>(op.sin, r);
      for (int64_t j = 0; j < half; ++j) {
        const float angle = static_cast<float>(p[column[j]]) * inv_freq[j];
        cs[j] = std::cos(angle);
        sn[j] = std::sin(angle);
      }
    }
  });
  return Status();
}

}  // namespace ferry::cpu
