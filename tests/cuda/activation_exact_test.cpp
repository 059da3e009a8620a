// The fast bf16 activations against the double-precision reference kernels, bit for bit, on the
// GPU: every one of the 65536 bf16 patterns through each activation (the complete input set of
// the bf16 paths, so this is a proof for them, not a sample), in the three kernel layouts; and
// swiglu over every gate pattern times edge-case ups plus random pairs. The reference kernels are
// themselves checked against a host model of the double computation, so that two kernels that
// both do nothing cannot pass.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cuda/activation.cuh"
#include "backend/cuda/cuda_stream.h"
#include "backend/cuda/elementwise.cuh"
#include "core/bf16.h"
#include "harness.h"

namespace ferry::cuda_test {
namespace {

using cuda::ActImpl;

cudaStream_t test_stream() {
  return cuda::stream_handle(*backends(nullptr)->cuda_stream);
}

// Device copy of host bf16 data, `offset_elems` past a 256-byte-aligned allocation.
struct DeviceBf16 {
  void* base = nullptr;
  uint16_t* p = nullptr;
  size_t n = 0;
  DeviceBf16(const std::vector<uint16_t>& host, size_t offset_elems) : n(host.size()) {
    EXPECT_EQ(cudaMalloc(&base, (n + offset_elems) * 2 + 256), cudaSuccess);
    p = static_cast<uint16_t*>(base) + offset_elems;
    EXPECT_EQ(cudaMemcpy(p, host.data(), n * 2, cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DeviceBf16() { (void)cudaFree(base); }
  DeviceBf16(const DeviceBf16&) = delete;
  DeviceBf16& operator=(const DeviceBf16&) = delete;
  std::vector<uint16_t> read() const {
    std::vector<uint16_t> h(n);
    EXPECT_EQ(cudaStreamSynchronize(test_stream()), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(h.data(), p, n * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
};

// A [rows, cols] view with row stride `stride` holding every bf16 pattern once (the gaps
// between rows hold 0x5555, which must come back unchanged).
struct Layout {
  const char* name;
  int64_t rows, cols, stride;
  size_t offset_elems;  // 1: 2-byte aligned pointer (the one-element kernel)
};
constexpr Layout kLayouts[] = {
    {"contiguous", 256, 256, 256, 0},  // 16-byte kernel, one long row
    {"strided", 256, 256, 264, 0},     // 16-byte kernel, row by row
    {"misaligned", 256, 256, 257, 1},  // one element per thread
};

std::vector<uint16_t> all_patterns(const Layout& l) {
  std::vector<uint16_t> h(static_cast<size_t>(l.rows * l.stride), 0x5555);
  for (int64_t r = 0; r < l.rows; ++r) {
    for (int64_t c = 0; c < l.cols; ++c) h[r * l.stride + c] = static_cast<uint16_t>(r * 256 + c);
  }
  return h;
}

std::vector<uint16_t> run_act(const Layout& l, Activation act, ActImpl impl) {
  const DeviceBf16 y(all_patterns(l), l.offset_elems);
  const Status st = cuda::launch_act_bf16(test_stream(), y.p, l.stride, l.rows, l.cols, act, impl);
  EXPECT_TRUE(st.ok()) << st.error().to_string();
  return y.read();
}

// The host model of the reference: the same fp32 steps around glibc's double functions. CUDA's
// double tanh/erf/exp may differ from glibc's in the last bit, which changes the float rounding
// in a vanishing fraction of inputs, so a few mismatches are allowed.
float host_ref(float u, Activation act) {
  switch (act) {
    case Activation::silu:
      return u / (1.0f + static_cast<float>(std::exp(-static_cast<double>(u))));
    case Activation::gelu_tanh: {
      const float x = 0.7978845608028654f * (u + 0.044715f * ((u * u) * u));
      return (0.5f * u) * (1.0f + static_cast<float>(std::tanh(static_cast<double>(x))));
    }
    case Activation::gelu_erf: {
      const float x = u * 0.7071067811865476f;
      return (0.5f * u) * (1.0f + static_cast<float>(std::erf(static_cast<double>(x))));
    }
    case Activation::none:
      break;
  }
  return u;
}

TEST(CudaActivationExact, EveryBf16InputMatchesTheReference) {
  SKIP_WITHOUT_CUDA();
  for (Activation act : {Activation::silu, Activation::gelu_tanh, Activation::gelu_erf}) {
    for (const Layout& l : kLayouts) {
      const std::string what = std::string(act == Activation::silu        ? "silu"
                                           : act == Activation::gelu_tanh ? "gelu_tanh"
                                                                          : "gelu_erf") +
                               " " + l.name;
      const std::vector<uint16_t> fast = run_act(l, act, ActImpl::fast);
      const std::vector<uint16_t> ref = run_act(l, act, ActImpl::reference);
      const std::vector<uint16_t> input = all_patterns(l);
      int64_t diff = 0;
      int64_t model_diff = 0;
      for (size_t i = 0; i < input.size(); ++i) {
        const bool gap = static_cast<int64_t>(i % l.stride) >= l.cols;
        if (gap) {
          ASSERT_EQ(fast[i], 0x5555) << what << ": gap overwritten at " << i;
          ASSERT_EQ(ref[i], 0x5555) << what << ": gap overwritten at " << i;
          continue;
        }
        if (fast[i] != ref[i]) {
          if (diff++ < 8) {
            ADD_FAILURE() << what << ": input 0x" << std::hex << input[i] << " fast 0x" << fast[i]
                          << " reference 0x" << ref[i];
          }
        }
        const float u = bf16_to_f32(input[i]);
        const uint16_t model = f32_to_bf16(host_ref(u, act));
        const bool both_nan = std::isnan(bf16_to_f32(model)) && std::isnan(bf16_to_f32(ref[i]));
        model_diff += model != ref[i] && !both_nan;
      }
      EXPECT_EQ(diff, 0) << what;
      EXPECT_LE(model_diff, 4) << what << ": the reference kernel disagrees with the host model";
    }
  }
}

// gate, up, out as [rows, cols] views (fused: gate and up the two halves of one buffer).
std::vector<uint16_t> swiglu_on_device(const std::vector<uint16_t>& gate,
                                       const std::vector<uint16_t>& up, int64_t rows, int64_t cols,
                                       bool fused, ActImpl impl) {
  std::vector<uint16_t> gu;
  if (fused) {
    gu.resize(static_cast<size_t>(rows * cols * 2));
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(&gu[r * 2 * cols], &gate[r * cols], cols * 2);
      std::memcpy(&gu[r * 2 * cols + cols], &up[r * cols], cols * 2);
    }
  }
  const DeviceBf16 g(fused ? gu : gate, 0);
  const DeviceBf16 u(fused ? std::vector<uint16_t>(1) : up, 0);
  const DeviceBf16 o(std::vector<uint16_t>(gate.size(), 0x7f7f), 0);
  SwiGlu op;
  if (fused) {
    const TensorView v = make_view(g.p, DType::bf16, rows, 2 * cols);
    op.gate = v.slice_cols(0, cols);
    op.up = v.slice_cols(cols, cols);
  } else {
    op.gate = make_view(g.p, DType::bf16, rows, cols);
    op.up = make_view(u.p, DType::bf16, rows, cols);
  }
  op.out = make_view(o.p, DType::bf16, rows, cols);
  const cuda::OpContext ctx{test_stream()};
  const Status st = cuda::run_swiglu(ctx, op, impl);
  EXPECT_TRUE(st.ok()) << st.error().to_string();
  return o.read();
}

void expect_swiglu_exact(const std::vector<uint16_t>& gate, const std::vector<uint16_t>& up,
                         int64_t rows, int64_t cols, bool fused, const std::string& what) {
  const std::vector<uint16_t> fast = swiglu_on_device(gate, up, rows, cols, fused, ActImpl::fast);
  const std::vector<uint16_t> ref =
      swiglu_on_device(gate, up, rows, cols, fused, ActImpl::reference);
  int64_t diff = 0;
  int64_t model_diff = 0;
  for (size_t i = 0; i < gate.size(); ++i) {
    if (fast[i] != ref[i] && diff++ < 8) {
      ADD_FAILURE() << what << ": gate 0x" << std::hex << gate[i] << " up 0x" << up[i] << " fast 0x"
                    << fast[i] << " reference 0x" << ref[i];
    }
    const float s = round_bf16(host_ref(bf16_to_f32(gate[i]), Activation::silu));
    const uint16_t model = f32_to_bf16(s * bf16_to_f32(up[i]));
    const bool both_nan = std::isnan(bf16_to_f32(model)) && std::isnan(bf16_to_f32(ref[i]));
    model_diff += model != ref[i] && !both_nan;
  }
  EXPECT_EQ(diff, 0) << what;
  EXPECT_LE(model_diff, 16) << what << ": the reference kernel disagrees with the host model";
}

TEST(CudaActivationExact, SwiGluMatchesTheReference) {
  SKIP_WITHOUT_CUDA();
  // Every gate pattern against each of these ups (1 isolates the silu rounding).
  const uint16_t ups[] = {
      0x3f80 /* 1 */,   0xc060 /* -3.5 */,          0x0000 /* +0 */,  0x8000 /* -0 */,
      0x7f80 /* inf */, 0x0001 /* min subnormal */, 0x7f7f /* max */, 0x3c23 /* 0.00995 */};
  for (uint16_t up_bits : ups) {
    std::vector<uint16_t> gate(65536);
    for (uint32_t i = 0; i < 65536; ++i) gate[i] = static_cast<uint16_t>(i);
    const std::vector<uint16_t> up(65536, up_bits);
    expect_swiglu_exact(gate, up, 256, 256, false, "all gates, up 0x" + std::to_string(up_bits));
  }
  // Random pairs in the model's range, contiguous, fused and odd-width (one-element kernel).
  std::mt19937 gen(4242);
  std::normal_distribution<float> g_dist(0.0f, 3.0f);
  std::normal_distribution<float> u_dist(0.0f, 1.0f);
  for (auto [rows, cols, fused] : {std::tuple<int64_t, int64_t, bool>{1024, 1024, false},
                                   {512, 1536, true},
                                   {37, 333, false}}) {
    std::vector<uint16_t> gate(static_cast<size_t>(rows * cols));
    std::vector<uint16_t> up(gate.size());
    for (size_t i = 0; i < gate.size(); ++i) {
      gate[i] = f32_to_bf16(g_dist(gen));
      up[i] = f32_to_bf16(u_dist(gen));
    }
    expect_swiglu_exact(
        gate, up, rows, cols, fused,
        "random " + std::to_string(rows) + "x" + std::to_string(cols) + (fused ? " fused" : ""));
  }
}

}  // namespace
}  // namespace ferry::cuda_test
