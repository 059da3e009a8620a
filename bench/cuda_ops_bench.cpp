// CUDA op micro-benchmarks at the model's shapes: time per call (median of runs), and the rate
// against the machine's bound: GB/s for memory-bound ops (HBM 4.8 TB/s datasheet, ~4.3 TB/s
// measured copy on the H200 here, docs/benchmarks.md), TFLOP/s for matrix-bound ones (dense bf16
// ~990 datasheet, ~790 measured with PyTorch). Inputs are random; outputs are not checked here
// (tests/cuda does that).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/activation.cuh"
#include "backend/cuda/attention.cuh"
#include "backend/cuda/attention_decode.cuh"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_stream.h"
#include "backend/cuda/elementwise.cuh"
#include "backend/cuda/linear.cuh"
#include "backend/cuda/linear_gemv.cuh"
#include "backend/cuda/linear_skinny.cuh"
#include "backend/cuda/norm.cuh"
#include "backend/cuda/rope.cuh"
#include "core/bf16.h"
#include "core/stats.h"

namespace {

using ferry::Backend;
using ferry::DType;
using ferry::make_view;

struct Bench {
  Backend& be;
  ferry::Stream& stream;
  std::vector<ferry::DeviceBuffer> keep;

  // A device buffer whose first `fill` bytes (all by default) are random bf16 values in
  // [-scale, scale].
  void* buffer(size_t bytes, size_t fill = SIZE_MAX, float scale = 1.0f) {
    auto b = be.allocate(bytes);
    if (!b.ok()) {
      std::fprintf(stderr, "allocate: %s\n", b.error().to_string().c_str());
      std::exit(1);
    }
    std::vector<uint16_t> host(std::min(bytes, fill) / 2);
    std::mt19937 gen(static_cast<unsigned>(keep.size() + 1));
    std::uniform_real_distribution<float> dist(-scale, scale);
    for (auto& h : host) h = ferry::f32_to_bf16(dist(gen));
    be.copy_to_device(stream, b->data(), host.data(), host.size() * 2);
    (void)be.synchronize(stream);
    keep.push_back(std::move(b).value());
    return keep.back().data();
  }

  // An i32 [n, 1] table with the given values.
  ferry::TensorView ints(const std::vector<int32_t>& values) {
    auto b = be.allocate(values.size() * 4);
    if (!b.ok()) {
      std::fprintf(stderr, "allocate: %s\n", b.error().to_string().c_str());
      std::exit(1);
    }
    be.copy_to_device(stream, b->data(), values.data(), values.size() * 4);
    (void)be.synchronize(stream);
    keep.push_back(std::move(b).value());
    return make_view(keep.back().data(), DType::i32, static_cast<int64_t>(values.size()), 1);
  }

