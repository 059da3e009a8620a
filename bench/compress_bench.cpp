// The group codec on the CPU (compress/group_codec.h): ratio and encode/decode speed on
// synthetic BF16 groups, normal init (what trained weights look like) and uniform (what
// `ferry synth` draws by default, which flatters the codec).
//   ferry_compress_bench [MiB per group, default 256] [threads, default all]
#include <time.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "compress/group_codec.h"
#include "core/thread_pool.h"
#include "model/synth.h"

using namespace ferry;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

std::vector<uint8_t> synth_bf16(size_t n, SynthDistribution dist, ThreadPool* pool) {
  WeightSpec s;
  s.dtype = DType::bf16;
  s.shape = {static_cast<int64_t>(n)};
  std::vector<uint8_t> out(2 * n);
  const float std = 1.0f / 64;  // fan_in 4096
  parallel_for(pool, static_cast<int64_t>(n), 1 << 20, [&](int64_t a, int64_t b) {
    synth_fill(7, 0, s, SynthInit{false, std, dist}, static_cast<uint64_t>(a),
               std::span<std::byte>(reinterpret_cast<std::byte*>(out.data()) + 2 * a,
                                    static_cast<size_t>(2 * (b - a))));
  });
  return out;
}

double exponent_entropy(const std::vector<uint8_t>& bf16) {
  std::vector<uint64_t> counts(256);
  for (size_t i = 0; i + 1 < bf16.size(); i += 2)
    ++counts[(bf16[i + 1] << 1 | bf16[i] >> 7) & 0xff];
  double h = 0;
  const double n = static_cast<double>(bf16.size() / 2);
  for (uint64_t c : counts) {
    if (c != 0) h -= static_cast<double>(c) / n * std::log2(static_cast<double>(c) / n);
  }
  return h;
}

// Best of `reps` runs of fn, in seconds.
template <class F>
double best_of(int reps, F fn) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t = std::chrono::steady_clock::now();
    fn();
    best = std::min(best, seconds_since(t));
  }
  return best;
}

// CPU seconds of this thread for one fn() (the machine's load does not count).
template <class F>
double thread_cpu_seconds(F fn) {
  timespec a{}, b{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
  fn();
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
  return static_cast<double>(b.tv_sec - a.tv_sec) +
         1e-9 * static_cast<double>(b.tv_nsec - a.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
  const size_t mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 256;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 0;
  ThreadPool pool(threads);
  const size_t n = mib << 19;  // BF16 elements
  std::printf("group %zu MiB of BF16, %d threads\n", mib, pool.threads());
  for (SynthDistribution dist : {SynthDistribution::normal, SynthDistribution::uniform}) {
    const char* name = dist == SynthDistribution::normal ? "normal" : "uniform";
    const auto bytes = synth_bf16(n, dist, &pool);
    const std::vector<compress::Bf16Range> ranges{{0, bytes.size()}};
    compress::EncodeOptions eo;
    eo.pool = &pool;
    std::vector<uint8_t> enc;
    const double t_enc =
        best_of(1, [&] { enc = compress::encode_group(bytes, ranges, eo).value(); });
    const auto layout = compress::read_group_layout(enc).value();
    std::vector<uint8_t> out(bytes.size());
    const double gb = static_cast<double>(bytes.size()) / 1e9;
    auto decode = [&](ThreadPool* p, bool verify) {
      const Status s = compress::decode_group(layout, enc, out, {p, verify});
      if (!s.ok()) {
        std::fprintf(stderr, "%s\n", s.error().to_string().c_str());
        std::exit(1);
      }
    };
    const double t1 = best_of(2, [&] { decode(nullptr, false); });
    const double t1v = best_of(2, [&] { decode(nullptr, true); });
    double c1 = 1e30;  // the same single-thread decode in this thread's CPU seconds
    for (int r = 0; r < 2; ++r)
      c1 = std::min(c1, thread_cpu_seconds([&] { decode(nullptr, false); }));
    const double tn = best_of(3, [&] { decode(&pool, false); });
    const double tnv = best_of(3, [&] { decode(&pool, true); });
    if (out != bytes) {
      std::fprintf(stderr, "round trip differs\n");
      return 1;
    }
    std::printf(
        "%-7s exponent entropy %.3f bits, ratio %.4f (%zu segments: %llu rans, %llu split "
        "elements)  encode %.2f GB/s (%d thr)\n"
        "        decode 1 thread %.2f GB/s (%.2f per CPU-second of the thread; %.2f with checksum) "
        " %d threads %.2f GB/s (%.2f with "
        "checksum)  [GB/s of decoded BF16]\n",
        name, exponent_entropy(bytes),
        static_cast<double>(enc.size()) / static_cast<double>(bytes.size()), layout.segments.size(),
        static_cast<unsigned long long>(layout.rans_elements),
        static_cast<unsigned long long>(layout.split_elements), gb / t_enc, pool.threads(), gb / t1,
        gb / c1, gb / t1v, pool.threads(), gb / tn, gb / tnv);
  }
  return 0;
}
