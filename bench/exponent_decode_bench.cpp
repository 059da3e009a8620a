// The CUDA group decoder (backend/cuda/exponent_decode.cuh): output GB/s by group size on
// synthetic BF16 groups (normal init, as trained weights; uniform beside it), each decode checked
// once against the original bytes, with a device-to-device copy of the decoded size beside it
// (what the same HBM does without decoding). Runs on the GPU machine.
//   ferry_exponent_decode_bench [--sizes 1,8,32,128,512] [--init normal|uniform|both] [--iters N]
// Sizes are MiB of decoded BF16. Exit 1 if any decode differs or reports an error.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/exponent_decode.cuh"
#include "compress/group_codec.h"
#include "core/thread_pool.h"
#include "model/synth.h"

using namespace ferry;

namespace {

#define CK(x)                                                                                  \
  do {                                                                                         \
    const cudaError_t e_ = (x);                                                                \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s failed: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

void ok_or_die(const Status& s) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.error().to_string().c_str());
    std::exit(1);
  }
}

std::vector<uint8_t> synth_bf16(size_t n, SynthDistribution dist, ThreadPool* pool) {
  WeightSpec s;
  s.dtype = DType::bf16;
  s.shape = {static_cast<int64_t>(n)};
  std::vector<uint8_t> out(2 * n);
  const float std = 1.0f / 64;  // fan_in 4096, an 8B model's layers
  parallel_for(pool, static_cast<int64_t>(n), 1 << 20, [&](int64_t a, int64_t b) {
    synth_fill(11, 0, s, SynthInit{false, std, dist}, static_cast<uint64_t>(a),
               std::span<std::byte>(reinterpret_cast<std::byte*>(out.data()) + 2 * a,
                                    static_cast<size_t>(2 * (b - a))));
  });
  return out;
}

// Seconds per call of fn, from events around `iters` calls after 3 warm-ups.
template <class F>
double time_per_call(cudaStream_t stream, int iters, F fn) {
  for (int i = 0; i < 3; ++i) fn();
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  CK(cudaEventRecord(a, stream));
  for (int i = 0; i < iters; ++i) fn();
  CK(cudaEventRecord(b, stream));
  CK(cudaEventSynchronize(b));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, a, b));
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  return ms / 1e3 / iters;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<size_t> sizes{1, 8, 32, 128, 512};
  std::string init = "both";
  int iters = 0;  // 0: enough for ~0.2 s per size
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--sizes" && i + 1 < argc) {
      sizes.clear();
      std::string list = argv[++i];
      for (size_t p = 0; p < list.size();) {
        const size_t q = std::min(list.find(',', p), list.size());
        sizes.push_back(std::strtoull(list.substr(p, q - p).c_str(), nullptr, 10));
        p = q + 1;
      }
    } else if (a == "--init" && i + 1 < argc) {
      init = argv[++i];
    } else if (a == "--iters" && i + 1 < argc) {
      iters = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: %s [--sizes 1,8,32,128,512] [--init normal|uniform|both] [--iters N]\n",
                   argv[0]);
      return 2;
    }
  }
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  ThreadPool pool(0);
  cudaStream_t stream;
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::printf("%-8s %8s %7s %9s %10s %11s %10s %11s\n", "init", "MiB", "ratio", "segments",
              "decode us", "out GB/s", "in GB/s", "copy GB/s");
  bool all_ok = true;
  for (const char* name : {"normal", "uniform"}) {
    if (init != "both" && init != name) continue;
    const SynthDistribution dist =
        std::string(name) == "normal" ? SynthDistribution::normal : SynthDistribution::uniform;
    for (size_t mib : sizes) {
      const size_t n = mib << 19;
      const auto bytes = synth_bf16(n, dist, &pool);
      compress::EncodeOptions eo;
      eo.pool = &pool;
      const std::vector<compress::Bf16Range> ranges{{0, bytes.size()}};
      const auto enc = compress::encode_group(bytes, ranges, eo).value();
      const auto layout = compress::read_group_layout(enc).value();
      uint8_t *d_in = nullptr, *d_out = nullptr, *d_copy = nullptr;
      cuda::DecodeErrorWord* d_err = nullptr;
      CK(cudaMalloc(&d_in, enc.size()));
      CK(cudaMalloc(&d_out, bytes.size()));
      CK(cudaMalloc(&d_copy, bytes.size()));
      CK(cudaMalloc(&d_err, sizeof *d_err));
      CK(cudaMemcpy(d_in, enc.data(), enc.size(), cudaMemcpyHostToDevice));
      CK(cudaMemset(d_out, 0, bytes.size()));
      // Once, checked.
      ok_or_die(cuda::decode_group_async(layout, d_in, d_out, bytes.size(), d_err, stream));
      CK(cudaStreamSynchronize(stream));
      cuda::DecodeErrorWord err = 0;
      CK(cudaMemcpy(&err, d_err, sizeof err, cudaMemcpyDeviceToHost));
      std::vector<uint8_t> back(bytes.size());
      CK(cudaMemcpy(back.data(), d_out, back.size(), cudaMemcpyDeviceToHost));
      const bool same = err == 0 && back == bytes;
      if (!same) {
        all_ok = false;
        std::fprintf(stderr, "%s %zu MiB: %s\n", name, mib,
                     err ? cuda::decode_error_status(err).error().to_string().c_str()
                         : "decoded bytes differ from the original");
      }
      int it = iters;
      if (it <= 0)
        it =
            static_cast<int>(std::clamp<size_t>((size_t{200} << 20) * 10 / bytes.size(), 10, 2000));
      const double t = time_per_call(stream, it, [&] {
        ok_or_die(cuda::decode_group_async(layout, d_in, d_out, bytes.size(), d_err, stream));
      });
      const double tc = time_per_call(stream, it, [&] {
        CK(cudaMemcpyAsync(d_copy, d_out, bytes.size(), cudaMemcpyDeviceToDevice, stream));
      });
      CK(cudaMemcpy(&err, d_err, sizeof err, cudaMemcpyDeviceToHost));
      if (err != 0) all_ok = false;
      std::printf("%-8s %8zu %7.4f %9zu %10.1f %11.1f %10.1f %11.1f%s\n", name, mib,
                  static_cast<double>(enc.size()) / static_cast<double>(bytes.size()),
                  layout.segments.size(), t * 1e6, static_cast<double>(bytes.size()) / t / 1e9,
                  static_cast<double>(enc.size()) / t / 1e9,
                  static_cast<double>(bytes.size()) / tc / 1e9, same ? "" : "  MISMATCH");
      CK(cudaFree(d_in));
      CK(cudaFree(d_out));
      CK(cudaFree(d_copy));
      CK(cudaFree(d_err));
    }
  }
  std::printf("%s\n",
              all_ok ? "all decodes identical to the original bytes" : "SOME DECODES FAILED");
  return all_ok ? 0 : 1;
}
