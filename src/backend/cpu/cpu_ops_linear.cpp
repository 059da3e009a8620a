// Linear and SwiGLU: the matrix product and the gated MLP activation.
#include <algorithm>
#include <vector>

#include "backend/cpu/cpu_common.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/gemv_order.h"
#include "core/bf16.h"
#include "core/thread_pool.h"

namespace ferry::cpu {
namespace {

// Tile sizes: a tile of kTileN weight rows is reused across all x rows, kBlockM x rows at a time,
// so the weight tile stays in cache while the x block is read from L1/L2.
constexpr int64_t kTileN = 32;
constexpr int64_t kBlockM = 8;

// acc[(m - m0) * kTileN + (n - n0)] = Σ_k xf[m, k]·w[n, k] for m in [m0, m1), n in [n0, n1).
[[gnu::always_inline]] inline void tile_dots_body(const float* xf, int64_t k_dim, int64_t m0,
                                                  int64_t m1, const TensorView& w, int64_t n0,
                                                  int64_t n1, float* acc) {
  for (int64_t n = n0; n < n1; ++n) {
    const uint16_t* wrow = row_ptr<const uint16_t>(w, n);
    float* col = acc + (n - n0);
    int64_t m = m0;
    for (; m + 4 <= m1; m += 4) {
      float out[4];
      dot_rows_f32<4>(xf + m * k_dim, k_dim, wrow, k_dim, out);
      for (int r = 0; r < 4; ++r) col[(m + r - m0) * kTileN] = out[r];
    }
    float out[3] = {0, 0, 0};
    switch (m1 - m) {
      case 3:
        dot_rows_f32<3>(xf + m * k_dim, k_dim, wrow, k_dim, out);
        break;
      case 2:
        dot_rows_f32<2>(xf + m * k_dim, k_dim, wrow, k_dim, out);
        break;
      case 1:
        out[0] = dot_f32(xf + m * k_dim, wrow, k_dim);
        break;
      default:
        break;
    }
    for (int64_t r = 0; r < m1 - m; ++r) col[(m + r - m0) * kTileN] = out[r];
  }
}

void tile_dots_default(const float* xf, int64_t k_dim, int64_t m0, int64_t m1, const TensorView& w,
                       int64_t n0, int64_t n1, float* acc) {
  tile_dots_body(xf, k_dim, m0, m1, w, n0, n1, acc);
}

// The same loop compiled for AVX2 where the machine has it: the same operations in the same order
// (AVX2 without FMA, so no contraction), hence the same bits. Chosen at run time rather than
// through an ifunc (target_clones), whose resolver runs before sanitizer runtimes start.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define FERRY_CPU_AVX2 1
[[gnu::target("avx2")]] void tile_dots_avx2(const float* xf, int64_t k_dim, int64_t m0, int64_t m1,
                                            const TensorView& w, int64_t n0, int64_t n1,
                                            float* acc) {
  tile_dots_body(xf, k_dim, m0, m1, w, n0, n1, acc);
}
#endif

using TileDots = void (*)(const float*, int64_t, int64_t, int64_t, const TensorView&, int64_t,
                          int64_t, float*);
TileDots pick_tile_dots() {
#ifdef FERRY_CPU_AVX2
  if (__builtin_cpu_supports("avx2")) return tile_dots_avx2;
#endif
  return tile_dots_default;
}

// y = epilogue(dot) for one output element (ops.h Linear): bias in fp32, then for a bf16 y the
// rounding before the activation.
struct Epilogue {
  const Linear& op;
  bool has_bias = !op.bias.empty();
  bool y_bf16 = op.y.dtype == DType::bf16;
  void operator()(int64_t m, int64_t n, float acc) const {
    if (has_bias) acc += bf16_to_f32(row_ptr<const uint16_t>(op.bias, 0)[n]);
    if (y_bf16) {
      const float t = round_bf16(acc);
      row_ptr<uint16_t>(op.y, m)[n] = f32_to_bf16(activate(op.act, t));
    } else {
      row_ptr<float>(op.y, m)[n] = activate(op.act, acc);
    }
  }
};

// M = 1: the dot products in the batch-1 GEMV's order (backend/gemv_order.h), the order the CUDA
// backend and the host engine keep, so that a decode step gives the same bits on all of them.
Status linear_gemv(const Linear& op, ThreadPool* pool) {
  const int64_t k_dim = op.x.cols;
  const int64_t n_cols = op.w.rows;
  std::vector<uint16_t> xb(static_cast<size_t>(k_dim));
  if (op.x.dtype == DType::bf16) {
    const uint16_t* p = row_ptr<const uint16_t>(op.x, 0);
    std::copy(p, p + k_dim, xb.begin());
  } else {
    const float* p = row_ptr<const float>(op.x, 0);
    for (int64_t k = 0; k < k_dim; ++k) xb[static_cast<size_t>(k)] = f32_to_bf16(p[k]);
  }
  const Epilogue finish{op};
  const GemvIsa isa = gemv_best_isa();
  constexpr int64_t kRows = 64;  // rows per task, and per call of the engine
  const int64_t tasks = (n_cols + kRows - 1) / kRows;
  parallel_for(pool, tasks, 1, [&](int64_t begin, int64_t end) {
    float dots[kRows];
    for (int64_t t = begin; t < end; ++t) {
      const int64_t n0 = t * kRows;
      const int64_t rows = std::min(kRows, n_cols - n0);
      gemv_fixed_order(isa, xb.data(), row_ptr<const uint16_t>(op.w, n0), op.w.stride(), rows,
                       k_dim, dots);
      for (int64_t r = 0; r < rows; ++r) finish(0, n0 + r, dots[r]);
    }
  });
  return Status();
}

}  // namespace

Status linear(const Linear& op, ThreadPool* pool) {
  const int64_t m_rows = op.x.rows;
  const int64_t k_dim = op.x.cols;
  const int64_t n_cols = op.w.rows;
  if (m_rows == 0 || n_cols == 0) return Status();
  if (m_rows == 1) return linear_gemv(op, pool);

  // x once as f32 with bf16 values (an f32 input is rounded to bf16, as autocast does).
  std::vector<float> xf(static_cast<size_t>(m_rows * k_dim));
  parallel_for(pool, m_rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, k_dim)),
               [&](int64_t begin, int64_t end) {
                 for (int64_t m = begin; m < end; ++m) {
                   float* dst = xf.data() + m * k_dim;
                   load_row_f32(op.x, m, dst);
                   if (op.x.dtype == DType::f32) {
                     for (int64_t k = 0; k < k_dim; ++k) dst[k] = round_bf16(dst[k]);
                   }
                 }
               });

  const Epilogue finish{op};

  static const TileDots tile_dots = pick_tile_dots();
  const int64_t num_tiles = (n_cols + kTileN - 1) / kTileN;
  parallel_for(pool, num_tiles, 1, [&](int64_t tile_begin, int64_t tile_end) {
    float acc[kBlockM * kTileN];
    for (int64_t tile = tile_begin; tile < tile_end; ++tile) {
      const int64_t n0 = tile * kTileN;
      const int64_t n1 = std::min(n_cols, n0 + kTileN);
      for (int64_t m0 = 0; m0 < m_rows; m0 += kBlockM) {
        const int64_t m1 = std::min(m_rows, m0 + kBlockM);
        tile_dots(xf.data(), k_dim, m0, m1, op.w, n0, n1, acc);
        for (int64_t m = m0; m < m1; ++m) {
          for (int64_t n = n0; n < n1; ++n) finish(m, n, acc[(m - m0) * kTileN + (n - n0)]);
        }
      }
    }
  });
  return Status();
}

Status swiglu(const SwiGlu& op, ThreadPool* pool) {
  const int64_t cols = op.out.cols;
  parallel_for(pool, op.out.rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, cols)),
               [&](int64_t begin, int64_t end) {
                 for (int64_t r = begin; r < end; ++r) {
                   const uint16_t* g = row_ptr<const uint16_t>(op.gate, r);
                   const uint16_t* u = row_ptr<const uint16_t>(op.up, r);
                   uint16_t* o = row_ptr<uint16_t>(op.out, r);
                   for (int64_t c = 0; c < cols; ++c) {
                     const float a = round_bf16(silu(bf16_to_f32(g[c])));
                     o[c] = f32_to_bf16(a * bf16_to_f32(u[c]));
                   }
                 }
               });
  return Status();
}

}  // namespace ferry::cpu
