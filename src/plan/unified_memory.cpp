#include "plan/unified_memory.h"

#include "core/units.h"

namespace ferry {

UnifiedMemoryChoice choose_unified_memory(const UnifiedMemoryFacts& f) {
  UnifiedMemoryChoice c;
  if (!f.integrated.value_or(false)) return c;  // discrete, or not known: plan as usual
  c.integrated = true;
  const std::string vram_means =
      f.vram ? "--vram " + binary_bytes(*f.vram) +
                   " bounds ferry's own allocations there (KV cache, activations, workspaces, "
                   "and any group it copies), not the weights read in place, which stay in the "
                   "page cache the CPU and GPU share"
             : "--vram would bound ferry's own allocations there, not the weights read in place";
  if (f.placement_given) {
    c.message =
        "integrated GPU (device memory is host memory): the placement given is kept; " + vram_means;
    return c;
  }
  if (!f.tier_readable_in_place) {
    c.message =
        "integrated GPU (device memory is host memory), but kernels cannot read the checkpoint "
        "in place here (registration refused): weights are copied into the same memory, "
        "twice its footprint; " +
        vram_means;
    return c;
  }
  if (f.groups_in_layout == 0) {
    c.message =
        "integrated GPU (device memory is host memory): no group's file range is its layout, so "
        "weights are copied into the same memory; `ferry pack` the checkpoint to read them in "
        "place; " +
        vram_means;
    return c;
  }
  c.map_in_layout = true;
  if (f.groups_in_layout == f.groups) {
    c.message =
        "integrated GPU (device memory is host memory): every group is read in place, "
        "none copied; " +
        vram_means;
  } else {
    c.message =
        "integrated GPU (device memory is host memory): " + std::to_string(f.groups_in_layout) +
        " of " + std::to_string(f.groups) + " groups read in place, the other " +
        std::to_string(f.groups - f.groups_in_layout) +
        " copied (`ferry pack` the checkpoint to read all in place); " + vram_means;
  }
  return c;
}

}  // namespace ferry