  // Seconds per call (one call = every op of `ops`, in order).
  double time(const std::vector<ferry::Op>& ops, int reps = 20) {
    return time_body(
        [&]() -> ferry::Status {
          for (const ferry::Op& op : ops) FERRY_RETURN_IF_ERROR(be.run(stream, op));
          return ferry::Status();
        },
        reps);
  }
  // Seconds per call: `reps` calls enqueued back to back, then one synchronize (so host round
  // trips are not counted); the median of 5 such batches after a warm-up batch.
  double time(const ferry::Op& op, int reps = 20) {
    return time_body([&] { return be.run(stream, op); }, reps);
  }
  double time_body(const std::function<ferry::Status()>& body, int reps = 20) {
    std::vector<double> t;
    for (int batch = 0; batch < 6; ++batch) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < reps; ++i) {
        const ferry::Status st = body();
        if (!st.ok()) {
          std::fprintf(stderr, "op failed: %s\n", st.error().to_string().c_str());
          std::exit(1);
        }
      }
      const ferry::Status sy = be.synchronize(stream);
      const auto t1 = std::chrono::steady_clock::now();
      if (!sy.ok()) {
        std::fprintf(stderr, "sync failed: %s\n", sy.error().to_string().c_str());
        std::exit(1);
      }
      if (batch > 0) t.push_back(std::chrono::duration<double>(t1 - t0).count() / reps);
    }
    return ferry::upper_median(std::move(t));
  }

  // Seconds per call on the GPU alone: `reps` calls captured into one CUDA graph, the graph
  // replayed 6 times (first is warm-up), median of the rest. No host work per call.
  double time_graph(const std::vector<ferry::Op>& ops, int reps = 20) {
    return time_graph_body(
        [&]() -> ferry::Status {
          for (const ferry::Op& op : ops) FERRY_RETURN_IF_ERROR(be.run(stream, op));
          return ferry::Status();
        },
        reps);
  }
  double time_graph(const ferry::Op& op, int reps = 20) {
    return time_graph_body([&] { return be.run(stream, op); }, reps);
  }
  double time_graph_body(const std::function<ferry::Status()>& body, int reps = 20) {
    // Recorded through the backend, as the executor records a call; the capture is ended
    // whatever the body returns.
    ferry::Status captured = be.begin_capture(stream);
    if (captured.ok()) {
      for (int i = 0; i < reps && captured.ok(); ++i) captured = body();
    }
    auto graph = be.end_capture(stream);
    if (!captured.ok() || !graph.ok()) {
      std::fprintf(stderr, "capture failed: %s\n",
                   (!captured.ok() ? captured : graph.status()).error().to_string().c_str());
      std::exit(1);
    }
    std::vector<double> t;
    for (int batch = 0; batch < 6; ++batch) {
      const auto t0 = std::chrono::steady_clock::now();
      const ferry::Status st = be.launch(stream, **graph);
      const ferry::Status sy = be.synchronize(stream);
      const auto t1 = std::chrono::steady_clock::now();
      if (!st.ok() || !sy.ok()) {
        std::fprintf(stderr, "graph failed: %s\n",
                     (!st.ok() ? st : sy).error().to_string().c_str());
        std::exit(1);
      }
      if (batch > 0) t.push_back(std::chrono::duration<double>(t1 - t0).count() / reps);
    }
    return ferry::upper_median(std::move(t));
  }
};

// One line: time per call from back-to-back enqueues (host included) and from graph replay (GPU
// only); the rates use the graph time.
void row(const std::string& name, Bench& b, const std::vector<ferry::Op>& ops, double bytes,
         double flops) {
  const double host = b.time(ops);
  const double sec = b.time_graph(ops);
  std::printf("%-58s %9.1f us %9.1f us %8.0f GB/s %8.1f TFLOP/s\n", name.c_str(), host * 1e6,
              sec * 1e6, bytes / sec / 1e9, flops / sec / 1e12);
}

ferry::Attention attention(Bench& b, int64_t s, int64_t l, int h, int kv, int d, bool causal) {
  ferry::Attention a;
  a.q = make_view(b.buffer(static_cast<size_t>(s * h * d) * 2), DType::bf16, s, h * d);
  a.kv[0].k = make_view(b.buffer(static_cast<size_t>(l * kv * d) * 2), DType::bf16, l, kv * d);
  a.kv[0].v = make_view(b.buffer(static_cast<size_t>(l * kv * d) * 2), DType::bf16, l, kv * d);
  a.out = make_view(b.buffer(static_cast<size_t>(s * h * d) * 2), DType::bf16, s, h * d);
  a.num_heads = h;
  a.num_kv_heads = kv;
  a.head_dim = d;
  a.scale = 1.0f / std::sqrt(static_cast<float>(d));
  a.causal = causal;
  a.q_pos0 = l - s;
  return a;
}

