// When a fast fp32 activation is allowed to stand in for the double-precision reference.
//
// The reference (activation.cuh, act_ref) evaluates exp/tanh/erf in double, rounds once to
// float, then finishes in fp32 (ops.h). For bf16 outputs only bf16(y_ref) is stored, so a fast
// evaluation may replace it wherever it provably rounds to the same bf16. This header decides
// that from the fast result alone: it brackets y_ref in [lo, hi] with directed roundings and
// accepts iff bf16(lo) == bf16(hi) (rounding to bf16 is monotone, so every value of the bracket
// then rounds alike); otherwise the caller recomputes the element with the reference (about one
// element in a few thousand). CUDA-free: the host model test (tests/cuda) runs it on the CPU,
// where the directed roundings are emulated exactly.
//
// Error bounds used (CUDA Programming Guide, "Mathematical Functions": maximum ulp distance from
// the correctly rounded result): expf, tanhf, erff 2 ulp; __fdividef 2 ulp for a divisor in
// [2^-126, 2^126]; double exp and tanh 1 ulp, erf 2 ulp. The guide calls these results of
// extensive, not exhaustive, tests, so every bound below allows 3 ulp (one more than documented);
// and the bf16 paths only ever see the 65536 bf16 inputs, all of which the GPU test runs.
//
// gelu (tanh and erf forms): y_ref = RN(h · RN(1 + t_ref)) with h = RN(u/2), t_ref the double
//   tanh/erf of the fp32 argument rounded to float, t_fast = tanhf/erff of the same argument.
//   |t| <= 1, so one float step is <= 2^-24 below 1 and 2^-23 above: |t_fast - T| <= 3.5 steps
//   <= 7·2^-24 in the worst binade, |t_ref - T| <= 2^-24 (half a step plus the double's error).
//   Hence |t_fast - t_ref| < D = 2^-21, and with RD/RU the directed roundings
//     s_lo = RD(t_fast + (1 - D)) <= RN(1 + t_ref) <= RU(t_fast + (1 + D)) = s_hi,
//     y_ref in [RD(h·s_lo), RU(h·s_hi)] (h >= 0; the ends swap for h < 0).
//   The bracket is about 2^-20 of |y| wide except where 1 + t cancels (u < -3 or so), where it
//   widens and the element falls back.
// silu: y_ref = RN(u / RN(1 + e_ref)), e_ref = RN32(exp(-u)) in double; fast: e_f = expf(-u),
//   y_fast = __fdividef(u, RN(1 + e_f)). With E = e^-u, E normal (|u| <= 80):
//   |e_f - E| <= 3.5·2^-23·E, |e_ref - E| <= 2^-24·E·(1 + 2^-27), so the two denominators
//   differ relatively by <= 8.01·2^-24 (|e_f - e_ref| / (1 + e_ref) <= the relative error of e),
//   plus one RN each (2·2^-24); the reference's division adds 2^-24 and __fdividef 3.5·2^-23 =
//   7·2^-24. Altogether |y_ref / y_fast - 1| <= 18.1·2^-24 < 2^-19, so
//     |y_ref| in [RD(|y_fast|·(1 - 2^-19)), RU(|y_fast|·(1 + 2^-19))], sign(y_ref) = sign(u).
//   Outside 2^-100 <= |u| <= 80 (exp near overflow, or y subnormal where relative bounds fail)
//   the element falls back.
// Either way a bracket whose bf16 is ±0, ±inf or NaN falls back (signed zeros and saturation are
// left to the reference), so NaN and infinite inputs always take the reference.
#pragma once

#include <cstdint>

#include "core/bf16.h"

#ifndef __CUDA_ARCH__
#include <cmath>
#endif

