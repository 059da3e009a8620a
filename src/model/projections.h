// Several projections of one input, as one matrix product when the weights allow it.
//
// A decoder layer's q/k/v (and gate/up) projections read the same input. Weight groups lay their
// tensors out back to back in table order, so those weights usually form one [Σ rows, K] matrix
// and one GEMM computes every output column at once: fewer launches, and one wide product where
// the small ones would leave the GPU idle (decode). Each output element is the same fp32 dot
// product either way (ops.h Linear), so only the backend's choice of reduction order can differ.
#pragma once

#include <initializer_list>

#include "backend/backend.h"
#include "core/status.h"
#include "core/tensor.h"

namespace ferry {

// The weights as one [Σ rows, K] view when each is contiguous, they share K and dtype and each
// starts where the previous one ends; otherwise an empty view.
TensorView adjacent_rows(std::initializer_list<TensorView> weights);

// y = x · [w0; w1; ...]ᵀ: y's columns hold each projection's outputs in order (y: [M, Σ rows]).
// One Linear when the weights are adjacent, one Linear per weight into y's column slices otherwise.
Status run_projections(Backend& backend, Stream& stream, const TensorView& x,
                       std::initializer_list<TensorView> weights, const TensorView& y);

}  // namespace ferry