// Decode steps as the graph-captured executor runs them: the spans are the whole KV cache
// (`capacity` rows) and q_pos0 = L − 1 comes from a device int, so only L keys are read. One op
// per layer, each with its own cache, so that the calls cycling through them read K/V from HBM
// (8 layers × L=3000 is 98 MB of visible K/V, twice the H200's 50 MB L2), as a real step does.
std::vector<ferry::Attention> decode_layers(Bench& b, int64_t l, int64_t capacity, int layers) {
  const int h = 32;
  const int kv = 8;
  const int d = 128;
  void* pos = b.buffer(256);
  const auto p = static_cast<int32_t>(l - 1);
  b.be.copy_to_device(b.stream, pos, &p, 4);
  (void)b.be.synchronize(b.stream);
  const auto cache_bytes = static_cast<size_t>(capacity * kv * d) * 2;
  const auto visible_bytes = static_cast<size_t>(l * kv * d) * 2;
  std::vector<ferry::Attention> ops;
  for (int i = 0; i < layers; ++i) {
    ferry::Attention a;
    a.q = make_view(b.buffer(static_cast<size_t>(h * d) * 2), DType::bf16, 1, h * d);
    a.kv[0].k = make_view(b.buffer(cache_bytes, visible_bytes), DType::bf16, capacity, kv * d);
    a.kv[0].v = make_view(b.buffer(cache_bytes, visible_bytes), DType::bf16, capacity, kv * d);
    a.out = make_view(b.buffer(static_cast<size_t>(h * d) * 2), DType::bf16, 1, h * d);
    a.q_pos0_dev = make_view(pos, DType::i32, 1, 1);
    a.num_heads = h;
    a.num_kv_heads = kv;
    a.head_dim = d;
    a.scale = 1.0f / std::sqrt(static_cast<float>(d));
    a.causal = true;
    ops.push_back(a);
  }
  return ops;
}

// Time per call enqueued and in a graph, and the graph rate over the visible K/V bytes against
// the ~4.3 TB/s measured copy rate of the H200.
void decode_row(const std::string& name, Bench& b, const std::function<ferry::Status()>& body,
                double kv_bytes, bool enqueued = true) {
  const double host = enqueued ? b.time_body(body) : 0.0;
  const double sec = b.time_graph_body(body);
  std::printf("%-44s %9.1f us %9.1f us %8.2f TB/s\n", name.c_str(), host * 1e6, sec * 1e6,
              kv_bytes / sec / 1e12);
}

// One line for a launcher called directly (a kernel variant the backend does not pick): time
// enqueued and in a graph, and GB/s of `bytes` (read + written) at the graph time.
void body_row(const std::string& name, Bench& b, const std::function<ferry::Status()>& body,
              double bytes) {
  const double host = b.time_body(body);
  const double sec = b.time_graph_body(body);
  std::printf("%-44s %9.1f us %9.1f us %8.0f GB/s\n", name.c_str(), host * 1e6, sec * 1e6,
              bytes / sec / 1e9);
}

