// The host tier: the checkpoint's read-only shared mapping is where every streamed weight byte
// comes from. No second host copy is made: the page cache is the source. Where the backend can
// register the mapping (CUDA: cudaHostRegister with the read-only flag), copies out of it run at
// the link's full speed and kernels can read it in place; where it refuses, copies run from
// pageable memory at the platform's speed, and nothing can be read in place.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"
#include "format/safetensors.h"
#include "model/weights.h"

namespace ferry {

// How weight bytes leave host memory.
enum class HostPath : uint8_t {
  automatic,   // registered where the backend allows it, else pageable
  registered,  // registered or an error
  pageable,    // never registered (for comparisons; nothing can be read in place)
};
const char* host_path_name(HostPath p);

// One copy that fills part of a group's layout: `bytes` from `src` (in the mapping) to the
// group's base + dst_offset.
struct HostCopy {
  uint64_t dst_offset = 0;
  const std::byte* src = nullptr;
  uint64_t bytes = 0;
  const MappedFile* file = nullptr;  // the mapping `src` is in (for guarded host reads)
};

class HostTier {
 public:
  // Registers each shard's mapping as `path` asks. The checkpoint must outlive the tier.
  static Result<HostTier> open(Backend& backend, const Checkpoint& checkpoint, HostPath path);

  HostTier() = default;
  HostTier(HostTier&&) noexcept = default;
  HostTier& operator=(HostTier&&) noexcept = default;

  // The copies that fill `group`'s layout from the mapping: one per tensor (a chunk's rows of a
  // larger tensor included), adjacent ones merged into one. Checks every tensor's presence,
  // dtype, shape and byte range.
  Result<std::vector<HostCopy>> copies(const WeightGroup& group) const;
  // The address at which a kernel reads `group` in place: for a group of one tensor, on a tier
  // that is registered (or a backend that reads host memory directly).
  Result<void*> in_place(const WeightGroup& group) const;

  bool registered() const { return registered_; }
  bool readable_in_place() const { return in_place_; }
  const std::string& how() const { return how_; }
  double register_seconds() const { return register_seconds_; }

 private:
  const Checkpoint* checkpoint_ = nullptr;
  std::vector<std::unique_ptr<HostRegistration>> registrations_;
  bool registered_ = false;
  bool in_place_ = false;
  std::string how_;
  double register_seconds_ = 0.0;
};

}  // namespace ferry
