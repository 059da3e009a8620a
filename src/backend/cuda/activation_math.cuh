// The activations of ops.h on the device, two ways (device code: include from .cu files only):
// - act_ref: the reference. exp/tanh/erf in double, rounded once to float (the correctly
//   rounded float almost always, as the CPU's libm returns), the rest in fp32 with explicit _rn
//   operations. Used for f32 outputs (where it defines the exact fp32 value) and as the fallback.
// - act_bf16_bits / silu_bf16_bits: bf16(act_ref(u)) bit for bit, computed with expf/tanhf/erff
//   and a bracket test (activation_guard.h) that sends the few undecidable elements to act_ref.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/activation_guard.h"
#include "backend/ops.h"
#include "core/bf16.h"

namespace ferry::cuda {

// fp32 argument of tanh in gelu_tanh: √(2/π)·(u + 0.044715·u³), rounded as written.
__device__ __forceinline__ float gelu_tanh_arg(float u) {
  const float u3 = __fmul_rn(__fmul_rn(u, u), u);
  return __fmul_rn(0.7978845608028654f, __fadd_rn(u, __fmul_rn(0.044715f, u3)));
}
// fp32 argument of erf in gelu_erf: u/√2.
__device__ __forceinline__ float gelu_erf_arg(float u) {
  return __fmul_rn(u, 0.7071067811865476f);
}

// The reference forms. Not inlined: the fast kernels call them for rare elements only, and an
// inlined double-precision body would cost every thread its registers.
__device__ __noinline__ inline float silu_ref(float u) {
  const float e = static_cast<float>(exp(-static_cast<double>(u)));
  return __fdiv_rn(u, __fadd_rn(1.0f, e));
}
__device__ __noinline__ inline float gelu_tanh_ref(float u) {
  const float t = static_cast<float>(tanh(static_cast<double>(gelu_tanh_arg(u))));
  return __fmul_rn(__fmul_rn(0.5f, u), __fadd_rn(1.0f, t));
}
__device__ __noinline__ inline float gelu_erf_ref(float u) {
  const float e = static_cast<float>(erf(static_cast<double>(gelu_erf_arg(u))));
  return __fmul_rn(__fmul_rn(0.5f, u), __fadd_rn(1.0f, e));
}

__device__ __forceinline__ float act_ref(float u, Activation act) {
  switch (act) {
    case Activation::silu:
      return silu_ref(u);
    case Activation::gelu_tanh:
      return gelu_tanh_ref(u);
    case Activation::gelu_erf:
      return gelu_erf_ref(u);
    case Activation::none:
      break;
  }
  return u;
}

// bf16(silu_ref(u)), fast.
__device__ __forceinline__ uint32_t silu_bf16_bits(float u) {
  const float y = __fdividef(u, __fadd_rn(1.0f, expf(-u)));
  const uint32_t b = silu_bf16_or_fallback(u, y);
  return b != kActFallback ? b : f32_to_bf16(silu_ref(u));
}

// bf16(act_ref(u, A)), fast.
template <Activation A>
__device__ __forceinline__ uint32_t act_bf16_bits(float u) {
  if constexpr (A == Activation::silu) {
    return silu_bf16_bits(u);
  } else if constexpr (A == Activation::gelu_tanh) {
    const uint32_t b = gelu_bf16_or_fallback(u, tanhf(gelu_tanh_arg(u)));
    return b != kActFallback ? b : f32_to_bf16(gelu_tanh_ref(u));
  } else if constexpr (A == Activation::gelu_erf) {
    const uint32_t b = gelu_bf16_or_fallback(u, erff(gelu_erf_arg(u)));
    return b != kActFallback ? b : f32_to_bf16(gelu_erf_ref(u));
  } else {
    return f32_to_bf16(u);
  }
}

}  // namespace ferry::cuda