// The elementwise and normalization passes at the Alpamayo-R1 shapes, each new kernel against
// the one it replaced (same output bits for the activations and rope; the norms agree within the
// harness tolerance): the bf16 activation pass after the vision fc1 GEMM, prefill swiglu on the
// fused gate|up projection, the vision and merger LayerNorms, the text RMSNorms (hidden and
// per-head q/k inside qkv), and rope on q|k inside qkv (vision f32 math, text bf16 math).
void elementwise_rows(Backend& be, ferry::Stream& stream) {
  using ferry::cuda::ActImpl;
  Bench b{be, stream, {}};
  const ferry::cuda::OpContext ctx{ferry::cuda::stream_handle(stream)};
  auto view = [&](int64_t r, int64_t c, DType t = DType::bf16) {
    return make_view(b.buffer(static_cast<size_t>(r * c) * ferry::dtype_size(t)), t, r, c);
  };
  {
    // The vision fc1 (GEMM + bias, then the activation pass in place): without activation, with
    // the fast gelu_tanh (the op as the backend runs it), and with the double reference pass;
    // the differences are the pass's cost. Weights scaled by 3/sqrt(K) so that the outputs are
    // ~N(0, 1) as in the model (the bracket test falls back below u = -3.2; uniform [-1, 1]
    // weights would put half the outputs there).
    const int64_t m = 11520;
    const int64_t n = 4304;
    const int64_t k = 1152;
    ferry::Linear fc1;
    fc1.x = view(m, k);
    fc1.w = make_view(b.buffer(static_cast<size_t>(n * k) * 2, SIZE_MAX, 3.0f / std::sqrt(1152.0f)),
                      DType::bf16, n, k);
    fc1.bias = view(1, n);
    fc1.y = view(m, n);
    const double bytes = 2.0 * static_cast<double>(n * k + m * k + m * n);
    const double flops = 2.0 * static_cast<double>(m * n * k);
    row("linear fc1 11520x4304x1152 +bias", b, {fc1}, bytes, flops);
    fc1.act = ferry::Activation::gelu_tanh;
    row("  + gelu_tanh (fast pass)", b, {fc1}, bytes, flops);
    ferry::Linear plain = fc1;
    plain.act = ferry::Activation::none;
    body_row(
        "  + gelu_tanh (double pass, before)", b,
        [&]() -> ferry::Status {
          FERRY_RETURN_IF_ERROR(be.run(stream, plain));
          return ferry::cuda::launch_act_bf16(ctx.stream, static_cast<uint16_t*>(fc1.y.data), n, m,
                                              n, ferry::Activation::gelu_tanh, ActImpl::reference);
        },
        bytes);
  }
  {
    const int64_t m = 3007;
    const int64_t i = 12288;
    const ferry::TensorView gu = view(m, 2 * i);
    const ferry::SwiGlu sw{gu.slice_cols(0, i), gu.slice_cols(i, i), view(m, i)};
    for (auto [impl, tag] : {std::pair{ActImpl::fast, "fast"}, {ActImpl::reference, "double"}}) {
      body_row(
          std::string("swiglu 3007x12288 fused gate|up ") + tag, b,
          [&, impl] { return ferry::cuda::run_swiglu(ctx, sw, impl); },
          6.0 * static_cast<double>(m * i));
    }
  }
  using ferry::cuda::NormKernel;
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{11520, 1152}, {2880, 4608}}) {
    ferry::LayerNorm ln{view(rows, cols), view(1, cols), view(1, cols), view(rows, cols), 1e-6f};
    for (auto [k, tag] : {std::pair{NormKernel::best, "team"}, {NormKernel::legacy, "block"}}) {
      body_row(
          "layer_norm " + std::to_string(rows) + "x" + std::to_string(cols) + " bf16 " + tag, b,
          [&, k] { return ferry::cuda::run_layer_norm(ctx, ln, k); },
          4.0 * static_cast<double>(rows * cols));
    }
  }
  {
    const int64_t m = 3007;
    ferry::RmsNorm hidden{view(m, 4096), view(1, 4096), view(m, 4096), 4096, 1e-6f};
    const ferry::TensorView qkv = view(m, 6144);
    ferry::RmsNorm qn{qkv.slice_cols(0, 4096), view(1, 128), qkv.slice_cols(0, 4096), 128, 1e-6f};
    for (auto [k, tag] : {std::pair{NormKernel::best, "team"}, {NormKernel::legacy, "block"}}) {
      body_row(
          std::string("rms_norm 3007x4096 bf16 ") + tag, b,
          [&, k] { return ferry::cuda::run_rms_norm(ctx, hidden, k); },
          4.0 * static_cast<double>(m * 4096));
      body_row(
          std::string("rms_norm q 3007x32x128 in qkv ") + tag, b,
          [&, k] { return ferry::cuda::run_rms_norm(ctx, qn, k); },
          4.0 * static_cast<double>(m * 4096));
    }
  }
  using ferry::cuda::RopeKernel;
  struct R {
    int64_t rows;
    int heads, hd;
    int64_t stride;
    ferry::RopeMath math;
    const char* name;
  };
  for (const R& r :
       {R{11520, 32, 72, 3456, ferry::RopeMath::f32, "rope vision q|k 11520x32x72 f32"},
        R{3007, 40, 128, 6144, ferry::RopeMath::bf16, "rope text q|k 3007x40x128"}}) {
    const int half = r.hd / 2;
    ferry::Rope rope;
    rope.x = view(r.rows, r.stride).slice_cols(0, int64_t{r.heads} * r.hd);
    rope.cos = view(r.rows, half, DType::f32);
    rope.sin = view(r.rows, half, DType::f32);
    rope.num_heads = r.heads;
    rope.head_dim = r.hd;
    rope.math = r.math;
    const double bytes = 4.0 * static_cast<double>(r.rows * r.heads * r.hd) +
                         8.0 * static_cast<double>(r.rows * half);
    for (auto [k, tag] : {std::pair{RopeKernel::best, " vec"}, {RopeKernel::legacy, " scalar"}}) {
      body_row(
          std::string(r.name) + tag, b, [&, k] { return ferry::cuda::run_rope(ctx, rope, k); },
          bytes);
    }
  }
}

