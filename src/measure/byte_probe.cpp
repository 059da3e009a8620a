#include "measure/byte_probe.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>

#include "core/stats.h"
#include "exec/streaming_provider.h"
#include "host/page_cache.h"
#include "plan/plan.h"

namespace ferry {
namespace {

using Clock = std::chrono::steady_clock;

// One warm-up pass, then `passes` timed ones (each enqueues its work and synchronizes); the
// median pass gives the rate of `bytes` per pass.
Result<PathRate> time_passes(Backend& backend, Stream& stream, uint64_t bytes, int passes,
                             const std::function<Status()>& pass, std::string note) {
  PathRate r;
  r.bytes = bytes;
  r.passes = passes;
  r.note = std::move(note);
  std::vector<double> t;
  for (int i = 0; i <= passes; ++i) {
    const auto t0 = Clock::now();
    FERRY_RETURN_IF_ERROR(pass());
    FERRY_RETURN_IF_ERROR(backend.synchronize(stream));
    if (i > 0) t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  const double median = upper_median(std::move(t));
  if (median > 0 && bytes > 0) r.bytes_per_s = static_cast<double>(bytes) / median;
  return r;
}

PathRate not_measured(std::string why) {
  PathRate r;
  r.note = std::move(why);
  return r;
}

// Every group streamed through two pipelined slots of `tier`, each slot read by the probe kernel
// between acquire and release: the ring as the executor drives it.
Result<PathRate> probe_stream(Backend& backend, Stream& stream, const ModelWeights& weights,
                              const HostTier& tier, void* sum, int passes, std::string note) {
  Plan plan;
  plan.placement.assign(weights.groups.size(), Placement::streamed);
  plan.mode = StreamMode::pipelined;
  plan.slots = 2;
  plan.slot_bytes = align_group_bytes(largest_streamed_group(plan, weights));
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<StreamingProvider> ring,
                         StreamingProvider::create(backend, stream, weights, tier, plan));
  std::vector<Call> calls;
  uint64_t bytes = 0;
  for (size_t g = 0; g < weights.groups.size(); ++g) {
    calls.push_back(Call{static_cast<int>(g), Phase::prefill, 0});
    bytes += weights.groups[g].bytes;
  }
  return time_passes(
      backend, stream, bytes, passes,
      [&]() -> Status {
        FERRY_RETURN_IF_ERROR(ring->begin(stream, calls));
        for (const Call& c : calls) {
          FERRY_ASSIGN_OR_RETURN(void* base, ring->acquire(stream, c));
          FERRY_RETURN_IF_ERROR(backend.read_reduce(
              stream, base, weights.groups[static_cast<size_t>(c.group)].bytes, sum));
          FERRY_RETURN_IF_ERROR(ring->release(stream, c));
        }
        return {};
      },
      std::move(note));
}

uint64_t resident_limit(const Backend& backend, const ByteProbeOptions& o) {
  if (o.resident_limit > 0) return o.resident_limit;
  const uint64_t total = backend.info().total_bytes;
  const std::optional<uint64_t> used = backend.driver_device_bytes();
  if (!used) return total / 4;
  const uint64_t margin = uint64_t{1} << 30;
  return total > *used + margin ? total - *used - margin : 0;
}

struct Resident {
  PathRate read;
  PathRate load;
};

// As much of the working set as fits in one device buffer, group by group, loaded once from the
// mapping (timed: the one-time copy), then read group by group.
Result<Resident> probe_resident(Backend& backend, Stream& stream, const ModelWeights& weights,
                                const std::vector<std::vector<HostCopy>>& copies, void* sum,
                                uint64_t limit, int passes) {
  uint64_t want = 0;
  for (const WeightGroup& g : weights.groups) want += align_group_bytes(g.bytes);
  const uint64_t cap = std::min(want, limit / kGroupAlignment * kGroupAlignment);
  Resident r;
  if (cap == 0) {
    r.read = not_measured("no device memory left for it");
    return r;
  }
  auto buf = backend.allocate(static_cast<size_t>(cap), "probe");
  if (!buf.ok()) {
    r.read = not_measured(buf.error().message);
    return r;
  }
  std::vector<std::pair<size_t, uint64_t>> placed;  // group, offset
  uint64_t at = 0;
  for (size_t g = 0; g < weights.groups.size(); ++g) {
    const uint64_t b = align_group_bytes(weights.groups[g].bytes);
    if (at + b > cap) continue;
    placed.emplace_back(g, at);
    at += b;
  }
  uint64_t bytes = 0;
  for (const auto& [g, off] : placed) bytes += weights.groups[g].bytes;
  char* base = static_cast<char*>(buf->data());
  const std::string what = bytes == 0  ? std::string()
                           : at < want ? std::to_string(placed.size()) + " of " +
                                             std::to_string(weights.groups.size()) +
                                             " groups (as many as fit in device memory)"
                                       : "every group";
  FERRY_ASSIGN_OR_RETURN(r.load, time_passes(
                                     backend, stream, bytes, 1,
                                     [&]() -> Status {
                                       for (const auto& [g, off] : placed) {
                                         for (const HostCopy& c : copies[g]) {
                                           backend.copy_from_mapping(stream,
                                                                     base + off + c.dst_offset,
                                                                     c.src, c.bytes, *c.file);
                                         }
                                       }
                                       return {};
                                     },
                                     "the one-time copy of " + what + " from the host tier"));
  FERRY_ASSIGN_OR_RETURN(r.read, time_passes(
                                     backend, stream, bytes, passes,
                                     [&]() -> Status {
                                       for (const auto& [g, off] : placed) {
                                         FERRY_RETURN_IF_ERROR(backend.read_reduce(
                                             stream, base + off, weights.groups[g].bytes, sum));
                                       }
                                       return {};
                                     },
                                     "a kernel reading " + what + " in device memory"));
  return r;
}

// The storage path's rate: groups read from the files through the storage tier's bounce ring
// into one device buffer. Pass p reads the p-th stretch of about `storage_bytes` of the working
// set (the warm-up the 0-th), so nothing is read twice.
Result<PathRate> probe_storage(Backend& backend, Stream& stream, const ModelWeights& weights,
                               const Checkpoint& checkpoint, const ByteProbeOptions& o) {
  FERRY_ASSIGN_OR_RETURN(HostTier tier,
                         HostTier::open(backend, checkpoint, HostPath::storage, o.bounce));
  uint64_t total = 0, largest = 0;
  for (const WeightGroup& g : weights.groups) {
    total += g.bytes;
    largest = std::max(largest, g.bytes);
  }
  const auto stretches = static_cast<uint64_t>(o.passes) + 1;
  const uint64_t per = std::max<uint64_t>(1, std::min(o.storage_bytes, total / stretches));
  FERRY_ASSIGN_OR_RETURN(
      DeviceBuffer buf, backend.allocate(static_cast<size_t>(align_group_bytes(largest)), "probe"));
  size_t next = 0;
  uint64_t timed_bytes = 0;
  double timed_s = 0;
  for (uint64_t pass = 0; pass < stretches; ++pass) {
    const auto t0 = Clock::now();
    uint64_t bytes = 0;
    while (bytes < per && next < weights.groups.size()) {
      FERRY_ASSIGN_OR_RETURN(std::vector<HostCopy> c, tier.copies(weights.groups[next]));
      FERRY_RETURN_IF_ERROR(tier.bounce()->copy(stream, buf.data(), c));
      bytes += weights.groups[next].bytes;
      ++next;
    }
    FERRY_RETURN_IF_ERROR(backend.synchronize(stream));
    if (pass > 0) {
      timed_bytes += bytes;
      timed_s += std::chrono::duration<double>(Clock::now() - t0).count();
    }
  }
  PathRate r;
  r.bytes = timed_bytes / static_cast<uint64_t>(o.passes);
  r.passes = o.passes;
  if (timed_s > 0 && timed_bytes > 0) r.bytes_per_s = static_cast<double>(timed_bytes) / timed_s;
  r.note = "groups read from the files into device memory, a new stretch each pass (" + tier.how() +
           "); the rate of all timed passes together";
  return r;
}

}  // namespace

Result<ByteProbeResult> probe_byte_paths(Backend& backend, const ModelWeights& weights,
                                         const Checkpoint& checkpoint, const std::string& dir,
                                         const ByteProbeOptions& o) {
  if (o.passes < 1 || o.passes > 100) {
    return make_error(ErrorCode::invalid_argument, "probe: 1 to 100 passes");
  }
  ByteProbeResult res;
  BytePathRates& rates = res.rates;
  rates.device = backend.info().name;
  // The copies of every group, from an unregistered view (registering nothing yet).
  std::vector<std::vector<HostCopy>> copies;
  {
    FERRY_ASSIGN_OR_RETURN(HostTier plain, HostTier::open(backend, checkpoint, HostPath::pageable));
    for (const WeightGroup& g : weights.groups) {
      FERRY_ASSIGN_OR_RETURN(std::vector<HostCopy> c, plain.copies(g));
      uint64_t in = 0, all = 0;
      for (const HostCopy& h : c) {
        const auto [i, a] = cached_pages(h.src, static_cast<size_t>(h.bytes));
        in += i;
        all += a;
      }
      res.cached_fraction.push_back(all == 0 ? 1.0 : static_cast<double>(in) / double(all));
      rates.working_set_bytes += g.bytes;
      copies.push_back(std::move(c));
    }
  }
  // Registration tried for real on the first shard's first pages, before the tier registers all.
  if (!checkpoint.files().empty()) {
    const auto bytes = checkpoint.files().front().file_bytes();
    res.registration =
        backend.try_host_registration(bytes.data(), std::min(bytes.size(), size_t{256} << 20));
  }
  FERRY_ASSIGN_OR_RETURN(HostTier tier, HostTier::open(backend, checkpoint, o.host_path, o.bounce));
  res.register_seconds = tier.register_seconds();
  res.host_how = tier.how();
  rates.host_path = host_path_name(tier.path());
  // The copies again, now from the tier (the same addresses: one mapping).
  copies.clear();
  for (const WeightGroup& g : weights.groups) {
    FERRY_ASSIGN_OR_RETURN(std::vector<HostCopy> c, tier.copies(g));
    copies.push_back(std::move(c));
  }
  std::unique_ptr<Stream> stream = backend.create_stream();
  FERRY_ASSIGN_OR_RETURN(DeviceBuffer sum, backend.allocate(kGroupAlignment, "probe"));
  backend.fill_zero(*stream, sum.data(), sum.bytes());
  const uint64_t w = rates.working_set_bytes;

  if (!tier.readable_in_place()) {
    rates.of(BytePath::map) =
        not_measured("kernels cannot read the host tier in place here (" + tier.how() + ")");
  } else {
    FERRY_ASSIGN_OR_RETURN(
        rates.of(BytePath::map),
        time_passes(
            backend, *stream, w, o.passes,
            [&]() -> Status {
              for (const auto& group : copies) {
                for (const HostCopy& c : group) {
                  FERRY_RETURN_IF_ERROR(backend.read_reduce(*stream, c.src, c.bytes, sum.data()));
                }
              }
              return {};
            },
            "a kernel reading every group's file pages in place"));
  }
  {
    FERRY_ASSIGN_OR_RETURN(Resident r, probe_resident(backend, *stream, weights, copies, sum.data(),
                                                      resident_limit(backend, o), o.passes));
    rates.of(BytePath::resident) = std::move(r.read);
    res.resident_load = std::move(r.load);
  }
  FERRY_ASSIGN_OR_RETURN(
      rates.of(BytePath::stream),
      probe_stream(backend, *stream, weights, tier, sum.data(), o.passes,
                   std::string("the slot ring, two pipelined slots, host path ") +
                       host_path_name(tier.path())));
  if (tier.path() == HostPath::bounce) {
    res.stream_bounce = rates.of(BytePath::stream);
  } else {
    FERRY_ASSIGN_OR_RETURN(HostTier bounce,
                           HostTier::open(backend, checkpoint, HostPath::bounce, o.bounce));
    FERRY_ASSIGN_OR_RETURN(res.stream_bounce,
                           probe_stream(backend, *stream, weights, bounce, sum.data(), o.passes,
                                        "the slot ring, two pipelined slots, host path bounce (" +
                                            bounce.how() + ")"));
  }
  if (o.storage_bytes == 0) {
    res.storage = not_measured("not asked for (--storage-bytes 0)");
  } else {
    FERRY_ASSIGN_OR_RETURN(res.storage, probe_storage(backend, *stream, weights, checkpoint, o));
  }
  {
    // A second mapping of the same files, never registered: plain pageable memory.
    FERRY_ASSIGN_OR_RETURN(Checkpoint again, Checkpoint::open(dir));
    FERRY_ASSIGN_OR_RETURN(HostTier pageable, HostTier::open(backend, again, HostPath::pageable));
    uint64_t largest = 0;
    for (const WeightGroup& g : weights.groups) largest = std::max(largest, g.bytes);
    FERRY_ASSIGN_OR_RETURN(
        DeviceBuffer buf,
        backend.allocate(static_cast<size_t>(align_group_bytes(largest)), "probe"));
    std::vector<std::vector<HostCopy>> plain;
    for (const WeightGroup& g : weights.groups) {
      FERRY_ASSIGN_OR_RETURN(std::vector<HostCopy> c, pageable.copies(g));
      plain.push_back(std::move(c));
    }
    FERRY_ASSIGN_OR_RETURN(
        rates.of(BytePath::per_use_copy),
        time_passes(
            backend, *stream, w, o.passes,
            [&]() -> Status {
              for (size_t g = 0; g < plain.size(); ++g) {
                for (const HostCopy& c : plain[g]) {
                  backend.copy_from_mapping(*stream, static_cast<char*>(buf.data()) + c.dst_offset,
                                            c.src, c.bytes, *c.file);
                }
                FERRY_RETURN_IF_ERROR(
                    backend.read_reduce(*stream, buf.data(), weights.groups[g].bytes, sum.data()));
              }
              return {};
            },
            "each group copied from an unregistered mapping into device memory, then read"));
  }
  FERRY_RETURN_IF_ERROR(backend.synchronize(*stream));
  FERRY_RETURN_IF_ERROR(checkpoint.check_unchanged());
  return res;
}

}  // namespace ferry
