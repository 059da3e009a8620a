#include "resident_weights.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "host/host_tier.h"

namespace ferry::testing {

namespace {
// Each of the two bounce buffers of the load (host/bounce_ring.h).
constexpr uint64_t kUploadSlot = uint64_t{64} << 20;
}  // namespace

Result<ResidentWeights> ResidentWeights::load(Backend& backend, Stream& stream,
                                              const ModelWeights& weights,
                                              const Checkpoint& checkpoint) {
  const auto t0 = std::chrono::steady_clock::now();
  FERRY_RETURN_IF_ERROR(checkpoint.check_unchanged());
  ResidentWeights r;
  // An error return leaves work enqueued that writes into r's buffers (a fill, copies): wait for
  // it before they are freed. Declared after `r` and before `tier`, so it runs between them.
  struct Drain {
    Backend& backend;
    Stream& stream;
    ~Drain() { (void)backend.synchronize(stream); }
  } drain{backend, stream};
  uint64_t largest = 0;
  for (const WeightGroup& g : weights.groups)
    for (const WeightSpec& s : g.tensors) largest = std::max(largest, s.bytes);
  // Where each group's bytes are in the mapping (registered nothing: this loader copies through
  // guarded page-locked buffers, host/bounce_ring.h).
  BounceOptions bounce;
  bounce.buffers = 2;
  bounce.buffer_bytes = static_cast<size_t>(std::clamp(largest, uint64_t{4096}, kUploadSlot));
  FERRY_ASSIGN_OR_RETURN(HostTier tier,
                         HostTier::open(backend, checkpoint, HostPath::bounce, bounce));
  r.buffers_.reserve(weights.groups.size());
  for (const WeightGroup& g : weights.groups) {
    FERRY_ASSIGN_OR_RETURN(std::vector<HostCopy> copies, tier.copies(g));
    FERRY_ASSIGN_OR_RETURN(DeviceBuffer allocated, backend.allocate(g.bytes, "resident weights"));
    r.buffers_.push_back(std::move(allocated));
    const DeviceBuffer& buf = r.buffers_.back();
    // Zero the alignment padding so a group's bytes are fully defined.
    backend.fill_zero(stream, buf.data(), buf.bytes());
    FERRY_RETURN_IF_ERROR(tier.bounce()->copy(stream, buf.data(), copies));
    r.bytes_ += g.bytes;
  }
  FERRY_RETURN_IF_ERROR(backend.synchronize(stream));
  // A rewrite in place that kept the size faults nowhere; the timestamps show it.
  FERRY_RETURN_IF_ERROR(checkpoint.check_unchanged());
  r.load_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

void* ResidentWeights::base(int group) const {
  FERRY_CHECK(group >= 0 && static_cast<size_t>(group) < buffers_.size(), "group out of range");
  return buffers_[static_cast<size_t>(group)].data();
}

}  // namespace ferry::testing