namespace ferry::cuda {

// Not a bf16 pattern: "recompute this element with the reference".
inline constexpr uint32_t kActFallback = 0x10000u;

// t_ref lies within kActTSlack of t_fast (gelu forms); y_ref within kActSiluSlack of y_fast,
// relatively (silu).
inline constexpr float kActTSlack = 0x1p-21f;
inline constexpr float kActSiluSlack = 0x1p-19f;
inline constexpr float kActSiluMinAbs = 0x1p-100f;
inline constexpr float kActSiluMaxAbs = 80.0f;

#ifndef __CUDA_ARCH__
// Host emulation of the device's directed roundings (the host model test): `hi + lo` is the
// exact real value (hi the double nearest to it), rounded down or up to float exactly.
inline float act_round_dir(double hi, double lo, bool up) {
  float f = static_cast<float>(hi);
  const double fd = static_cast<double>(f);
  const int cmp = fd > hi ? 1 : fd < hi ? -1 : (lo > 0 ? -1 : lo < 0 ? 1 : 0);  // sign(f - exact)
  if (up && cmp < 0) f = std::nextafter(f, INFINITY);
  if (!up && cmp > 0) f = std::nextafter(f, -INFINITY);
  return f;
}
inline float act_add_dir(float a, float b, bool up) {
  const double s = static_cast<double>(a) + static_cast<double>(b);
  const double bb = s - static_cast<double>(a);
  const double err = (static_cast<double>(a) - (s - bb)) + (static_cast<double>(b) - bb);
  return act_round_dir(s, err, up);
}
inline float act_mul_dir(float a, float b, bool up) {
  return act_round_dir(static_cast<double>(a) * static_cast<double>(b), 0.0, up);  // exact
}
#endif

FERRY_HD float act_add_rd(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rd(a, b);
#else
  return act_add_dir(a, b, false);
#endif
}
FERRY_HD float act_add_ru(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_ru(a, b);
#else
  return act_add_dir(a, b, true);
#endif
}
FERRY_HD float act_mul_rd(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rd(a, b);
#else
  return act_mul_dir(a, b, false);
#endif
}
FERRY_HD float act_mul_ru(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_ru(a, b);
#else
  return act_mul_dir(a, b, true);
#endif
}

// bf16(lo) when it equals bf16(hi) and is finite and nonzero; kActFallback otherwise.
FERRY_HD uint32_t act_bracket_bf16(float lo, float hi) {
#ifdef __CUDA_ARCH__
  // One cvt rounds both (nearest even, as f32_to_bf16 for every finite value; its NaN pattern
  // differs, but NaN falls back either way).
  uint32_t p;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(p) : "f"(hi), "f"(lo));
  const uint32_t a = p & 0xffffu;
  const uint32_t b = p >> 16;
#else
  const uint32_t a = f32_to_bf16(lo);
  const uint32_t b = f32_to_bf16(hi);
#endif
  const bool zero = (a & 0x7fffu) == 0;
  const bool special = (a & 0x7f80u) == 0x7f80u;  // inf or NaN
  return a == b && !zero && !special ? a : kActFallback;
}

// gelu_tanh / gelu_erf: bf16(RN(RN(u/2) · RN(1 + t_ref))) from t_fast, or kActFallback.
FERRY_HD uint32_t gelu_bf16_or_fallback(float u, float t_fast) {
#ifdef __CUDA_ARCH__
  const float h = __fmul_rn(0.5f, u);
#else
  const float h = 0.5f * u;
#endif
  const float s_lo = act_add_rd(t_fast, 1.0f - kActTSlack);
  const float s_hi = act_add_ru(t_fast, 1.0f + kActTSlack);
  const bool pos = h >= 0.0f;
  return act_bracket_bf16(act_mul_rd(h, pos ? s_lo : s_hi), act_mul_ru(h, pos ? s_hi : s_lo));
}

// silu: bf16(RN(u / RN(1 + e_ref))) from y_fast ≈ u / (1 + expf(-u)), or kActFallback.
FERRY_HD uint32_t silu_bf16_or_fallback(float u, float y_fast) {
  const float au = u < 0.0f ? -u : u;
  if (!(au >= kActSiluMinAbs && au <= kActSiluMaxAbs)) return kActFallback;  // NaN too
  const float ay = y_fast < 0.0f ? -y_fast : y_fast;
  const uint32_t b =
      act_bracket_bf16(act_mul_rd(ay, 1.0f - kActSiluSlack), act_mul_ru(ay, 1.0f + kActSiluSlack));
  return b == kActFallback || u > 0.0f ? b : b | 0x8000u;
}

}  // namespace ferry::cuda
