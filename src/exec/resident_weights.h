// All weights resident: one device buffer per group, loaded once from the checkpoint at the
// group's WeightSpec offsets (the same layout a streaming slot uses).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"
#include "exec/executor.h"
#include "format/safetensors.h"
#include "model/weights.h"

namespace ferry {

class ResidentWeights : public GroupProvider {
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

  Result<void*> acquire(Stream& stream, const Call& call) override;
  void* base(int group) const;
  uint64_t bytes() const { return bytes_; }
  double load_seconds() const { return load_seconds_; }

 private:
  std::vector<DeviceBuffer> buffers_;
  uint64_t bytes_ = 0;
  double load_seconds_ = 0.0;
};

}  // namespace ferry
