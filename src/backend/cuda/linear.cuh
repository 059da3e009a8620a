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

// Which kernel run_linear takes for a small-M op: `measured` is the default: M = 1 through the
// fixed-order GEMV (linear_gemv.cuh), M > 1 as the H200 measurements support (linear.cu);
// `skinny_when_fits` sends every op the skinny kernels fit to them, M = 1 included, for the tests
// that check those kernels on every shape; `mma_decode` takes M = 1 as before the fixed-order
// GEMV (skinny for N >= 32768, else cuBLASLt: other bits), for benchmarks that compare the two.
// The environment variable FERRY_DECODE_GEMV=mma starts a process in `mma_decode` (developer
// switch: the decode stage timed with the old kernels). Process-wide; set it only while no
// linear op is being enqueued.
enum class LinearRoute { measured, skinny_when_fits, mma_decode };
void set_linear_route(LinearRoute route);

// Sets a route for a scope and restores the previous one (tests).
class LinearRouteScope {
 public:
  explicit LinearRouteScope(LinearRoute route);
  ~LinearRouteScope();
  LinearRouteScope(const LinearRouteScope&) = delete;
  LinearRouteScope& operator=(const LinearRouteScope&) = delete;

 private:
  LinearRoute previous_;
};

// The op through cuBLASLt whatever its shape (the benchmark times it against the skinny kernel).
Status run_linear_cublaslt(const OpContext& ctx, const Linear& op);

}  // namespace ferry::cuda
