// The ops every backend runs, as plain data. A model emits these; a backend executes them in
// stream order. Each op documents its exact numerics, because the CPU backend is the reference
// the CUDA backend is diff-tested against, and because the rounding points follow the PyTorch
// reference (bf16 storage, fp32 accumulation, autocast; ../shared/spec/alpamayo-r1-forward.md §7).
//
// Conventions
// - Views are 2-D (core/tensor.h). Weights are PyTorch Linear layout [out, in], row-major.
// - "bf16(v)" = round to nearest even bf16. Accumulation is always fp32.
// - Unless an op says otherwise, inputs may be bf16 or f32, and an f32 input that feeds a matrix
//   product is rounded to bf16 first (autocast's cast of Linear inputs).
// - Outputs never alias inputs unless the op says "in place" or "may alias".
// - Reductions run in a fixed order; the same inputs give the same bits on the same backend.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <variant>

#include "core/status.h"
#include "core/tensor.h"

namespace ferry {

enum class Activation : uint8_t { none, silu, gelu_tanh, gelu_erf };

// y = act(x · wᵀ + bias).
// x: [M, K] bf16|f32 (f32 rounded to bf16); w: [N, K] bf16; bias: [1, N] bf16 or empty;
// y: [M, N] bf16|f32.
// Numerics: acc = Σ_k x·w in fp32 (+ bias in fp32). y bf16: t = bf16(acc), y = bf16(act(t)) (act
// in fp32 on the rounded value, as PyTorch runs a bf16 Linear then a bf16 activation).
// y f32: y = act(acc). silu(u) = u / (1 + e^-u); gelu_tanh(u) = ½u(1 + tanh(√(2/π)(u +
// 0.044715u³))); gelu_erf(u) = ½u(1 + erf(u/√2)).
// Order of the sum: at M = 1 (every decode step) every backend sums acc in the fixed order of
// backend/gemv_order.h (256 position sums, 32 lane sums, a butterfly), so the CPU, the GPU and the
// host engine give the same bits; at M > 1 each backend has its own order (the results agree to
// rounding, and each backend is deterministic).
struct Linear {
  TensorView x, w, bias, y;
  Activation act = Activation::none;
};

// RMSNorm over each `dim`-wide chunk of every row (dim == cols for a plain norm; dim == head_dim
// for the per-head q/k norms). w: [1, dim] bf16. y may alias x.
// Numerics (spec §1): u = f32(x), r = 1/sqrt(mean(u²) + eps), n = u·r.
//   x bf16 -> y bf16 = bf16(bf16(n) · w)      (the LM)
//   x f32  -> y f32  = n · f32(w)             (the expert's fp32 residual stream)
// y's dtype must equal x's.
struct RmsNorm {
  TensorView x, w, y;
  int64_t dim = 0;
  float eps = 1e-6f;
};

// LayerNorm over each row, in fp32: y = (u − mean)/sqrt(var + eps)·w + b, var biased.
// x: bf16|f32; w, b: [1, cols] bf16; y: bf16|f32 (rounded on store). y may alias x when the
// dtypes match.
struct LayerNorm {
  TensorView x, w, b, y;
  float eps = 1e-6f;
};

// How rotary arithmetic is rounded.
//   bf16: cos/sin rounded to bf16; x·cos and rot(x)·sin each rounded to bf16, and their sum
//         (the LM: its cos/sin are cast to the bf16 hidden dtype, spec §1).
//   f32:  all in fp32 from f32(x), rounded once to x's dtype on store (vision tower and expert).
enum class RopeMath : uint8_t { bf16, f32 };

// Rotary embedding in place, half-split (rotate_half): for each head and j < half = head_dim/2,
//   x'[j]        = x[j]·c_j − x[j+half]·s_j
//   x'[j + half] = x[j+half]·c_j + x[j]·s_j
// with c_j = cos[row, j], s_j = sin[row, j].
// x: [S, heads·head_dim] bf16 (row_stride allowed); cos, sin: [S, half] f32.
struct Rope {
  TensorView x, cos, sin;
  int num_heads = 0;
  int head_dim = 0;
  RopeMath math = RopeMath::bf16;
};

// Text rotary tables from positions, on the device (decode steps need new ones every token).
// pos: [S, 3] i32, columns (t, h, w). cos, sin: [S, half] f32 with half = head_dim/2.
// inv_freq_j = 1 / theta^(2j/head_dim) in fp32 (float(2j)/head_dim, then powf, then reciprocal).
// Interleaved M-RoPE (spec §2), with sections = {t, h, w} (e.g. {24, 20, 20}):
//   row(j) = h if j < 3·sections[1] and j mod 3 == 1; w if j < 3·sections[2] and j mod 3 == 2;
//   t otherwise. angle = f32(pos[row(j)]) · inv_freq_j; cos/sin of that angle in fp32.
// With all three columns equal this is plain 1-D RoPE.
// llama3 (factor > 0) rescales inv_freq as transformers' rope_type "llama3" does, in fp32 and in
// its order (rope_inv_freq): with L = original_max_positions, wavelen = f32(2π)·(1/inv_freq),
//   wavelen > L / low_freq_factor:  inv_freq / factor
//   wavelen < L / high_freq_factor: inv_freq
//   otherwise, s = ((1/wavelen)·L − low_freq_factor) / (high_freq_factor − low_freq_factor):
//                  (1 − s)·inv_freq / factor + s·inv_freq
// The scaled table is computed on the host (the same code for every backend).
struct RopeLlama3 {
  float factor = 0.0f;  // 0: no scaling
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  float original_max_positions = 8192.0f;
};

struct RopeTable {
  TensorView pos, cos, sin;
  float theta = 5e6f;
  int head_dim = 128;
  std::array<int, 3> sections = {24, 20, 20};
  RopeLlama3 llama3;
};

// The largest head_dim a RopeTable with llama3 scaling takes (its table is a kernel argument).
inline constexpr int kMaxScaledRopeHeadDim = 512;

// inv_freq_j of a RopeTable, j < head_dim / 2, computed on the host in fp32 (out holds
// head_dim / 2 floats). The CPU backend's table, and the CUDA backend's when llama3 is set.
void rope_inv_freq(const RopeTable& op, float* out);

// One contiguous run of keys and values: k, v: [rows, kv_heads·head_dim] (row_stride allowed).
struct KvSpan {
  TensorView k, v;
};

// Scaled dot-product attention with grouped-query heads, never materializing all scores.
// q: [S, heads·head_dim] bf16. Keys are the concatenation of kv[0..num_spans) (key index runs
// over span 0's rows, then span 1's). Query head h reads kv head h / (heads / kv_heads).
// causal: query i sees key j iff j <= q_pos0 + i; otherwise every key is visible.
// out: [S, heads·head_dim] bf16. scores = q·k·scale in fp32, softmax in fp32 (max-subtracted),
// out = bf16(Σ p·v) with fp32 accumulation. A query that sees no key gets zeros.
//
// Two optional device-side inputs let one recorded op (a graph) serve work whose sizes change:
// - q_pos0_dev: [1, 1] i32, read when the work runs instead of q_pos0 (which must then be 0);
//   causal only. Keys past q_pos0 + S − 1 are never read, so the spans may run to the end of the
//   cache's capacity (decode steps: one op for every step).
// - segments: [n + 1, 1] i32, 0 = seg[0] <= seg[1] <= ... <= seg[n] = S: queries and keys are cut
//   into n segments at those rows and query i of segment s sees only the keys of segment s (the
//   images of a vision batch, one launch for all). Non-causal, one span with S rows; every
//   segment has at most max_segment_rows rows (which sizes the launch). A backend that can read
//   the offsets checks them; the CUDA kernels clamp them into [0, S].
struct Attention {
  TensorView q;
  std::array<KvSpan, 2> kv{};
  int num_spans = 1;
  TensorView out;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  float scale = 1.0f;
  bool causal = false;
  int64_t q_pos0 = 0;
  TensorView q_pos0_dev;  // optional, see above
  TensorView segments;    // optional, see above
  int64_t max_segment_rows = 0;
};

// out = bf16(bf16(silu(gate)) · up). gate, up, out: [M, I] bf16 (row_stride allowed, so gate and
// up may be the two halves of one fused projection).
struct SwiGlu {
  TensorView gate, up, out;
};

// dst += src, in dst's dtype: bf16 dst -> bf16(f32(dst) + f32(src)); f32 dst -> dst + f32(src).
// src: bf16|f32, same shape.
struct Add {
  TensorView dst, src;
};

// dst[rows[i]] += src[i] for each i, numerics as Add. rows: [n, 1] i32, distinct, in range.
struct AddRows {
  TensorView dst, src, rows;
};

// out[i] = table[ids[i]]: the token embedding. ids: [n, 1] i32; ids out of range are an error
// the model checks before emitting the op.
struct GatherRows {
  TensorView table, ids, out;
};

// dst[rows[i]] = src[i]: image embeddings into their prompt positions. Same dtype. rows: [n, 1]
// i32, distinct, in range (a repeat is an error: the result would depend on execution order).
struct ScatterRows {
  TensorView src, rows, dst;
};

// y = x converted (f32 -> bf16 rounds to nearest even; bf16 -> f32 exact). Same shape.
struct Cast {
  TensorView x, y;
};

// dst = src, element for element, same dtype and shape; strides may differ (KV cache writes).
struct Copy {
  TensorView src, dst;
};

// Bilinear position embedding of the vision tower (spec §3.2), all in bf16 arithmetic:
// out[r] = bf16(bf16(bf16(bf16(E[i0]·w0) + bf16(E[i1]·w1)) + bf16(E[i2]·w2)) + bf16(E[i3]·w3))
// with (i_k, w_k) = (idx[r, k], bf16(weight[r, k])). table: [P, C] bf16; idx: [n, 4] i32;
// weight: [n, 4] f32; out: [n, C] bf16.
struct PosEmbedInterp {
  TensorView table, idx, weight, out;
};

// out[r] = the first column index of the largest value of row r (NaN never wins; a row of only
// NaN gives 0).
// x: [M, N] bf16|f32; out: [M, 1] i32.
struct Argmax {
  TensorView x, out;
};

// Fused ops: each is exactly a sequence of the ops above (same numerics, same rounding points),
// done in one pass so that a decode step launches fewer kernels. A backend may run the sequence.

// dst += src, then y = RmsNorm(dst): exactly Add{dst, src} then RmsNorm{dst, w, y, dst.cols, eps}
// (a decoder layer's residual add and the norm after it). dst: bf16|f32; src: bf16|f32, dst's
// shape; w: [1, cols] bf16; y: dst's dtype and shape, disjoint from dst and src.
struct AddRmsNorm {
  TensorView dst, src, w, y;
  float eps = 1e-6f;
};

// Qwen3's per-head q and k norms, then rotary, in place on q|k heads side by side: exactly
// RmsNorm{q, wq, q, head_dim, eps}, RmsNorm{k, wk, k, head_dim, eps}, then Rope{x, cos, sin,
// q_heads + k_heads, head_dim, math}, where q is x's first q_heads·head_dim columns and k the
// rest. x: [S, (q_heads + k_heads)·head_dim] bf16 (row_stride allowed); wq, wk: [1, head_dim]
// bf16; cos, sin: [S, head_dim/2] f32.
// Optionally (kv_dst given) it then stores the step's keys and values: exactly ScatterRows{kv,
// rows, kv_dst}, where kv: [S, 2·k_heads·head_dim] bf16 is x's k columns followed by the values
// (the k|v columns of a fused q|k|v projection: it starts at x's first k column, with x's row
// stride); rows: [S, 1] i32; kv_dst: [capacity, 2·k_heads·head_dim] bf16 (a KV cache's rows).
struct QkNormRope {
  TensorView x, wq, wk, cos, sin;
  int q_heads = 0;
  int k_heads = 0;
  int head_dim = 0;
  float eps = 1e-6f;
  RopeMath math = RopeMath::bf16;
  TensorView kv{};      // optional, see above
  TensorView rows{};    // optional
  TensorView kv_dst{};  // optional
};

// The sequences the fused ops stand for (validation, and backends that run them unfused).
Add add_part(const AddRmsNorm& op);
RmsNorm norm_part(const AddRmsNorm& op);
RmsNorm q_norm_part(const QkNormRope& op);
RmsNorm k_norm_part(const QkNormRope& op);
Rope rope_part(const QkNormRope& op);
ScatterRows store_part(const QkNormRope& op);  // when kv_dst is given

using Op = std::variant<Linear, RmsNorm, LayerNorm, Rope, RopeTable, Attention, SwiGlu, Add,
                        AddRows, GatherRows, ScatterRows, Cast, Copy, PosEmbedInterp, Argmax,
                        AddRmsNorm, QkNormRope>;

// The op's short name ("linear", "rms_norm", ...), for logs and errors.
std::string_view op_name(const Op& op);

// Shape and dtype checks shared by every backend (the "op" layer of kernel -> launcher -> op).
// A failure names the op and the argument: "rms_norm: y: expected dtype BF16, got F32".
Status validate(const Op& op);

}  // namespace ferry
