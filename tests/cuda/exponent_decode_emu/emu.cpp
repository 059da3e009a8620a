// Host emulation of exponent_decode_kernel (src/backend/cuda/exponent_decode.cu), no GPU needed:
// one std::thread per GPU thread, barriers for the warp collectives (ballot, shfl) and
// __syncthreads, blocks run one after another with the same grid-stride arithmetic as a launch.
// Shared memory is poisoned before each block, the output buffer has guard bytes on both sides,
// and every global access the kernel makes is to vectors sized exactly, so AddressSanitizer
// (run.sh builds with it) sees any access out of bounds. Checks the kernel's bytes against
// compress::decode_group and its faults on hostile bytes.
#include <algorithm>
#include <atomic>
#include <barrier>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "backend/cuda/exponent_decode_fault.h"
#include "compress/group_codec.h"
#include "compress/group_format.h"

// --- the CUDA surface the kernel uses ---
struct dim3 {
  unsigned x = 0, y = 0, z = 0;
};
thread_local dim3 threadIdx, blockIdx;
dim3 gridDim;
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n)
#define __shared__ static
#define __restrict__
struct uint2 {
  uint32_t x, y;
};
struct uint4 {
  uint32_t x, y, z, w;
};
inline uint2 make_uint2(uint32_t a, uint32_t b) {
  return {a, b};
}
inline uint4 make_uint4(uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  return {a, b, c, d};
}
inline int __popc(unsigned v) {
  return __builtin_popcount(v);
}
template <class T>
inline T max(T a, T b) {
  return a > b ? a : b;
}
std::barrier<>* g_block_bar;
std::vector<std::unique_ptr<std::barrier<>>> g_warp_bar;
inline void __syncthreads() {
  g_block_bar->arrive_and_wait();
}
inline void __syncwarp(unsigned = 0xffffffffu) {
  g_warp_bar[threadIdx.x / 32]->arrive_and_wait();
}
std::vector<uint32_t> g_slot;
inline unsigned __ballot_sync(unsigned, bool p) {
  g_slot[threadIdx.x] = p ? 1 : 0;
  __syncwarp();
  unsigned m = 0;
  const unsigned base = threadIdx.x & ~31u;
  for (unsigned l = 0; l < 32; ++l) m |= g_slot[base + l] << l;
  __syncwarp();
  return m;
}
inline uint32_t __shfl_up_sync(unsigned, uint32_t v, int d) {
  g_slot[threadIdx.x] = v;
  __syncwarp();
  const unsigned lane = threadIdx.x % 32;
  const uint32_t r = lane >= static_cast<unsigned>(d) ? g_slot[threadIdx.x - d] : v;
  __syncwarp();
  return r;
}
std::mutex g_atomic;
inline unsigned long long atomicCAS(unsigned long long* p, unsigned long long cmp,
                                    unsigned long long val) {
  std::lock_guard<std::mutex> lock(g_atomic);
  const unsigned long long old = *p;
  if (old == cmp) *p = val;
  return old;
}
std::vector<uint8_t> g_dyn_smem;

namespace ferry::cuda {
#include "kernel_body.inc"
}  // namespace
}  // namespace ferry::cuda

using namespace ferry;

// Runs the kernel over `blocks` blocks (one after another) and returns the error word.
cuda::DecodeErrorWord run_kernel(const std::vector<uint8_t>& compressed, uint32_t host_count,
                                 uint8_t* out, uint64_t capacity, unsigned blocks,
                                 uint64_t size_override = 0) {
  // The input at a 16-byte aligned address, exactly as long as the bytes (ASan sees overruns).
  const size_t size = compressed.size();
  uint8_t* in = static_cast<uint8_t*>(std::aligned_alloc(16, (size + 15) / 16 * 16 + 16));
  std::memcpy(in, compressed.data(), size);
  cuda::DecodeErrorWord err = 0;
  gridDim.x = blocks;
  const int threads = cuda::kThreads;
  g_slot.assign(threads, 0);
  g_warp_bar.clear();
  for (int w = 0; w < threads / 32; ++w) g_warp_bar.push_back(std::make_unique<std::barrier<>>(32));
  std::barrier<> block_bar(threads);
  g_block_bar = &block_bar;
  g_dyn_smem.assign(cuda::kSmemBytes, 0xcd);
  for (unsigned b = 0; b < blocks; ++b) {
    std::fill(g_dyn_smem.begin(), g_dyn_smem.end(), static_cast<uint8_t>(0xcd));
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) {
      ts.emplace_back([&, t, b] {
        threadIdx.x = static_cast<unsigned>(t);
        blockIdx.x = b;
        cuda::exponent_decode_kernel(in, size_override ? size_override : size, host_count, out,
                                     capacity, &err);
      });
    }
    for (auto& th : ts) th.join();
  }
  std::free(in);
  return err;
}

