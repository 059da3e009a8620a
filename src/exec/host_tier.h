// The host tier: the checkpoint's read-only shared mapping is where every streamed weight byte
// comes from. No second host copy is made: the page cache is the source. Where the backend can
// register the mapping (CUDA: cudaHostRegister with the read-only flag), copies out of it run at
// the link's full speed and kernels can read it in place; where it refuses, the bytes go through
// a small ring of page-locked bounce buffers filled by host threads (exec/bounce_ring.h), and
// where even those cannot be had, copies run from pageable memory at the platform's speed.
// Without registration, kernels read the mapping in place only on a backend that reads pageable
// host memory (the CPU backend; a GPU with pageable memory access).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"
#include "exec/bounce_ring.h"
#include "exec/host_copy.h"
#include "format/safetensors.h"
#include "model/weights.h"

namespace ferry {

// How weight bytes leave host memory.
enum class HostPath : uint8_t {
  automatic,   // registered where the backend allows it, else bounce, else pageable
  registered,  // registered or an error
  bounce,      // through page-locked bounce buffers filled by host threads, never registered
  pageable,    // never registered, no bounce buffers (for comparisons)
};
const char* host_path_name(HostPath p);
// "auto", "registered", "bounce", "pageable"; nullopt for anything else.
std::optional<HostPath> parse_host_path(std::string_view name);

class HostTier {
 public:
  // Registers each shard's mapping as `path` asks (or makes the bounce ring). The checkpoint
  // must outlive the tier.
  static Result<HostTier> open(Backend& backend, const Checkpoint& checkpoint, HostPath path,
                               const BounceOptions& bounce = {});

  HostTier() = default;
  HostTier(HostTier&&) noexcept = default;
  HostTier& operator=(HostTier&&) noexcept = default;

  // The copies that fill `group`'s layout from the mapping: one per tensor (a chunk's rows of a
  // larger tensor included), merged into one where the next tensor follows in the file at the
  // distance it has in the layout (adjacent, or across the same alignment gap of less than
  // kGroupAlignment bytes: a packed checkpoint's group is one copy). Checks every tensor's
  // presence, dtype, shape and byte range.
  Result<std::vector<HostCopy>> copies(const WeightGroup& group) const;
  // The address at which a kernel reads `group` in place: for a group of one tensor, on a tier
  // that is registered (or a backend that reads host memory directly).
  Result<void*> in_place(const WeightGroup& group) const;

  // The path in use: registered, bounce or pageable (never automatic).
  HostPath path() const { return path_; }
  bool registered() const { return path_ == HostPath::registered; }
  // The bounce ring, on the bounce path (else null). Thread-safe; the tier keeps it alive.
  BounceRing* bounce() const { return bounce_.get(); }
  bool readable_in_place() const { return in_place_; }
  const std::string& how() const { return how_; }
  double register_seconds() const { return register_seconds_; }

 private:
  const Checkpoint* checkpoint_ = nullptr;
  std::vector<std::unique_ptr<HostRegistration>> registrations_;
  std::unique_ptr<BounceRing> bounce_;
  HostPath path_ = HostPath::pageable;
  bool in_place_ = false;
  std::string how_;
  double register_seconds_ = 0.0;
};

}  // namespace ferry
