// The host tier: the checkpoint's read-only shared mapping is where every streamed weight byte
// comes from. No second host copy is made: the page cache is the source. Where the backend can
// register the mapping (CUDA: cudaHostRegister with the read-only flag), copies out of it run at
// the link's full speed and kernels can read it in place; where it refuses, the bytes go through
// a small ring of page-locked bounce buffers filled by host threads (host/bounce_ring.h), and
// where even those cannot be had, copies run from pageable memory at the platform's speed.
// Registration may go in pieces on host threads (host/host_registrar.h): the tier is then usable
// for the ranges registered so far (ready, wait_progress) while the rest registers; a piece
// refused part-way is a failure the owner answers with fall_back.
// Without registration, kernels read the mapping in place only on a backend that reads pageable
// host memory (the CPU backend; a GPU with pageable memory access).
// The storage path touches no page of the mapping: the bounce ring's buffers are filled with reads
// of the files (host/storage_reader.h). `automatic` takes it when the checkpoint is neither in
// the page cache nor able to fit beside what the host holds (host/page_cache.h), since
// registering it would fault in every page and then thrash.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"
#include "format/safetensors.h"
#include "host/bounce_ring.h"
#include "host/host_copy.h"
#include "host/host_registrar.h"
#include "host/page_cache.h"
#include "model/weights.h"

namespace ferry {

// How weight bytes leave host memory.
enum class HostPath : uint8_t {
  automatic,   // registered where the backend allows it, else bounce, else pageable
  registered,  // registered or an error
  bounce,      // through page-locked bounce buffers filled by host threads, never registered
  pageable,    // never registered, no bounce buffers (for comparisons)
  storage,     // read from the files into the bounce buffers, never mapped in (cold checkpoints)
};
const char* host_path_name(HostPath p);
// "auto", "registered", "bounce", "pageable", "storage"; nullopt for anything else.
std::optional<HostPath> parse_host_path(std::string_view name);

class HostTier {
 public:
  // Registers each shard's mapping as `path` asks (or makes the bounce ring). The checkpoint
  // must outlive the tier. `registration` says in what pieces and on how many threads; by
  // default every shard in one piece, all registered before open() returns.
  static Result<HostTier> open(Backend& backend, const Checkpoint& checkpoint, HostPath path,
                               const BounceOptions& bounce = {},
                               const RegistrationOptions& registration = {});

  HostTier() = default;
  HostTier(HostTier&&) noexcept = default;
  HostTier& operator=(HostTier&&) noexcept = default;

  // The copies that fill `group`'s layout from the mapping: one per tensor (a chunk's rows of a
  // larger tensor included), merged into one where the next tensor follows in the file at the
  // distance it has in the layout (adjacent, or across the same alignment gap of less than
  // kGroupAlignment bytes: a packed checkpoint's group is one copy). Checks every tensor's
  // presence, dtype, shape and byte range.
  Result<std::vector<HostCopy>> copies(const WeightGroup& group) const;
  // copies(group) as a transfer issues them: on a tier registered in pieces, cut where a piece
  // ends (no copy spans two registrations).
  Result<std::vector<HostCopy>> transfer_copies(const WeightGroup& group) const;
  // The address at which a kernel reads `group` in place: for a group of one tensor, on a tier
  // that is registered (or a backend that reads host memory directly).
  Result<void*> in_place(const WeightGroup& group) const;
  // Per group of `weights`: whether in_place(group) succeeds (the groups a plan may map). All
  // zero on a tier kernels cannot read.
  std::vector<uint8_t> in_place_groups(const ModelWeights& weights) const;
  // Per group: whether its file range is its layout (one copy from offset 0), so that kernels on
  // a tier they can read (this one or another machine's registered tier) could read it in place.
  std::vector<uint8_t> laid_out_groups(const ModelWeights& weights) const;

  // The path in use: registered, bounce, pageable or storage (never automatic).
  HostPath path() const { return path_; }
  bool registered() const { return path_ == HostPath::registered; }
  // The bounce ring, on the bounce and storage paths (else null). Thread-safe; the tier keeps it
  // alive.
  BounceRing* bounce() const { return bounce_.get(); }
  bool readable_in_place() const { return in_place_; }
  const std::string& how() const { return how_; }
  // The registration's time: first piece's call to the last one's end (so far); the time the
  // attempt took where it was refused.
  double register_seconds() const;
  // The registration's pieces, threads and times (zeros off the registered path).
  RegistrationStats registration() const;
  // The page cache and the host's memory when the tier opened (what `automatic` chooses by).
  const PageCacheState& page_cache() const { return page_cache_; }

  // Registration in progress. Off the registered path every range is ready and nothing waits.
  // Whether every piece under `copies` is registered:
  bool ready(std::span<const HostCopy> copies) const;
  size_t registered_pieces() const;
  // Blocks until more than `seen` pieces are registered (or all are); the error of a piece
  // refused part-way.
  Status wait_progress(size_t seen) const;
  // Blocks until every piece is registered; the error of a piece refused part-way.
  Status wait_all() const;
  // The pieces under `copies` are registered before the others, in this order.
  void prioritize(std::span<const HostCopy> copies) const;
  // A piece was refused after others were registered.
  bool registration_failed() const;
  // After registration_failed(): releases every piece (copies out of them must have completed:
  // synchronize first), then takes what `requested` falls back to, as open() does when
  // registration is refused at once: the bounce ring or pageable for automatic, an error naming
  // the piece for registered (nothing stays registered either way).
  Status fall_back(Backend& backend, HostPath requested, const BounceOptions& bounce = {});

 private:
  // The bounce ring (bounce, automatic) or pageable: what is left when registration is not
  // asked for or was refused (`refused` says why; empty: not asked for).
  // The address of `group`'s layout in the mapping, whether or not kernels can read it there:
  // an error where its file range is not its layout.
  Result<void*> laid_out(const WeightGroup& group) const;
  Status take_unregistered(Backend& backend, HostPath requested, std::string refused,
                           const BounceOptions& bounce);

  const Checkpoint* checkpoint_ = nullptr;
  std::unique_ptr<HostRegistrar> registrar_;
  std::unique_ptr<BounceRing> bounce_;
  HostPath path_ = HostPath::pageable;
  bool in_place_ = false;
  std::string how_;
  double register_seconds_ = 0.0;  // of a refused attempt
  PageCacheState page_cache_;
};

}  // namespace ferry
