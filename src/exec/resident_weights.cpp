#include "exec/resident_weights.h"

#include <chrono>
#include <cstring>
#include <string>

namespace ferry {

Result<ResidentWeights> ResidentWeights::load(Backend& backend, Stream& stream,
                                              const ModelWeights& weights,
                                              const Checkpoint& checkpoint) {
  const auto t0 = std::chrono::steady_clock::now();
  ResidentWeights r;
  r.buffers_.reserve(weights.groups.size());
  for (const WeightGroup& g : weights.groups) {
    FERRY_ASSIGN_OR_RETURN(DeviceBuffer buf, backend.allocate(g.bytes));
    // Zero the alignment padding so a group's bytes are fully defined.
    backend.fill_zero(stream, buf.data(), buf.bytes());
    for (const WeightSpec& s : g.tensors) {
      const Checkpoint::Entry* e = checkpoint.find(s.checkpoint_name);
      if (e == nullptr) {
        return make_error(ErrorCode::format,
                          checkpoint.dir() + ": tensor " + s.checkpoint_name + " is missing");
      }
      if (e->info->dtype != s.dtype || e->info->shape != s.shape) {
        return make_error(ErrorCode::format,
                          checkpoint.dir() + ": tensor " + s.checkpoint_name + " is " +
                              std::string(dtype_name(e->info->dtype)) +
                              " of another shape or dtype than the model's table says (" +
                              std::string(dtype_name(s.dtype)) + "); bind_checkpoint names both");
      }
      const auto data = checkpoint.data(*e);
      if (data.size() != s.bytes || s.offset + s.bytes > g.bytes) {
        return make_error(ErrorCode::format, checkpoint.dir() + ": tensor " + s.checkpoint_name +
                                                 ": " + std::to_string(data.size()) +
                                                 " bytes, expected " + std::to_string(s.bytes));
      }
      backend.copy_to_device(stream, static_cast<char*>(buf.data()) + s.offset, data.data(),
                             data.size());
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
