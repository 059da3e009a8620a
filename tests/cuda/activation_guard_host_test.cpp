// The fast-activation acceptance test (backend/cuda/activation_guard.h) on the host, without a
// GPU: for every bf16 input, every fast result the error bounds allow (3 float steps from the
// correctly rounded value, one more than CUDA documents) and every reference result the double
// functions allow, an accepted fast result must be the reference's bf16. The device runs the
// same code with hardware directed roundings; the host emulates them exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <set>
#include <vector>

#include "backend/cuda/activation_guard.h"
#include "core/bf16.h"

namespace ferry::cuda_test {
namespace {

using cuda::gelu_bf16_or_fallback;
using cuda::kActFallback;
using cuda::silu_bf16_or_fallback;

constexpr int kSteps = 3;               // fast function: float steps from the correctly rounded
constexpr double kDoubleRel = 0x1p-51;  // double functions: 2 ulp (CUDA erf; glibc's own error)

// f and the floats up to k steps either side of it.
std::vector<float> around(float f, int k) {
  std::vector<float> v{f};
  float lo = f;
  float hi = f;
  for (int i = 0; i < k; ++i) {
    lo = std::nextafter(lo, -INFINITY);
    hi = std::nextafter(hi, INFINITY);
    v.push_back(lo);
    v.push_back(hi);
  }
  return v;
}

// The floats the reference's double function can round to: RN32 of the value within kDoubleRel.
std::set<float> ref_values(double v) {
  return {static_cast<float>(v * (1 - kDoubleRel)), static_cast<float>(v),
          static_cast<float>(v * (1 + kDoubleRel))};
}

TEST(ActivationGuard, DirectedRoundingEmulation) {
  // 1 − 2^-30 lies between the floats 1 − 2^-24 and 1.
  EXPECT_EQ(cuda::act_add_rd(1.0f, -0x1p-30f), 1.0f - 0x1p-24f);
  EXPECT_EQ(cuda::act_add_ru(1.0f, -0x1p-30f), 1.0f);
  EXPECT_EQ(cuda::act_add_rd(1.0f, 0x1p-60f), 1.0f);
  EXPECT_EQ(cuda::act_add_ru(1.0f, 0x1p-60f), 1.0f + 0x1p-23f);
  EXPECT_EQ(cuda::act_add_rd(0.5f, 0.25f), 0.75f);  // exact stays
  EXPECT_EQ(cuda::act_add_ru(0.5f, 0.25f), 0.75f);
  // (1 + 2^-23)² = 1 + 2^-22 + 2^-46.
  const float a = 1.0f + 0x1p-23f;
  EXPECT_EQ(cuda::act_mul_rd(a, a), 1.0f + 0x1p-22f);
  EXPECT_EQ(cuda::act_mul_ru(a, a), 1.0f + 0x1p-22f + 0x1p-23f);
  EXPECT_EQ(cuda::act_mul_rd(-a, a), -(1.0f + 0x1p-22f + 0x1p-23f));
  EXPECT_EQ(cuda::act_mul_ru(3e38f, 2.0f), INFINITY);
  EXPECT_EQ(cuda::act_mul_rd(3e38f, 2.0f), 3.40282347e38f);
}

struct GeluForm {
  const char* name;
  float (*arg)(float);  // the fp32 argument, rounded as the device rounds it
  double (*fn)(double);
};

float tanh_arg(float u) {
  const float u3 = (u * u) * u;
  return 0.7978845608028654f * (u + 0.044715f * u3);
}
float erf_arg(float u) {
  return u * 0.7071067811865476f;
}
double tanh_d(double x) {
  return std::tanh(x);
}
double erf_d(double x) {
  return std::erf(x);
}

TEST(ActivationGuard, GeluAcceptsOnlyTheReferenceBf16) {
  for (const GeluForm& form :
       {GeluForm{"gelu_tanh", tanh_arg, tanh_d}, GeluForm{"gelu_erf", erf_arg, erf_d}}) {
    int64_t inputs = 0;
    int64_t fell_back = 0;  // with the fast function correctly rounded
    for (uint32_t bits = 0; bits < 65536; ++bits) {
      const float u = bf16_to_f32(static_cast<uint16_t>(bits));
      if (!std::isfinite(u)) {
        EXPECT_EQ(gelu_bf16_or_fallback(u, std::isnan(u) ? u : std::copysign(1.0f, u)),
                  kActFallback);
        continue;
      }
      const double t_exact = form.fn(static_cast<double>(form.arg(u)));
      const std::set<float> refs = ref_values(t_exact);
      std::set<uint32_t> want;
      for (float t : refs) want.insert(f32_to_bf16((0.5f * u) * (1.0f + t)));
      std::set<float> fasts;
      for (float t : refs) {
        for (float f : around(t, kSteps)) fasts.insert(f);
      }
      for (float t_fast : fasts) {
        const uint32_t got = gelu_bf16_or_fallback(u, t_fast);
        if (got == kActFallback) continue;
        ASSERT_EQ(want.size(), 1u) << form.name << " u=" << u << ": accepted an undecided input";
        ASSERT_EQ(got, *want.begin()) << form.name << " u=" << u << " t_fast=" << t_fast;
      }
      ++inputs;
      fell_back += gelu_bf16_or_fallback(u, static_cast<float>(t_exact)) == kActFallback;
    }
    std::printf("%s: %lld of %lld finite bf16 inputs fall back\n", form.name,
                static_cast<long long>(fell_back), static_cast<long long>(inputs));
  }
}

TEST(ActivationGuard, SiluAcceptsOnlyTheReferenceBf16) {
  int64_t inputs = 0;
  int64_t fell_back = 0;
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    const float u = bf16_to_f32(static_cast<uint16_t>(bits));
    if (!std::isfinite(u)) {
      EXPECT_EQ(silu_bf16_or_fallback(u, u), kActFallback);
      continue;
    }
    const double e_exact = std::exp(-static_cast<double>(u));
    const std::set<float> refs = ref_values(e_exact);
    std::set<uint32_t> want;
    for (float e : refs) want.insert(f32_to_bf16(u / (1.0f + e)));
    std::set<float> e_fasts;
    for (float e : refs) {
      for (float f : around(e, kSteps)) e_fasts.insert(f);
    }
    for (float e_fast : e_fasts) {
      const float s = 1.0f + e_fast;
      const auto q = static_cast<float>(static_cast<double>(u) / static_cast<double>(s));
      for (float y_fast : around(q, kSteps)) {  // __fdividef
        const uint32_t got = silu_bf16_or_fallback(u, y_fast);
        if (got == kActFallback) continue;
        ASSERT_EQ(want.size(), 1u) << "silu u=" << u << ": accepted an undecided input";
        ASSERT_EQ(got, *want.begin()) << "silu u=" << u << " e_fast=" << e_fast << " y=" << y_fast;
      }
    }
    ++inputs;
    const float y = u / (1.0f + static_cast<float>(e_exact));
    fell_back += silu_bf16_or_fallback(u, y) == kActFallback;
  }
  std::printf("silu: %lld of %lld finite bf16 inputs fall back\n",
              static_cast<long long>(fell_back), static_cast<long long>(inputs));
}

// How often the reference runs on typical activations (|u| in [2^-6, 3]): a bound on the cost
// of the fallback, and a check that the bracket is not needlessly wide. (Below u = -3.2 gelu
// falls back more and more: 1 + tanh cancels, and the fast tanh's few ulps become the whole
// difference; such inputs are rare before an activation.)
TEST(ActivationGuard, FallbackIsRareOnTypicalInputs) {
  int64_t n = 0;
  int64_t gelu_fb = 0;
  int64_t silu_fb = 0;
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    const float u = bf16_to_f32(static_cast<uint16_t>(bits));
    const float a = std::fabs(u);
    if (!(a >= 0x1p-6f && a <= 3.0f)) continue;
    ++n;
    gelu_fb += gelu_bf16_or_fallback(u, static_cast<float>(std::tanh(tanh_arg(u)))) == kActFallback;
    const float y = u / (1.0f + static_cast<float>(std::exp(-static_cast<double>(u))));
    silu_fb += silu_bf16_or_fallback(u, y) == kActFallback;
  }
  std::printf("typical inputs: %lld; gelu_tanh falls back %lld, silu %lld\n",
              static_cast<long long>(n), static_cast<long long>(gelu_fb),
              static_cast<long long>(silu_fb));
  EXPECT_LT(gelu_fb * 100, n);  // < 1%
  EXPECT_LT(silu_fb * 100, n);
}

}  // namespace
}  // namespace ferry::cuda_test
