// What-if planning for a machine you do not have (`ferry plan --what-if`): a measured profile
// re-priced for another GPU's link, memory bandwidth and tensor throughput, which the planner,
// the predictor and the sweep then read like any other profile. Everything printed from it is a
// projection (docs/planner.md, What-if planning).
//
// The rule, per call (re-pricing is per (group, phase), the profile's unit):
//   - copies (C_DMA) and the inputs' upload scale with the link: x (profile link / target link);
//   - a call's C_EXE (alone and copying) scales by the ratio of its roofline floors,
//       floor(m) = max(FLOPs / peak(m), bytes / bandwidth(m))     (model/cost.h's CallCost)
//     on the target against the source, summed over the (group, phase)'s calls. A call that is
//     memory-bound on both machines therefore scales with the bandwidth, a compute-bound one with
//     the TFLOPS, and one that changes sides with the ratio of the two floors. Like is compared
//     with like: the source's published figures where the card table knows the profile's device
//     (the NVIDIA H200), its measured peaks otherwise (then the projection is optimistic by the
//     source's measured-to-published gap; the report says which);
//   - a group whose calls gather rows from host memory (the embedding) scales with the link,
//     and a call read in place over the link (exe_mapped_s) with the link too, never below its
//     re-priced C_EXE;
//   - host steps (sampling, the Euler update, launches, stage entries) and idle_start_s are the
//     host's and the driver's: unchanged, as measured.
// A key not given keeps the source's figure (scale 1).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "model/call_sequence.h"
#include "model/cost.h"
#include "model/weights.h"
#include "plan/profile.h"

namespace ferry {

// One GPU's figures. `link` is what host-to-device copies from page-locked memory achieve
// (what `ferry profile` measures, not the signalling rate); `hbm` and `tflops` are datasheet
// figures (device memory bandwidth; dense BF16 tensor throughput with FP32 accumulation, the
// mode ferry's GEMMs use).
struct MachineFigures {
  std::optional<double> link_bytes_per_s;
  std::optional<double> memory_bandwidth;  // bytes/s
  std::optional<double> peak_flops;        // FLOP/s
  std::optional<uint64_t> vram;            // bytes of device memory
};

// A card of the table (what_if_cards.cpp, each entry's source noted there).
struct NamedCard {
  const char* key;          // "rtx-4080": what --what-if takes
  const char* name;         // "NVIDIA GeForce RTX 4080"
  const char* device_name;  // how the driver names it ("NVIDIA GeForce RTX 4080"), to recognise
                            // a profile's device
  const char* link;         // "PCIe 4.0 x16", "integrated (LPDDR5 shared with the CPU)"
  double link_bytes_per_s;  // copies' achieved rate on that link
  double memory_bandwidth;
  double peak_flops;
  uint64_t vram;
  bool integrated;   // device memory is host memory (Jetson): copies buy nothing there
  bool source_only;  // a profile's machine, not offered as a target (the H200)
};

std::span<const NamedCard> named_cards();
// The entry whose key or device name is `name` (exact), or nullptr.
const NamedCard* find_card(std::string_view name);

// What --what-if asked for: a card, keys, or a card then keys that override its figures
// ("rtx-4060-ti-16gb,link=25GB/s").
struct WhatIfTarget {
  std::string label;                // "RTX 4080" or "link=25GB/s,hbm=717GB/s"
  const NamedCard* card = nullptr;  // when a card was named
  MachineFigures figures;           // the card's, with the keys given over them
  bool integrated = false;
};

// Parses "rtx-4080", "link=25GB/s,hbm=717GB/s,tflops=97,vram=16GiB" or a card then keys. Rates
// take decimal or binary units per second (25GB/s, 900MiB/s); tflops a plain number (TFLOP/s);
// vram a size (16GiB). Errors (invalid_argument) start with "--what-if: " and name the item.
Result<WhatIfTarget> parse_what_if(std::string_view spec);

// How one resource was scaled.
struct ScaledFigure {
  double from = 0;        // the source's figure used for the ratio
  double to = 0;          // the target's
  std::string from_what;  // "published" (the card table's), else the profile's source:
                          // "measured" or "estimated"
};

struct Repricing {
  Profile profile;  // the re-priced profile (source "measured" or as the input's)
  WhatIfTarget target;
  ScaledFigure link, memory, compute;
  double copy_scale = 1;  // every C_DMA and inputs_s times this
  // Over every call of the workload (each once): calls memory-bound on the target, compute-bound
  // on it, and those that gather rows over the link; the compute scale's range over (group,
  // phase) and Σ re-priced C_EXE / Σ measured C_EXE.
  int64_t memory_bound_calls = 0;
  int64_t compute_bound_calls = 0;
  int64_t link_bound_calls = 0;
  double exe_scale_min = 1, exe_scale_max = 1, exe_scale_total = 1;
};

// Re-prices `measured` (checked against weights and calls first: check_profile) for `target`;
// `costs` are call_costs of `calls`, one each. An error when a resource the target changes has
// no source figure to scale from (a profile without memory bandwidth, say).
Result<Repricing> reprice_profile(const Profile& measured, const ModelWeights& weights,
                                  const std::vector<Call>& calls,
                                  const std::vector<CallCost>& costs, const WhatIfTarget& target);

// One line naming what was scaled and by how much: "projection for RTX 4080: copies x2.20 (link
// 55.0 -> 25.0 GB/s), compute x3.9 overall (...), host steps as measured".
std::string describe_repricing(const Repricing& r);

}  // namespace ferry
