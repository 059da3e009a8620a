#include "exec/resident_weights.h"

#include <chrono>
#include <string>

#include "exec/host_tier.h"

namespace ferry {

Result<ResidentWeights> ResidentWeights::load(Backend& backend, Stream& stream,
                                              const ModelWeights& weights,
                                              const Checkpoint& checkpoint) {
  const auto t0 = std::chrono::steady_clock::now();
  ResidentWeights r;
  r.buffers_.reserve(weights.groups.size());
  // Copies straight out of the mapping (pageable: this simple loader registers nothing).
  FERRY_ASSIGN_OR_RETURN(HostTier tier, HostTier::open(backend, checkpoint, HostPath::pageable));
  for (const WeightGroup& g : weights.groups) {
    FERRY_ASSIGN_OR_RETURN(std::vector<HostCopy> copies, tier.copies(g));
    FERRY_ASSIGN_OR_RETURN(DeviceBuffer buf, backend.allocate(g.bytes, "resident weights"));
    // Zero the alignment padding so a group's bytes are fully defined.
    backend.fill_zero(stream, buf.data(), buf.bytes());
    for (const HostCopy& c : copies) {
      backend.copy_to_device(stream, static_cast<char*>(buf.data()) + c.dst_offset, c.src, c.bytes);
    }
    r.bytes_ += g.bytes;
    r.buffers_.push_back(std::move(buf));
  }
  FERRY_RETURN_IF_ERROR(backend.synchronize(stream));
  r.load_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

Result<void*> ResidentWeights::acquire(Stream&, const Call& call) {
  if (call.group < 0 || static_cast<size_t>(call.group) >= buffers_.size()) {
    return make_error(ErrorCode::internal,
                      "resident weights: no group " + std::to_string(call.group));
  }
  return buffers_[static_cast<size_t>(call.group)].data();
}

void* ResidentWeights::base(int group) const {
  FERRY_CHECK(group >= 0 && static_cast<size_t>(group) < buffers_.size(), "group out of range");
  return buffers_[static_cast<size_t>(group)].data();
}

}  // namespace ferry