ferry::Op linear(Bench& b, int64_t m, int64_t n, int64_t k) {
  ferry::Linear op;
  op.x = make_view(b.buffer(static_cast<size_t>(m * k) * 2), DType::bf16, m, k);
  op.w = make_view(b.buffer(static_cast<size_t>(n * k) * 2), DType::bf16, n, k);
  op.y = make_view(b.buffer(static_cast<size_t>(m * n) * 2), DType::bf16, m, n);
  return op;
}

std::string variant_tag(ferry::cuda::MmaVariant v) {
  return std::string("[") + ferry::cuda::mma_variant_name(v) +
         (v == ferry::cuda::kDefaultMmaVariant ? "*]" : "]");
}

// ---- linear at the decode (M = 1) and action-expert (M = 64) shapes -------------------------
//
// Each shape cycles through enough weight copies that the copies together are >= 150 MB (3× the
// H200's 50 MB L2), so every call reads w from HBM as a real step does. Rows: run_linear's own
// choice (enqueued and graph), then cuBLASLt forced, at M = 1 the route before the fixed-order
// GEMV and every launch shape of that GEMV (* marks run_linear's), then every shape of the skinny
// kernel that fits (M <= 8: warps × unroll; M <= 64: unroll × K splits), graph only. Rate: bytes of
// w + x + y per call over the graph time.

// A device buffer of `bytes`, filled with a repeated 16 MB block of random bf16 (fast to upload
// for the 1.27 GB LM head; random, not zeros, so no compression can flatter the rate).
void* weights(Bench& b, size_t bytes) {
  static std::vector<uint16_t> block;
  if (block.empty()) {
    block.resize(size_t{8} << 20);
    std::mt19937 gen(7);
    std::uniform_real_distribution<float> dist(-0.05f, 0.05f);
    for (auto& h : block) h = ferry::f32_to_bf16(dist(gen));
  }
  void* p = b.buffer(bytes, 0);
  for (size_t off = 0; off < bytes; off += block.size() * 2) {
    const size_t n = std::min(block.size() * 2, bytes - off);
    b.be.copy_to_device(b.stream, static_cast<uint8_t*>(p) + off, block.data(), n);
  }
  (void)b.be.synchronize(b.stream);
  return p;
}

struct LinearShape {
  const char* what;
  int64_t m, n, k;
  DType xt;
};

