#include "backend/gemv_order.h"

#include "core/bf16.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define FERRY_GEMV_X86 1
#endif

namespace ferry {
namespace {

// Steps 2 and 3 (header) over the sums a[0 .. 256).
inline float finish_sums(const float* a) {
  float s[kGemvLanes];
  for (int l = 0; l < kGemvLanes; ++l) {
    static_assert(kGemvPositionsPerLane == 8, "the lane sum below pairs 8 positions");
    const float* p = a + kGemvPositionsPerLane * l;
    s[l] = ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
  }
  for (int off = kGemvLanes / 2; off >= 1; off /= 2) {
    for (int l = 0; l < off; ++l) s[l] = s[l] + s[l + off];
  }
  return s[0];
}

// The elements of [k_begin, k) one at a time, each into its position's sum: the tail after a
// vector loop that stopped at a multiple of 256.
inline void add_tail(const uint16_t* x, const uint16_t* w_row, int64_t k_begin, int64_t k,
                     float* a) {
  for (int64_t i = k_begin; i < k; ++i) {
    a[i % kGemvPositions] += bf16_to_f32(x[i]) * bf16_to_f32(w_row[i]);
  }
}

#ifdef FERRY_GEMV_X86
// 16 bf16 values as 16 floats (the bits shifted into the high half: exact, as bf16_to_f32). The
// zero-masked forms with a full mask are the plain instructions; the unmasked intrinsics start
// from _mm512_undefined_epi32, which GCC 12 reports as maybe-uninitialized.
[[gnu::target("avx512f")]] inline __m512 load16_bf16(const uint16_t* p) {
  constexpr __mmask16 kAll = 0xFFFF;
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(
      _mm512_maskz_slli_epi32(kAll, _mm512_maskz_cvtepu16_epi32(kAll, h), 16));
}

[[gnu::target("avx512f")]] float dot_avx512(const uint16_t* x, const uint16_t* w_row, int64_t k) {
  constexpr int kRegs = kGemvPositions / 16;
  __m512 acc[kRegs];
  for (auto& v : acc) v = _mm512_setzero_ps();
  const int64_t k_vec = k - k % kGemvPositions;
  for (int64_t k0 = 0; k0 < k_vec; k0 += kGemvPositions) {
    for (int j = 0; j < kRegs; ++j) {
      const __m512 p =
          _mm512_mul_ps(load16_bf16(x + k0 + 16 * j), load16_bf16(w_row + k0 + 16 * j));
      acc[j] = _mm512_add_ps(acc[j], p);
    }
  }
  alignas(64) float a[kGemvPositions];
  for (int j = 0; j < kRegs; ++j) _mm512_store_ps(a + 16 * j, acc[j]);
  add_tail(x, w_row, k_vec, k, a);
  return finish_sums(a);
}

// 8 bf16 values as 8 floats.
[[gnu::target("avx2")]] inline __m256 load8_bf16(const uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

[[gnu::target("avx2")]] float dot_avx2(const uint16_t* x, const uint16_t* w_row, int64_t k) {
  // Four passes of 64 positions (8 registers), so the accumulators and the loads fit in AVX2's 16
  // registers; each position's sum is still taken in increasing k.
  constexpr int kPass = 64;
  constexpr int kRegs = kPass / 8;
  alignas(32) float a[kGemvPositions];
  const int64_t k_vec = k - k % kGemvPositions;
  for (int base = 0; base < kGemvPositions; base += kPass) {
    __m256 acc[kRegs];
    for (auto& v : acc) v = _mm256_setzero_ps();
    for (int64_t k0 = base; k0 < k_vec; k0 += kGemvPositions) {
      for (int j = 0; j < kRegs; ++j) {
        const __m256 p = _mm256_mul_ps(load8_bf16(x + k0 + 8 * j), load8_bf16(w_row + k0 + 8 * j));
        acc[j] = _mm256_add_ps(acc[j], p);
      }
    }
    for (int j = 0; j < kRegs; ++j) _mm256_store_ps(a + base + 8 * j, acc[j]);
  }
  add_tail(x, w_row, k_vec, k, a);
  return finish_sums(a);
}
#endif

}  // namespace

float dot_fixed_order_ref(const uint16_t* x, const uint16_t* w_row, int64_t k) {
  float a[kGemvPositions] = {};
  add_tail(x, w_row, 0, k, a);
  return finish_sums(a);
}

void gemv_fixed_order_ref(const uint16_t* x, const uint16_t* w, int64_t ldw, int64_t n, int64_t k,
                          float* out) {
  for (int64_t r = 0; r < n; ++r) out[r] = dot_fixed_order_ref(x, w + r * ldw, k);
}

const char* gemv_isa_name(GemvIsa isa) {
  switch (isa) {
    case GemvIsa::avx512:
      return "avx512";
    case GemvIsa::avx2:
      return "avx2";
    case GemvIsa::scalar:
      break;
  }
  return "scalar";
}

bool gemv_isa_supported(GemvIsa isa) {
  switch (isa) {
    case GemvIsa::scalar:
      return true;
#ifdef FERRY_GEMV_X86
    case GemvIsa::avx2:
      return __builtin_cpu_supports("avx2");
    case GemvIsa::avx512:
      return __builtin_cpu_supports("avx512f");
#endif
    default:
      return false;
  }
}

GemvIsa gemv_best_isa() {
  static const GemvIsa best = gemv_isa_supported(GemvIsa::avx512) ? GemvIsa::avx512
                              : gemv_isa_supported(GemvIsa::avx2) ? GemvIsa::avx2
                                                                  : GemvIsa::scalar;
  return best;
}

void gemv_fixed_order(GemvIsa isa, const uint16_t* x, const uint16_t* w, int64_t ldw, int64_t n,
                      int64_t k, float* out) {
  if (!gemv_isa_supported(isa)) isa = GemvIsa::scalar;
  for (int64_t r = 0; r < n; ++r) {
    const uint16_t* row = w + r * ldw;
    switch (isa) {
#ifdef FERRY_GEMV_X86
      case GemvIsa::avx512:
        out[r] = dot_avx512(x, row, k);
        break;
      case GemvIsa::avx2:
        out[r] = dot_avx2(x, row, k);
        break;
#endif
      default:
        out[r] = dot_fixed_order_ref(x, row, k);
        break;
    }
  }
}

}  // namespace ferry
