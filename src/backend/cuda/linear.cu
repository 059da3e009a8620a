// Linear: run_linear sends M = 1 to the fixed-order GEMV (linear_gemv.cu), other small M with
// 16-byte aligned w rows (and K % 8 == 0) to the skinny kernels where measured faster
// (linear_skinny.cu for M <= 8, linear_skinny64.cu above), everything else through cuBLASLt,
// described here.
//
// Row-major y[M,N] = x[M,K] · w[N,K]ᵀ is computed as the column-major product
// yᵀ[N,M] = op(A)·B with A = w seen as a K×N column-major matrix (op = transpose) and B = x seen
// as K×M. Compute type fp32, scale type fp32.
//
// Rounding points (ops.h): for a bf16 y the GEMM writes t = bf16(acc + bias) (bias added in fp32
// by the BIAS epilogue), then launch_act_bf16 (activation.cu) rewrites y = bf16(act(t)) in place.
// For an f32 y the GEMM writes acc and post_f32_kernel applies y = act(acc + bias) in fp32. An f32
// x is first rounded to bf16 into stream-ordered scratch memory.
//
// Determinism: the heuristic's first answer per configuration is cached (LinearAlgoCache) and
// only reduction schemes that are deterministic and keep partial sums in fp32 are allowed (NONE,
// COMPUTE_TYPE); INPLACE and OUTPUT_TYPE would sum split-K partials in the bf16 output type.
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "backend/cuda/activation.cuh"
#include "backend/cuda/activation_math.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_resources.h"
#include "backend/cuda/linear.cuh"
#include "backend/cuda/linear_gemv.cuh"
#include "backend/cuda/linear_skinny.cuh"

namespace ferry::cuda {

bool LinearAlgoCache::find(const Key& key, cublasLtMatmulAlgo_t* algo) const {
  std::lock_guard lock(mu_);
  const auto it = map_.find(key);
  if (it == map_.end()) return false;
  *algo = it->second;
  return true;
}

void LinearAlgoCache::insert(const Key& key, const cublasLtMatmulAlgo_t& algo) {
  std::lock_guard lock(mu_);
  map_.emplace(key, algo);
}

size_t LinearAlgoCache::size() const {
  std::lock_guard lock(mu_);
  return map_.size();
}

namespace {

constexpr int kThreads = 256;

// The measured route (H200, docs/benchmarks.md, fourth call of the second session; weights
// cycled through 150 MB so they come from HBM): at M = 1 the skinny kernel (4 warps, unroll 4)
// beats cuBLASLt on vocabulary-sized outputs (LM head 1x4096->155697: 321 vs 398 us) and ties or
// loses on the decoder's projections (1x4096->24576: 50.9 vs 47.7 us; ->6144: 15.3 vs 15.7;
// 12288->4096: 28.6 vs 28.9); at M = 64 cuBLASLt wins on every expert shape (64x8256->2048: 13.8
// vs 21.6 us; 64x2048->16512: 22.7 vs 33.4). So the skinny kernel takes M <= 8 with N >= 32768
// only, and the M <= 64 kernel is kept for the benchmark and the tests. Since 2026-12-06 M = 1 goes
// to the fixed-order GEMV whatever N (faster than this route on four of the five decode shapes on
// an H100; docs/benchmarks.md), so the skinny kernel serves 2 <= M <= 8 here.
constexpr int64_t kSkinnyMinN = 32768;
constexpr SkinnyConfig kSkinnyMeasuredConfig{4, 4};
LinearRoute initial_route() {
  const char* v = std::getenv("FERRY_DECODE_GEMV");
  return v != nullptr && std::string_view(v) == "mma" ? LinearRoute::mma_decode
                                                      : LinearRoute::measured;
}
LinearRoute g_route = initial_route();

__global__ void post_f32_kernel(float* y, int64_t ys, const bf16_t* bias, int64_t rows,
                                int64_t cols, Activation act) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / cols;
    const int64_t c = i - r * cols;
    float* p = y + r * ys + c;
    float v = *p;
    if (bias != nullptr) v = __fadd_rn(v, to_float(bias[c]));
    *p = act_ref(v, act);  // f32 outputs keep the double-based reference's exact bits
  }
}

__global__ void round_to_bf16_kernel(const float* x, int64_t xs, bf16_t* y, int64_t rows,
                                     int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / cols;
    const int64_t c = i - r * cols;
    y[i] = f32_to_bf16(x[r * xs + c]);
  }
}