void linear_rows(Backend& be, ferry::Stream& stream, const LinearShape& s) {
  Bench b{be, stream, {}};
  const double w_bytes = 2.0 * static_cast<double>(s.n * s.k);
  const int copies = std::max(2, static_cast<int>(std::ceil(150e6 / w_bytes)));
  const size_t xe = s.xt == DType::f32 ? 4 : 2;
  ferry::Linear base;
  base.x = make_view(b.buffer(static_cast<size_t>(s.m * s.k) * xe), s.xt, s.m, s.k);
  base.y = make_view(b.buffer(static_cast<size_t>(s.m * s.n) * 2), DType::bf16, s.m, s.n);
  std::vector<ferry::Linear> ops;
  for (int i = 0; i < copies; ++i) {
    ferry::Linear op = base;
    op.w = make_view(weights(b, static_cast<size_t>(w_bytes)), DType::bf16, s.n, s.k);
    ops.push_back(op);
  }
  const double bytes = w_bytes + static_cast<double>(s.m * s.k * xe + s.m * s.n * 2);
  size_t next = 0;
  auto op = [&]() -> const ferry::Linear& { return ops[next++ % ops.size()]; };
  const std::string name = std::string("linear ") + s.what + " " + std::to_string(s.m) + "x" +
                           std::to_string(s.k) + "->" + std::to_string(s.n) +
                           (s.xt == DType::f32 ? " x=f32" : "");
  auto line = [&](const std::string& label, double host, double sec) {
    char h[32] = "";
    if (host > 0) std::snprintf(h, sizeof h, "%9.1f us", host * 1e6);
    std::printf("%-44s %12s %9.1f us %8.2f TB/s\n", label.c_str(), h, sec * 1e6,
                bytes / sec / 1e12);
  };
  line(name + " (" + std::to_string(copies) + " w)",
       b.time_body([&] { return be.run(stream, op()); }),
       b.time_graph_body([&] { return be.run(stream, op()); }));

  auto* cs = dynamic_cast<ferry::cuda::CudaStream*>(&stream);
  auto lt = ferry::cuda::make_lt_handle();
  if (cs != nullptr && lt.ok()) {
    ferry::cuda::LinearAlgoCache cache;
    const ferry::cuda::OpContext ctx{cs->handle(), lt->get(), cs->workspace(),
                                     cs->workspace_bytes(), &cache};
    line("  cuBLASLt", 0,
         b.time_graph_body([&] { return ferry::cuda::run_linear_cublaslt(ctx, op()); }));
  }
  const ferry::cuda::OpContext ctx{ferry::cuda::stream_handle(stream)};
  if (ferry::cuda::linear_gemv_fits(ops[0])) {
    {
      const ferry::cuda::LinearRouteScope before(ferry::cuda::LinearRoute::mma_decode);
      line("  mma route (before the fixed-order GEMV)", 0,
           b.time_graph_body([&] { return be.run(stream, op()); }));
    }
    const ferry::cuda::GemvConfig chosen = ferry::cuda::linear_gemv_config(s.n);
    for (const ferry::cuda::GemvConfig cfg :
         {ferry::cuda::GemvConfig{1, 4}, {1, 8}, {2, 2}, {2, 4}, {4, 2}}) {
      const bool is_chosen = cfg.rows == chosen.rows && cfg.unroll == chosen.unroll;
      line("  gemv " + std::to_string(cfg.rows) + " rows unroll " + std::to_string(cfg.unroll) +
               (is_chosen ? " *" : ""),
           0, b.time_graph_body([&] { return ferry::cuda::run_linear_gemv(ctx, op(), cfg); }));
    }
  }
  if (ferry::cuda::linear_skinny_fits(ops[0])) {
    for (const ferry::cuda::SkinnyConfig cfg :
         {ferry::cuda::SkinnyConfig{8, 2}, {8, 1}, {8, 4}, {4, 2}, {4, 4}}) {
      line("  skinny " + std::to_string(cfg.warps) + " warps unroll " + std::to_string(cfg.unroll),
           0, b.time_graph_body([&] { return ferry::cuda::run_linear_skinny(ctx, op(), cfg); }));
    }
  }
  if (ferry::cuda::linear_skinny64_fits(ops[0])) {
    const int auto_splits = ferry::cuda::linear_skinny64_splits(s.n, s.k);
    for (const ferry::cuda::Skinny64Config cfg :
         {ferry::cuda::Skinny64Config{2, 0}, {4, 0}, {2, 1}, {2, 2}, {2, 4}, {2, 8}, {2, 16}}) {
      const int splits = cfg.splits > 0 ? cfg.splits : auto_splits;
      line("  skinny64 unroll " + std::to_string(cfg.unroll) + " splits " + std::to_string(splits) +
               (cfg.splits == 0 ? " (auto)" : ""),
           0, b.time_graph_body([&] { return ferry::cuda::run_linear_skinny64(ctx, op(), cfg); }));
    }
  }
}

}  // namespace

