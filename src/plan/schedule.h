// The timed call sequence: one inference's calls with the profile's times attached, in the
// form the predictor, the lower bound and the planner read. Built once per (model, workload,
// profile); every plan is then priced against the same Schedule.
//
// Host steps (the executor's rule, plan/plan.h): the host reads a call's output and works before
// it enqueues the next call
//   - sampling after a call of an lm_head group that ends its (phase, step)'s run of lm_head
//     calls (after the last chunk when the head is split into text.head.0..K-1);
//   - the Euler update after every call of an expert_out group.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "model/call_sequence.h"
#include "model/weights.h"
#include "plan/profile.h"

namespace ferry {

// `stage`: a stage boundary whose gap the profile measured as a whole (HostCosts::stage_entry_s);
// make_schedule sets it, host_step_after never returns it.
enum class HostStep : uint8_t { none, sampling, euler, stage };
const char* host_step_name(HostStep s);

// The model's host step that follows calls[i] (none when i is out of range): sampling after the
// LM head's last call of a step, the Euler update after expert.out.
HostStep host_step_after(const std::vector<Call>& calls, const ModelWeights& weights, size_t i);

struct Schedule {
  std::vector<Call> calls;
  std::vector<double> exe_s;          // per call: C_EXE of its (group, phase), the link idle
  std::vector<double> exe_copying_s;  // per call: its C_EXE while a copy runs the whole time
  // per call: its C_EXE when its group is read in place from host memory (the map path): the
  // profile's exe_mapped_s where measured, else max(C_EXE, bytes / link peak) (a guess for
  // plans mapped by hand; the planner maps only measured groups)
  std::vector<double> exe_mapped_s;
  std::vector<double> idle_start_s;          // per call: added when it starts on an idle engine
  std::vector<HostStep> host_after;          // per call
  std::vector<double> host_after_s;          // per call: the host step's seconds (0 when none)
  std::vector<double> host_after_copying_s;  // per call: the same while a copy runs
  std::vector<double> dma_s;                 // per group: C_DMA
  std::vector<uint64_t> bytes;               // per group
  std::vector<int64_t> calls_of;             // per group: how many calls use it
  std::vector<bool> host_allowed;            // per group: the planner may keep it on the host
                                             // (host_placement_allowed, where kernels can read
                                             // the host tier in place)
  std::vector<bool> gathers_rows;            // per group: host_placement_allowed (its call reads
                                             // rows in place; on the host it is not mapped whole)
  std::vector<bool> map_measured;            // per group: the profile times it mapped in every
                                             // phase it is called in (never a row-gathering group)
  std::vector<bool> map_allowed;             // per group: the planner may map it: measured, and
                                             // the caller (planning_context) says its file range
                                             // can be read in place; make_schedule sets none
  double inputs_s = 0;  // the inputs' upload before the first call and copy (HostCosts::inputs_s)
  double launch_s = 0;  // host time to enqueue one call
  double link_bytes_per_s = 0;  // the profile's link peak
  // Compressed forms (issue 24; empty: none; set_compressed fills them, make_schedule not):
  std::vector<uint64_t> compressed_bytes;  // per group: its compressed bytes (0: none), what the
                                           // planner, the predictor and validate_plan read
  std::vector<double> dma_compressed_s;    // per group: C_DMA of its compressed bytes
  std::vector<double> decode_s;            // per group: C_DEC, one decode into a slot

  size_t group_count() const { return dma_s.size(); }
};

// The decoder's output rate a schedule assumes where the profile has neither C_DEC nor a rate:
// a guess until measured (docs/compression.md: the CUDA decoder is expected at ~1-2 TB/s on
// large groups and is not measured yet; half the 800 GB/s target is taken, so that
// plans do not count on more).
inline constexpr double kAssumedDecodeBytesPerS = 400e9;

// Attaches a model's compressed forms (`compressed`: per group its compressed bytes, 0: none) to
// `s`: C_DMA of the compressed bytes, the raw C_DMA scaled by compressed / raw bytes (a copy's
// time is its bytes over the link); C_DEC, the profile's where measured, else the group's raw
// bytes over profile.decode_bytes_per_s (kAssumedDecodeBytesPerS when 0). invalid_argument when
// the sizes are not one per group.
Status set_compressed(Schedule& s, std::span<const uint64_t> compressed, const Profile& profile);

// Checks the profile against the model and the calls (check_profile), then attaches the times.
Result<Schedule> make_schedule(const ModelWeights& weights, const std::vector<Call>& calls,
                               const Profile& profile);

}  // namespace ferry