std::vector<uint8_t> synth_normal(size_t n, uint64_t seed) {
  // Box-Muller in double, std 0.02: normal-like exponents (not model/synth: no extra sources).
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> out(2 * n);
  for (size_t i = 0; i < n; ++i) {
    const double u1 = (static_cast<double>(rng() >> 11) + 1) * 0x1p-53;
    const double u2 = static_cast<double>(rng() >> 11) * 0x1p-53;
    const float v =
        static_cast<float>(0.02 * std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2));
    uint32_t u;
    std::memcpy(&u, &v, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    out[2 * i] = static_cast<uint8_t>(u >> 16);
    out[2 * i + 1] = static_cast<uint8_t>(u >> 24);
  }
  return out;
}

int failures = 0;
#define CHECK(cond, ...)                                          \
  do {                                                            \
    if (!(cond)) {                                                \
      ++failures;                                                 \
      std::printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      std::printf(__VA_ARGS__);                                   \
      std::printf("\n");                                          \
    }                                                             \
  } while (0)

constexpr size_t kGuard = 256;

// Decodes with the emulated kernel into a guarded buffer at `misalign`; returns the error word
// and fills `got`.
cuda::DecodeErrorWord emulate(const std::vector<uint8_t>& enc, uint32_t host_count,
                              uint64_t decoded, size_t misalign, unsigned blocks,
                              std::vector<uint8_t>& got, uint64_t size_override = 0) {
  std::vector<uint8_t> buf(2 * kGuard + decoded + misalign, 0xa5);
  const cuda::DecodeErrorWord err =
      run_kernel(enc, host_count, buf.data() + kGuard + misalign, decoded, blocks, size_override);
  for (size_t i = 0; i < kGuard + misalign; ++i) CHECK(buf[i] == 0xa5, "guard before at %zu", i);
  for (size_t i = kGuard + misalign + decoded; i < buf.size(); ++i) {
    CHECK(buf[i] == 0xa5, "guard after at %zu", i);
  }
  got.assign(buf.begin() + static_cast<std::ptrdiff_t>(kGuard + misalign),
             buf.begin() + static_cast<std::ptrdiff_t>(kGuard + misalign + decoded));
  return err;
}

void same_bytes(const char* name, const std::vector<uint8_t>& bytes,
                const std::vector<compress::Bf16Range>& ranges, compress::EncodeOptions o,
                size_t misalign, unsigned blocks) {
  const int before = failures;
  const auto enc = compress::encode_group(bytes, ranges, o).value();
  const auto layout = compress::read_group_layout(enc).value();
  CHECK(layout.coded, "%s: not coded", name);
  std::vector<uint8_t> got;
  const auto err = emulate(enc, static_cast<uint32_t>(layout.segments.size()), bytes.size(),
                           misalign, blocks, got);
  CHECK(err == 0, "%s: error word %llx", name, err);
  CHECK(got == bytes, "%s: bytes differ", name);
  std::printf("%s %s (%zu segments, %u blocks, misalign %zu)\n",
              failures == before ? "ok  " : "FAIL", name, layout.segments.size(), blocks, misalign);
}

void put16(std::vector<uint8_t>& v, size_t at, uint16_t x) {
  std::memcpy(v.data() + at, &x, 2);
}
void put32(std::vector<uint8_t>& v, size_t at, uint32_t x) {
  std::memcpy(v.data() + at, &x, 4);
}
void put64(std::vector<uint8_t>& v, size_t at, uint64_t x) {
  std::memcpy(v.data() + at, &x, 8);
}
uint64_t get64(const std::vector<uint8_t>& v, size_t at) {
  uint64_t x;
  std::memcpy(&x, v.data() + at, 8);
  return x;
}
size_t entry(size_t k, uint32_t field) {
  return compress::kHeaderBytes + compress::kTableBytes + 32 * k + field;
}

