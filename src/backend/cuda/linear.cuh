// linear: y = act(x · wᵀ + bias). A weight-streaming kernel for a few rows of x
// (linear_skinny.cuh); otherwise a cuBLASLt BF16 GEMM (fp32 accumulate and compute) followed by a
// small elementwise kernel for the activation (and, for f32 outputs, the bias).
#pragma once

#include <cublasLt.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>

#include "backend/cuda/op_context.h"

namespace ferry::cuda {

// The cuBLASLt algorithm chosen for each GEMM configuration, picked by the heuristic once and
// then reused, so one shape always runs one kernel (bit-stable run to run). Thread-safe.
class LinearAlgoCache {
 public:
  struct Key {
    int64_t m, n, k, lda, ldb, ldd;
    int d_type, epilogue;
    uint32_t align_a, align_b, align_d, align_bias;
    uint64_t workspace;
    auto tie() const {
      return std::tie(m, n, k, lda, ldb, ldd, d_type, epilogue, align_a, align_b, align_d,
                      align_bias, workspace);
    }
    bool operator<(const Key& o) const { return tie() < o.tie(); }
  };

  bool find(const Key& key, cublasLtMatmulAlgo_t* algo) const;
  void insert(const Key& key, const cublasLtMatmulAlgo_t& algo);
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::map<Key, cublasLtMatmulAlgo_t> map_;
};

// Enqueues the linear op: the skinny weight-streaming kernel when it fits (linear_skinny.cuh),
// cuBLASLt otherwise.
Status run_linear(const OpContext& ctx, const Linear& op);

// The op through cuBLASLt whatever its shape (the benchmark times it against the skinny kernel).
Status run_linear_cublaslt(const OpContext& ctx, const Linear& op);

}  // namespace ferry::cuda
