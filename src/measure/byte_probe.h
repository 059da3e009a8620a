// Endpoint probes for the byte paths (plan/byte_paths.h), over the deployed working set: every
// weight group of the model, read the way each path reads it, timed pass by pass (a warm-up pass,
// then the median of the timed ones). Not a small buffer that a cache could hold: a probe that
// recycles a small buffer measures the cache, not the path.
//
//   map           the registered file pages, read in place by the probe kernel
//                 (Backend::read_reduce), group by group
//   resident      one device buffer holding as much of the working set as fits (all of it where
//                 it fits), filled once from the mapping, read by the same kernel
//   stream        the slot ring itself (StreamingProvider, every group streamed, two slots,
//                 pipelined), the kernel reading each slot between acquire and release
//   stream_bounce the same through the bounce ring (the fallback's rate on this machine)
//   per_use_copy  each group copied from a second, unregistered (pageable) mapping of the same
//                 files into a device buffer, then read
//   storage       (not an endpoint: the rate at which the storage path, host/storage_reader.h,
//                 brings groups from the files into device memory) a different stretch of the
//                 working set each pass, so that no cache below the file system serves a repeat
//
// Before anything touches the files, mincore says which pages of each group are in the page
// cache (registration pins, and so faults in, every page).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"
#include "format/safetensors.h"
#include "host/bounce_ring.h"
#include "host/host_tier.h"
#include "model/weights.h"
#include "plan/byte_paths.h"

namespace ferry {

struct ByteProbeOptions {
  int passes = 3;  // timed passes per path, after one warm-up
  HostPath host_path = HostPath::automatic;
  // Device bytes the resident probe may take (0: the device's memory less what is in use and a
  // 1 GiB margin; on a backend that cannot tell, a quarter of its memory).
  uint64_t resident_limit = 0;
  BounceOptions bounce;
  // Bytes per pass of the storage probe (each pass reads other groups; fewer where the working
  // set is smaller than passes + 1 of them). 0: not measured.
  uint64_t storage_bytes = uint64_t{2} << 30;
};

struct ByteProbeResult {
  BytePathRates rates;
  PathRate stream_bounce;  // the bounce ring's stream rate (not one of the four endpoints)
  PathRate resident_load;  // the one-time copy that filled the resident buffer
  PathRate storage;        // reads from the files into device memory (the storage path)
  std::vector<double> cached_fraction;  // per group, before the probe touched the files
  std::vector<RegistrationTrial> registration;
  double register_seconds = 0.0;
  std::string host_how;
};

// `dir`: the checkpoint's folder, opened a second time for the pageable mapping.
Result<ByteProbeResult> probe_byte_paths(Backend& backend, const ModelWeights& weights,
                                         const Checkpoint& checkpoint, const std::string& dir,
                                         const ByteProbeOptions& options);

}  // namespace ferry