// Largest power of two (<= 256) dividing the address.
uint32_t alignment_of(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  uint32_t al = 256;
  while (al > 1 && (a % al) != 0) al /= 2;
  return al;
}

struct DescDeleter {
  void operator()(cublasLtMatmulDescOpaque_t* d) const { (void)cublasLtMatmulDescDestroy(d); }
};
struct LayoutDeleter {
  void operator()(cublasLtMatrixLayoutOpaque_t* l) const { (void)cublasLtMatrixLayoutDestroy(l); }
};
struct PrefDeleter {
  void operator()(cublasLtMatmulPreferenceOpaque_t* p) const {
    (void)cublasLtMatmulPreferenceDestroy(p);
  }
};
using Desc = std::unique_ptr<cublasLtMatmulDescOpaque_t, DescDeleter>;
using Layout = std::unique_ptr<cublasLtMatrixLayoutOpaque_t, LayoutDeleter>;
using Pref = std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, PrefDeleter>;

Result<Layout> make_layout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld) {
  cublasLtMatrixLayout_t l = nullptr;
  FERRY_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, type, static_cast<uint64_t>(rows),
                                                static_cast<uint64_t>(cols), ld));
  return Layout(l);
}

template <class T>
Status set_desc(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const T& v) {
  FERRY_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, attr, &v, sizeof v));
  return Status();
}

template <class T>
Status set_pref(cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t attr,
                const T& v) {
  FERRY_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(p, attr, &v, sizeof v));
  return Status();
}

std::string shape_string(int64_t m, int64_t n, int64_t k) {
  return "M=" + std::to_string(m) + " N=" + std::to_string(n) + " K=" + std::to_string(k);
}

// y (bf16 or f32) = x_bf16 · wᵀ (+ bias through the epilogue when `epilogue_bias`).
Status gemm(const OpContext& ctx, const bf16_t* x, int64_t ldx, const Linear& op,
            bool epilogue_bias) {
  const int64_t m = op.y.rows;
  const int64_t n = op.y.cols;
  const int64_t k = op.w.cols;
  const cudaDataType_t d_type = op.y.dtype == DType::bf16 ? CUDA_R_16BF : CUDA_R_32F;

  cublasLtMatmulDesc_t raw_desc = nullptr;
  FERRY_CUBLAS_CHECK(cublasLtMatmulDescCreate(&raw_desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const Desc desc(raw_desc);
  FERRY_RETURN_IF_ERROR(set_desc(raw_desc, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T));
  FERRY_RETURN_IF_ERROR(set_desc(raw_desc, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N));
  const cublasLtEpilogue_t epilogue =
      epilogue_bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  FERRY_RETURN_IF_ERROR(set_desc(raw_desc, CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue));
  if (epilogue_bias) {
    const void* bias = op.bias.data;
    FERRY_RETURN_IF_ERROR(set_desc(raw_desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias));
    const int32_t bias_type = CUDA_R_16BF;
    FERRY_RETURN_IF_ERROR(set_desc(raw_desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, bias_type));
  }

  FERRY_ASSIGN_OR_RETURN(Layout a, make_layout(CUDA_R_16BF, k, n, op.w.stride()));
  FERRY_ASSIGN_OR_RETURN(Layout b, make_layout(CUDA_R_16BF, k, m, ldx));
  FERRY_ASSIGN_OR_RETURN(Layout d, make_layout(d_type, n, m, op.y.stride()));

  LinearAlgoCache::Key key{};
  key.m = n;
  key.n = m;
  key.k = k;
  key.lda = op.w.stride();
  key.ldb = ldx;
  key.ldd = op.y.stride();
  key.d_type = static_cast<int>(d_type);
  key.epilogue = static_cast<int>(epilogue);
  key.align_a = alignment_of(op.w.data);
  key.align_b = alignment_of(x);
  key.align_d = alignment_of(op.y.data);
  key.align_bias = epilogue_bias ? alignment_of(op.bias.data) : 0;
  key.workspace = ctx.workspace_bytes;

  cublasLtMatmulAlgo_t algo{};
  if (ctx.algo_cache == nullptr || !ctx.algo_cache->find(key, &algo)) {
    cublasLtMatmulPreference_t raw_pref = nullptr;
    FERRY_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&raw_pref));
    const Pref pref(raw_pref);
    const uint64_t ws = ctx.workspace_bytes;
    FERRY_RETURN_IF_ERROR(set_pref(raw_pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, ws));
    const uint32_t schemes =
        CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    FERRY_RETURN_IF_ERROR(set_pref(raw_pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, schemes));
    FERRY_RETURN_IF_ERROR(
        set_pref(raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_a));
    FERRY_RETURN_IF_ERROR(
        set_pref(raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_b));
    FERRY_RETURN_IF_ERROR(
        set_pref(raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_d));
    FERRY_RETURN_IF_ERROR(
        set_pref(raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_d));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    FERRY_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(ctx.lt, raw_desc, a.get(), b.get(), d.get(),
                                                      d.get(), raw_pref, 1, &result, &found));
    if (found == 0) {
      return make_error(ErrorCode::unsupported,
                        "linear: cuBLASLt has no algorithm for " + shape_string(m, n, k));
    }
    algo = result.algo;
    if (ctx.algo_cache != nullptr) ctx.algo_cache->insert(key, algo);
  }

  const float alpha = 1.0f;
  const float beta = 0.0f;
  FERRY_CUBLAS_CHECK(cublasLtMatmul(ctx.lt, raw_desc, &alpha, op.w.data, a.get(), x, b.get(), &beta,
                                    op.y.data, d.get(), op.y.data, d.get(), &algo, ctx.workspace,
                                    ctx.workspace_bytes, ctx.stream));
  return Status();
}

}  // namespace

