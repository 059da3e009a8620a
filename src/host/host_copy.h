// One piece of a weight group's layout as it lies in the checkpoint's mapping: what the host tier
// hands to whoever moves the bytes (a DMA out of the registered mapping, the bounce ring).
#pragma once

#include <cstddef>
#include <cstdint>

#include "format/mapped_file.h"

namespace ferry {

// `bytes` from `src` (in the mapping of `file`) to the group's base + dst_offset.
struct HostCopy {
  uint64_t dst_offset = 0;
  const std::byte* src = nullptr;
  uint64_t bytes = 0;
  const MappedFile* file = nullptr;  // the mapping `src` is in (for guarded host reads)
};

}  // namespace ferry
