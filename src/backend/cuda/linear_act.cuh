// The activation of the linear op on an fp32 value (ops.h), shared by the cuBLASLt epilogue
// kernels (linear.cu) and the skinny kernel (linear_skinny.cu) so both round the same way.
// CUDA-only header.
#pragma once

#include <cuda_runtime.h>

#include "backend/ops.h"

namespace ferry::cuda {

// Transcendental parts in double, rounded once to float (see silu in elementwise.cu); the
// arithmetic around them uses explicit _rn intrinsics so nvcc cannot contract it into FMAs.
__device__ __forceinline__ float apply_act(float u, Activation act) {
  switch (act) {
    case Activation::silu: {
      const float e = static_cast<float>(exp(-static_cast<double>(u)));
      return __fdiv_rn(u, __fadd_rn(1.0f, e));
    }
    case Activation::gelu_tanh: {
      const float k0 = 0.7978845608028654f;  // sqrt(2/pi)
      const float u3 = __fmul_rn(__fmul_rn(u, u), u);
      const float inner = __fmul_rn(k0, __fadd_rn(u, __fmul_rn(0.044715f, u3)));
      const float t = static_cast<float>(tanh(static_cast<double>(inner)));
      return __fmul_rn(__fmul_rn(0.5f, u), __fadd_rn(1.0f, t));
    }
    case Activation::gelu_erf: {
      const float e =
          static_cast<float>(erf(static_cast<double>(__fmul_rn(u, 0.7071067811865476f))));
      return __fmul_rn(__fmul_rn(0.5f, u), __fadd_rn(1.0f, e));
    }
    case Activation::none:
      break;
  }
  return u;
}

}  // namespace ferry::cuda