Status run_linear(const OpContext& ctx, const Linear& op) {
  // The skinny kernels when they apply (a function of the shape and of w's 16-byte alignment, so
  // one shape always runs one kernel); cuBLASLt otherwise.
  if (g_route == LinearRoute::skinny_when_fits) {
    if (linear_skinny_fits(op)) return run_linear_skinny(ctx, op);
    if (linear_skinny64_fits(op)) return run_linear_skinny64(ctx, op);
    return run_linear_cublaslt(ctx, op);
  }
  // Batch 1: the fixed-order GEMV, whose bits the CPU backend and the host engine reproduce.
  if (g_route == LinearRoute::measured && linear_gemv_fits(op)) return run_linear_gemv(ctx, op);
  if (linear_skinny_fits(op) && op.w.rows >= kSkinnyMinN) {
    return run_linear_skinny(ctx, op, kSkinnyMeasuredConfig);
  }
  return run_linear_cublaslt(ctx, op);
}

void set_linear_route(LinearRoute route) {
  g_route = route;
}

LinearRouteScope::LinearRouteScope(LinearRoute route) : previous_(g_route) {
  g_route = route;
}

LinearRouteScope::~LinearRouteScope() {
  g_route = previous_;
}

Status run_linear_cublaslt(const OpContext& ctx, const Linear& op) {
  const int64_t m = op.y.rows;
  const int64_t n = op.y.cols;
  const int64_t k = op.w.cols;
  if (m == 0 || n == 0) return Status();
  if (k == 0) return make_error(ErrorCode::invalid_argument, "linear: K must be > 0");

  const bf16_t* x = ptr<const bf16_t>(op.x);
  int64_t ldx = op.x.stride();
  StreamScratch x_bf16;
  if (op.x.dtype == DType::f32) {
    FERRY_ASSIGN_OR_RETURN(x_bf16, take_scratch(ctx, static_cast<size_t>(m * k) * 2));
    round_to_bf16_kernel<<<grid_for(m * k, kThreads), kThreads, 0, ctx.stream>>>(
        ptr<const float>(op.x), op.x.stride(), static_cast<bf16_t*>(x_bf16.get()), m, k);
    FERRY_RETURN_IF_ERROR(launch_status("round_to_bf16_kernel"));
    x = static_cast<const bf16_t*>(x_bf16.get());
    ldx = k;
  }

  const bool has_bias = !op.bias.empty();
  if (op.y.dtype == DType::bf16) {
    FERRY_RETURN_IF_ERROR(gemm(ctx, x, ldx, op, has_bias));
    if (op.act != Activation::none) {
      FERRY_RETURN_IF_ERROR(
          launch_act_bf16(ctx.stream, ptr<bf16_t>(op.y), op.y.stride(), m, n, op.act));
    }
  } else {
    FERRY_RETURN_IF_ERROR(gemm(ctx, x, ldx, op, false));
    if (has_bias || op.act != Activation::none) {
      post_f32_kernel<<<grid_for(m * n, kThreads), kThreads, 0, ctx.stream>>>(
          ptr<float>(op.y), op.y.stride(), has_bias ? ptr<const bf16_t>(op.bias) : nullptr, m, n,
          op.act);
      FERRY_RETURN_IF_ERROR(launch_status("post_f32_kernel"));
    }
  }
  return Status();
}

}  // namespace ferry::cuda
