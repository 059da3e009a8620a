// For tests and tools that drive one part of a model by hand (a decoder step, the vision
// encoder, the expert) with no call sequence: every group in a device buffer of its own, loaded
// once from the checkpoint at the group's WeightSpec offsets (the same layout a streaming slot
// uses), its address by group. Not a production path: inference, the golden tests included, runs
// through exec/session.h, whose plan with no budget keeps every group resident in the arena.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"
#include "format/safetensors.h"
#include "model/weights.h"

namespace ferry::testing {

class ResidentWeights {
 public:
  // Allocates every group and copies its tensors in; synchronizes the stream before returning.
  // A checkpoint tensor that is missing or whose byte size differs from the spec is an error;
  // so is a checkpoint file that changes during the load (read through the bounce ring,
  // host/bounce_ring.h).
  static Result<ResidentWeights> load(Backend& backend, Stream& stream, const ModelWeights& weights,
                                      const Checkpoint& checkpoint);

  ResidentWeights() = default;
  ResidentWeights(ResidentWeights&&) noexcept = default;
  ResidentWeights& operator=(ResidentWeights&&) noexcept = default;

  void* base(int group) const;
  uint64_t bytes() const { return bytes_; }
  double load_seconds() const { return load_seconds_; }

 private:
  std::vector<DeviceBuffer> buffers_;
  uint64_t bytes_ = 0;
  double load_seconds_ = 0.0;
};

}  // namespace ferry::testing