int main() {
  auto factory = ferry::cuda_backend_factory();
  if (!factory.available()) {
    std::printf("no CUDA device\n");
    return 0;
  }
  auto be = factory.create();
  if (!be.ok()) {
    std::fprintf(stderr, "%s\n", be.error().to_string().c_str());
    return 1;
  }
  auto stream = (*be)->create_stream();
  std::printf("%s\n%-58s %12s %12s\n", (*be)->info().name.c_str(), "op", "enqueued", "graph");

  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 12288, 4096},
                         {1, 4096, 12288},
                         {1, 155697, 4096},
                         {3000, 12288, 4096},
                         {11520, 4304, 1152}}) {
    Bench b{**be, *stream, {}};
    const ferry::Op op = linear(b, m, n, k);
    const double bytes = 2.0 * static_cast<double>(n * k + m * k + m * n);
    row("linear M=" + std::to_string(m) + " N=" + std::to_string(n) + " K=" + std::to_string(k), b,
        {op}, bytes, 2.0 * static_cast<double>(m * n * k));
  }
  for (const LinearShape& s : {LinearShape{"decode", 1, 6144, 4096, DType::bf16},
                               {"decode", 1, 4096, 4096, DType::bf16},
                               {"decode", 1, 24576, 4096, DType::bf16},
                               {"decode", 1, 4096, 12288, DType::bf16},
                               {"lm_head", 1, 155697, 4096, DType::bf16},
                               {"expert", 64, 16512, 2048, DType::f32},
                               {"expert", 64, 2048, 8256, DType::bf16},
                               {"expert", 64, 4096, 2048, DType::bf16},
                               {"expert", 64, 2048, 2048, DType::bf16}}) {
    linear_rows(**be, *stream, s);
  }
  struct A {
    int64_t s, l;
    int h, kv, d;
    bool causal;
  };
  // The attention shapes once per tensor-core variant (MmaVariant in attention.cuh; the default
  // is marked *), so that one run compares them.
  for (const A& a :
       {A{1, 3000, 32, 8, 128, true}, A{1, 8000, 32, 8, 128, true}, A{64, 3064, 16, 8, 128, false},
        A{3000, 3000, 32, 8, 128, true}, A{720, 720, 16, 16, 72, false}}) {
    Bench b{**be, *stream, {}};
    const ferry::Op op = attention(b, a.s, a.l, a.h, a.kv, a.d, a.causal);
    const double kv_bytes = 2.0 * 2.0 * static_cast<double>(a.l * a.kv * a.d);
    double pairs = static_cast<double>(a.s) * static_cast<double>(a.l);
    if (a.causal && a.s == a.l) pairs = pairs / 2;
    const double flops = 4.0 * pairs * a.d * a.h;
    const std::string name = "attention S=" + std::to_string(a.s) + " L=" + std::to_string(a.l) +
                             " H=" + std::to_string(a.h) + "/" + std::to_string(a.kv) +
                             " hd=" + std::to_string(a.d) + (a.causal ? " causal" : "");
    if (a.s * (a.h / a.kv) < 32) {  // decode: the CUDA-core kernel, no variants
      row(name, b, {op}, kv_bytes, flops);
      continue;
    }
    for (ferry::cuda::MmaVariant v : ferry::cuda::kMmaVariants) {
      ferry::cuda::set_attention_mma_variant(v);
      row(name + " " + variant_tag(v), b, {op}, kv_bytes, flops);
    }
    ferry::cuda::set_attention_mma_variant(ferry::cuda::kDefaultMmaVariant);
  }
  {
    // The vision tower's attention (Qwen3-VL, 16 images of 320x576 = 720 patches, 16 heads of
    // 72, q/k/v as column slices of the fused qkv output): one segmented op per variant, against
    // 16 per-image ops (what the encoder ran before). Rate: useful flops, head_dim 72 (the
    // kernels pad it to 80).
    Bench b{**be, *stream, {}};
    constexpr int kImages = 16;
    constexpr int64_t kPatches = 720;
    constexpr int64_t kHidden = 16 * 72;
    const int64_t s = kImages * kPatches;
    const ferry::TensorView qkv =
        make_view(b.buffer(static_cast<size_t>(s * 3 * kHidden) * 2), DType::bf16, s, 3 * kHidden);
    ferry::Attention seg;
    seg.q = qkv.slice_cols(0, kHidden);
    seg.kv[0] = {qkv.slice_cols(kHidden, kHidden), qkv.slice_cols(2 * kHidden, kHidden)};
    seg.out = make_view(b.buffer(static_cast<size_t>(s * kHidden) * 2), DType::bf16, s, kHidden);
    seg.num_heads = 16;
    seg.num_kv_heads = 16;
    seg.head_dim = 72;
    seg.scale = 1.0f / std::sqrt(72.0f);
    std::vector<int32_t> offsets;
    for (int i = 0; i <= kImages; ++i) offsets.push_back(static_cast<int32_t>(i * kPatches));
    seg.segments = b.ints(offsets);
    seg.max_segment_rows = kPatches;
    std::vector<ferry::Op> per_image;
    for (int i = 0; i < kImages; ++i) {
      ferry::Attention a = seg;
      a.segments = ferry::TensorView{};
      a.max_segment_rows = 0;
      a.q = seg.q.slice_rows(i * kPatches, kPatches);
      a.kv[0] = {seg.kv[0].k.slice_rows(i * kPatches, kPatches),
                 seg.kv[0].v.slice_rows(i * kPatches, kPatches)};
      a.out = seg.out.slice_rows(i * kPatches, kPatches);
      per_image.push_back(a);
    }
    const double flops = 4.0 * kImages * kPatches * kPatches * 72 * 16;
    const double bytes = 2.0 * 4 * static_cast<double>(s) * 16 * 72;  // q, k, v, out once
    for (ferry::cuda::MmaVariant v : ferry::cuda::kMmaVariants) {
      ferry::cuda::set_attention_mma_variant(v);
      row("vision attn 16x720 H=16 hd=72 segmented " + variant_tag(v), b, {seg}, bytes, flops);
      row("vision attn 16x720 H=16 hd=72 16 ops " + variant_tag(v), b, per_image, bytes, flops);
    }
    ferry::cuda::set_attention_mma_variant(ferry::cuda::kDefaultMmaVariant);
  }
  {
    // Decode attention with q_pos0_dev over 8192-row caches, 8 layers in turn (L2-cold, unlike
    // the attention rows above, which re-read one cache); then the decode kernel's split size
    // (graph only; run_attention uses cuda::kDecodeSplitKeys).
    const ferry::cuda::OpContext ctx{ferry::cuda::stream_handle(*stream)};
    constexpr int kLayers = 8;
    for (int64_t l : {3000, 8000}) {
      Bench b{**be, *stream, {}};
      const std::vector<ferry::Attention> ops = decode_layers(b, l, 8192, kLayers);
      if (const ferry::Status st = ferry::validate(ops[0]); !st.ok()) {
        std::fprintf(stderr, "%s\n", st.error().to_string().c_str());
        return 1;
      }
      const double kv_bytes = 2.0 * 2.0 * static_cast<double>(l * 8 * 128);
      size_t next = 0;
      auto layer = [&]() -> const ferry::Attention& { return ops[next++ % ops.size()]; };
      decode_row(
          "attention decode L=" + std::to_string(l) + " cap=8192 p0_dev", b,
          [&] { return b.be.run(b.stream, layer()); }, kv_bytes);
      for (int split : {64, 128, 256}) {
        decode_row(
            "  split " + std::to_string(split) + " keys", b,
            [&] { return ferry::cuda::run_attention_decode(ctx, layer(), split); }, kv_bytes,
            false);
      }
    }
  }
  {
    // Memory-bound ops at prefill size (bytes = read + written).
    Bench b{**be, *stream, {}};
    const int64_t m = 3000;
    const int64_t h = 4096;
    const int64_t i = 12288;
    auto view = [&](int64_t r, int64_t c) {
      return make_view(b.buffer(static_cast<size_t>(r * c) * 2), DType::bf16, r, c);
    };
    ferry::RmsNorm norm;
    norm.x = view(m, h);
    norm.w = view(1, h);
    norm.y = view(m, h);
    norm.dim = h;
    row("rms_norm 3000x4096 bf16", b, {norm}, 4.0 * m * h, 0);
    ferry::SwiGlu sw{view(m, i), view(m, i), view(m, i)};
    row("swiglu 3000x12288", b, {sw}, 6.0 * m * i, 0);
    ferry::Add add{view(m, h), view(m, h)};
    row("add 3000x4096 bf16", b, {add}, 6.0 * m * h, 0);
    ferry::Rope rope;
    rope.x = view(m, h);
    rope.cos = make_view(b.buffer(static_cast<size_t>(m * 64) * 4), DType::f32, m, 64);
    rope.sin = make_view(b.buffer(static_cast<size_t>(m * 64) * 4), DType::f32, m, 64);
    rope.num_heads = 32;
    rope.head_dim = 128;
    row("rope 3000x32x128 bf16", b, {rope}, 4.0 * m * h + 8.0 * m * 64, 0);
    ferry::Argmax am{view(1, 155697), make_view(b.buffer(256), DType::i32, 1, 1)};
    row("argmax 1x155697 bf16", b, {am}, 2.0 * 155697, 0);
  }
  elementwise_rows(**be, *stream);
  return 0;
}
