#include "measure/machine_limits.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <vector>

#include "core/bf16.h"
#include "core/stats.h"
#include "exec/session_plan.h"

namespace ferry {
namespace {

double now_seconds() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

Result<DeviceBuffer> random_bf16(Backend& backend, Stream& stream, int64_t elements, uint64_t seed,
                                 std::vector<uint16_t>& host) {
  FERRY_ASSIGN_OR_RETURN(
      DeviceBuffer buf,
      backend.allocate(static_cast<size_t>(elements) * sizeof(uint16_t), "machine limits"));
  host.resize(static_cast<size_t>(elements));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (auto& v : host) v = f32_to_bf16(dist(rng));
  backend.copy_to_device(stream, buf.data(), host.data(), host.size() * sizeof(uint16_t));
  FERRY_RETURN_IF_ERROR(backend.synchronize(stream));  // `host` is reused by the caller
  return buf;
}

}  // namespace

Result<MachineLimits> measure_machine_limits(Backend& backend, Stream& stream, uint64_t budget) {
  const bool cpu = backend.name() == "cpu";
  MachineLimits m;
  m.gemm_size = cpu ? 256 : 8192;
  m.copy_bytes = cpu ? (64ull << 20) : (2ull << 30);
  // Under a budget the probes stay well inside it too (two copy buffers, the GEMM's three
  // matrices, one host-link buffer at once): an eighth of it each, the GEMM at most 4096^3.
  if (budget > 0) {
    m.copy_bytes = std::min<uint64_t>(m.copy_bytes, budget / 8 / 256 * 256);
    if (!cpu && uint64_t{8192} * 8192 * 2 * 3 > budget / 4) m.gemm_size = 4096;
  }
  const int reps = cpu ? 3 : 20;
  const int64_t n = m.gemm_size;

  std::vector<uint16_t> host;
  FERRY_ASSIGN_OR_RETURN(DeviceBuffer x, random_bf16(backend, stream, n * n, 1, host));
  FERRY_ASSIGN_OR_RETURN(DeviceBuffer w, random_bf16(backend, stream, n * n, 2, host));
  FERRY_ASSIGN_OR_RETURN(DeviceBuffer y,
                         backend.allocate(static_cast<size_t>(n * n) * 2, "machine limits"));
  Linear op;
  op.x = make_view(x.data(), DType::bf16, n, n);
  op.w = make_view(w.data(), DType::bf16, n, n);
  op.y = make_view(y.data(), DType::bf16, n, n);
  std::vector<double> times;
  for (int i = 0; i < reps + 2; ++i) {  // two warm-ups: handles, heuristics, clocks
    const double t0 = now_seconds();
    FERRY_RETURN_IF_ERROR(backend.run(stream, op));
    FERRY_RETURN_IF_ERROR(backend.synchronize(stream));
    if (i >= 2) times.push_back(now_seconds() - t0);
  }
  const double flops =
      2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  m.gemm_flops = flops / upper_median(times);

  // Copy bandwidth: one buffer into another, random contents.
  FERRY_ASSIGN_OR_RETURN(DeviceBuffer a, backend.allocate(m.copy_bytes, "machine limits"));
  FERRY_ASSIGN_OR_RETURN(DeviceBuffer b, backend.allocate(m.copy_bytes, "machine limits"));
  const size_t chunk = static_cast<size_t>(x.bytes());
  for (size_t off = 0; off < m.copy_bytes; off += chunk) {
    backend.copy_on_device(stream, static_cast<char*>(a.data()) + off, x.data(),
                           std::min(chunk, m.copy_bytes - off));
  }
  times.clear();
  for (int i = 0; i < reps + 2; ++i) {
    const double t0 = now_seconds();
    backend.copy_on_device(stream, b.data(), a.data(), m.copy_bytes);
    FERRY_RETURN_IF_ERROR(backend.synchronize(stream));
    if (i >= 2) times.push_back(now_seconds() - t0);
  }
  m.copy_bandwidth = 2.0 * static_cast<double>(m.copy_bytes) / upper_median(times);

  // The host link: page-locked host memory to the device in one copy, as large as a layer.
  m.h2d_bytes = std::min<uint64_t>(cpu ? (64ull << 20) : (384ull << 20), m.copy_bytes);
  FERRY_ASSIGN_OR_RETURN(HostBuffer h, backend.allocate_host(m.h2d_bytes));
  std::fill_n(static_cast<unsigned char*>(h.data()), m.h2d_bytes, static_cast<unsigned char>(7));
  times.clear();
  for (int i = 0; i < reps + 2; ++i) {
    const double t0 = now_seconds();
    backend.copy_to_device(stream, a.data(), h.data(), m.h2d_bytes);
    FERRY_RETURN_IF_ERROR(backend.synchronize(stream));
    if (i >= 2) times.push_back(now_seconds() - t0);
  }
  m.h2d_bandwidth = static_cast<double>(m.h2d_bytes) / upper_median(times);
  return m;
}

MachineRates measured_machine_rates(const Backend& backend, const MachineLimits& limits) {
  MachineRates r = default_machine_rates(backend);
  r.byte_path = "measured (page-locked)";
  if (limits.h2d_bandwidth > 0) r.link_bytes_per_s = limits.h2d_bandwidth;
  if (limits.gemm_flops > 0) r.peak_flops = limits.gemm_flops;
  if (limits.copy_bandwidth > 0) r.memory_bandwidth = limits.copy_bandwidth;
  return r;
}

}  // namespace ferry
