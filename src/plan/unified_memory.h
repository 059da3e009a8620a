// Where weights are read on a device whose memory is the host's (an integrated GPU: Jetson
// Orin and Thor, `cudaDevAttrIntegrated`). There the checkpoint's file pages already lie in the
// memory the GPU computes from, so a copy buys nothing: it duplicates the bytes in the same DRAM
// and spends its bandwidth twice. The Ingestion Tax paper's verdict for unified memory (and
// ferry's): read the weights in place (the map path: kernels read the registered mapping at its
// host addresses), copy none. `ferry probe` measures that path's rate against a copy.
//
// A decision of plain data, so that it is tested without the device: the facts in, the choice
// and the one message the session prints out. The session (exec/session.cpp) fills the facts
// from Backend::platform_facts and its host tier, and maps every group the choice names.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ferry {

struct UnifiedMemoryFacts {
  std::optional<bool> integrated;  // PlatformFacts::integrated (empty: the backend cannot tell)
  bool tier_readable_in_place = false;  // HostTier::readable_in_place: kernels read the mapping
  size_t groups = 0;                    // the model's groups
  size_t groups_in_layout = 0;   // of those, whose file range is their layout (in_place_groups;
                                 // every group of a packed checkpoint)
  bool placement_given = false;  // --plan, --resident, --resident-count or --map: kept as given
  std::optional<uint64_t> vram;  // --vram, resolved
};

struct UnifiedMemoryChoice {
  bool integrated = false;     // the device shares the host's memory
  bool map_in_layout = false;  // read every group whose range is its layout in place
  // For an integrated device, one line for the user: what ferry does and what --vram means
  // there; empty for a discrete device.
  std::string message;
};

UnifiedMemoryChoice choose_unified_memory(const UnifiedMemoryFacts& facts);

}  // namespace ferry