int main() {
  compress::EncodeOptions always;
  always.max_ratio = 1e12;  // coded whatever the overhead (tiny groups too)
  for (size_t n : {1u, 255u, 256u, 257u, 8192u, 8193u, 20001u}) {
    char name[64];
    std::snprintf(name, sizeof name, "normal n=%zu", n);
    same_bytes(name, synth_normal(n, n), {{0, 2 * n}}, always, 0, 1);
  }
  // More segments than warps: the grid-stride loop, two blocks.
  compress::EncodeOptions small;
  small.segment_elements = 256;
  same_bytes("normal 40000, 256-element segments", synth_normal(40000, 3), {{0, 80000}}, small, 0,
             2);
  // Mixed: BF16, raw gaps, an odd offset, raw exponents (random BF16).
  std::vector<uint8_t> mixed = synth_normal(9000, 4);
  std::vector<compress::Bf16Range> ranges{{0, mixed.size()}};
  std::mt19937_64 rng(5);
  for (int i = 0; i < 1001; ++i) mixed.push_back(static_cast<uint8_t>(rng()));
  auto more = synth_normal(5000, 6);
  ranges.push_back({mixed.size(), more.size()});
  mixed.insert(mixed.end(), more.begin(), more.end());
  std::vector<uint8_t> noise(2 * 3000);
  for (auto& b : noise) b = static_cast<uint8_t>(rng());
  ranges.push_back({mixed.size(), noise.size()});
  mixed.insert(mixed.end(), noise.begin(), noise.end());
  for (size_t misalign : {0u, 1u, 2u, 8u}) same_bytes("mixed", mixed, ranges, {}, misalign, 1);
  {
    const auto enc = compress::encode_group(mixed, ranges).value();
    const auto l = compress::read_group_layout(enc).value();
    size_t split = 0, copy = 0;
    for (const auto& s : l.segments) {
      split += s.kind == compress::SegmentKind::split;
      copy += s.kind == compress::SegmentKind::copy;
    }
    CHECK(split > 0 && copy > 0, "mixed has split %zu and copy %zu segments", split, copy);
  }

  // Random damage: the device's verdict and bytes must be the CPU's (without its checksum).
  const auto bytes = synth_normal(3 * 8192 + 700, 8);
  const auto enc =
      compress::encode_group(bytes, std::vector<compress::Bf16Range>{{0, bytes.size()}}).value();
  const auto layout = compress::read_group_layout(enc).value();
  int accepted = 0, refused = 0;
  const int trials = 150;
  for (int trial = 0; trial < trials; ++trial) {
    std::vector<uint8_t> v = enc;
    for (int k = 0; k < 2; ++k) {
      const size_t at = rng() % 2 ? rng() % layout.payload_offset : rng() % v.size();
      v[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
    }
    std::vector<uint8_t> cpu(bytes.size());
    auto l = compress::read_group_layout(v);
    const bool cpu_ok = l.ok() && l->decoded_size == bytes.size() &&
                        l->segments.size() == layout.segments.size() &&
                        compress::decode_group(*l, v, cpu, {nullptr, false}).ok();
    std::vector<uint8_t> got;
    const auto err =
        emulate(v, static_cast<uint32_t>(layout.segments.size()), bytes.size(), 0, 1, got);
    CHECK((err == 0) == cpu_ok, "damage trial %d: device %llx, cpu %s", trial, err,
          cpu_ok ? "ok" : "refused");
    if (err == 0 && cpu_ok) {
      CHECK(got == cpu, "damage trial %d: bytes differ", trial);
      ++accepted;
    } else {
      ++refused;
    }
  }
  std::printf("ok   random damage: %d accepted, %d refused, device == cpu\n", accepted, refused);

  // The targeted corruptions of tests/cuda/exponent_decode_test.cpp (HostileBytes...), the same
  // group and table, so the GPU test's expectations are checked here first.
  {
    auto hb = synth_normal(4 * 8192 + 3000, 12);
    std::vector<uint8_t> gap(512);
    for (auto& g : gap) g = static_cast<uint8_t>(rng());
    hb.insert(hb.begin() + 2 * 8192, gap.begin(), gap.end());
    const std::vector<compress::Bf16Range> hr{{0, 2 * 8192},
                                              {2 * 8192 + 512, 2 * (3 * 8192 + 3000)}};
    const auto henc = compress::encode_group(hb, hr).value();
    const auto hl = compress::read_group_layout(henc).value();
    CHECK(hl.segments.size() == 6 && hl.segments[1].kind == compress::SegmentKind::copy &&
              hl.segments[3].kind == compress::SegmentKind::rans &&
              hl.segments[5].kind == compress::SegmentKind::rans,
          "hostile fixture layout");
    const size_t words3 = hl.payload_offset + hl.segments[3].in_offset + compress::kStateBytes;
    using cuda::DecodeFault;
    struct Case {
      const char* name;
      std::function<void(std::vector<uint8_t>&)> apply;
      DecodeFault fault;
      DecodeFault or_fault = DecodeFault::none;  // a lie another segment's check may see first
    };
    const std::vector<Case> cases = {
        {"magic", [](auto& v) { v[0] = 'X'; }, DecodeFault::header},
        {"mode stored", [](auto& v) { put16(v, compress::kHeaderMode, 0); }, DecodeFault::header},
        {"payload size", [](auto& v) { put64(v, compress::kHeaderPayloadSize, 1); },
         DecodeFault::header},
        {"segment count", [](auto& v) { put32(v, compress::kHeaderSegmentCount, 7); },
         DecodeFault::header},
        {"decoded size past the buffer",
         [](auto& v) {
           put64(v, compress::kHeaderDecodedSize, get64(v, compress::kHeaderDecodedSize) + 2);
         },
         DecodeFault::capacity},
        {"table sum", [](auto& v) { v[compress::kHeaderBytes + 2 * 200] += 1; },
         DecodeFault::table},
        {"out offset huge", [](auto& v) { put64(v, entry(3, 0), 1ull << 50); }, DecodeFault::entry,
         DecodeFault::tiling},
        {"out offset wraps", [](auto& v) { put64(v, entry(3, 0), ~0ull - 1); }, DecodeFault::entry,
         DecodeFault::tiling},
        {"in offset huge", [](auto& v) { put64(v, entry(4, 8), 1ull << 40); }, DecodeFault::entry},
        {"in length huge", [](auto& v) { put32(v, entry(3, 16), 0xfffffff0u); },
         DecodeFault::entry},
        {"count huge", [](auto& v) { put32(v, entry(1, 20), 0x7fffffffu); }, DecodeFault::entry,
         DecodeFault::tiling},
        {"kind", [](auto& v) { put16(v, entry(2, 24), 5); }, DecodeFault::entry},
        {"reserved", [](auto& v) { v[entry(2, 30)] = 1; }, DecodeFault::entry},
        {"out offset shifted", [](auto& v) { put64(v, entry(3, 0), get64(v, entry(3, 0)) + 2); },
         DecodeFault::tiling},
        {"in length shorter",
         [](auto& v) { put32(v, entry(3, 16), static_cast<uint32_t>(get64(v, entry(3, 16))) - 2); },
         DecodeFault::stream},
        {"word flipped", [words3](auto& v) { v[words3 + 100] ^= 0x20; }, DecodeFault::state},
        {"state below 2^16", [words3](auto& v) { put32(v, words3 - compress::kStateBytes + 4, 3); },
         DecodeFault::state},
    };

    for (const Case& c : cases) {
      std::vector<uint8_t> v = henc;
      c.apply(v);
      std::vector<uint8_t> out;
      const auto e = emulate(v, 6, hb.size(), 0, 1, out);
      const auto got = static_cast<DecodeFault>(e >> 32);
      const bool kind_ok =
          c.fault == DecodeFault::state || c.fault == DecodeFault::stream
              ? (got == DecodeFault::state || got == DecodeFault::stream)
              : (got == c.fault || (c.or_fault != DecodeFault::none && got == c.or_fault));
      CHECK(e != 0 && kind_ok, "hostile %s: error word %llx", c.name, e);
    }
    std::printf("ok   %zu targeted corruptions\n", cases.size());
  }
  // A truncated buffer and a wrong host count.
  std::vector<uint8_t> got;
  auto err = emulate(enc, static_cast<uint32_t>(layout.segments.size()), bytes.size(), 0, 1, got,
                     enc.size() - 16);
  CHECK((err >> 32) == static_cast<uint32_t>(cuda::DecodeFault::header), "truncated: %llx", err);
  err = emulate(enc, static_cast<uint32_t>(layout.segments.size()) + 1, bytes.size(), 0, 1, got);
  CHECK((err >> 32) == static_cast<uint32_t>(cuda::DecodeFault::segment_count), "count: %llx", err);
  err = emulate(enc, static_cast<uint32_t>(layout.segments.size()), bytes.size() - 1, 0, 1, got);
  CHECK((err >> 32) == static_cast<uint32_t>(cuda::DecodeFault::capacity), "capacity: %llx", err);
  std::printf("%s (%d failures)\n", failures == 0 ? "emulation: all passed" : "emulation: FAILED",
              failures);
  return failures == 0 ? 0 : 1;
}
