// The measured inputs of planning: how long each weight group takes to cross the link (C_DMA)
// and to run in each phase it runs in (C_EXE), the machine's peaks, and the fixed host costs the
// schedule has between calls. The profiler (`ferry profile`) fills a Profile from device events;
// estimate_profile() builds one from the cost model so that planning works before any
// measurement. Profiles are shared as JSON files (docs/planner.md lists every field):
//
//   {"format": "ferry-profile", "version": 3, "source": "measured", "device": "NVIDIA H200",
//    "runs": 5,
//    "link": {"byte_path": "registered-mapping", "h2d_peak_bytes_per_s": 5.53e10},
//    "compute": {"peak_flops": 7.9e14, "memory_bandwidth_bytes_per_s": 4.3e12},
//    "host": {"sampling_s": 1.2e-4, "euler_s": 3e-5, "launch_s": 4e-6,
//             "sampling_copying_s": 1.5e-4, "euler_copying_s": 3e-5,
//             "stage_entry_s": {"prefill": 1.1e-3, "decode": 9e-4, "expert": 1.2e-4},
//             "inputs_s": 6.7e-4},
//    "workload": {"num_images": 16, ..., "flow_steps": 10},
//    "groups": [{"name": "text.layers.0.gate_up", "bytes": 201334784, "dma_s": 0.00364,
//                "exe_s": {"prefill": 0.0052, "decode": 0.00023},
//                "exe_copying_s": {"prefill": 0.0053, "decode": 0.00027},
//                "exe_mapped_s": {"prefill": 0.061, "decode": 0.0041}}, ...]}
//
// Version 2 added exe_copying_s and the host's *_copying_s, version 3 exe_mapped_s and
// idle_start_s; versions 1 and 2 are still read (without them).
//
// A file is hostile input: parse_profile checks every key, type and range; check_profile then
// checks it against a model and a call sequence (same groups in the same order with the same
// bytes, a C_EXE for every phase each group is called in).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "model/call_sequence.h"
#include "model/config.h"
#include "model/cost.h"
#include "model/weights.h"
#include "model/workload.h"

namespace ferry {

struct GroupProfile {
  std::string name;    // ModelWeights group name
  uint64_t bytes = 0;  // the group's padded bytes (what one copy moves)
  double dma_s = 0;    // C_DMA: one host-to-device copy of the whole group, seconds
  // C_EXE per phase (index phase_index(Phase)): one call's device time in that phase, the mean
  // over the calls of that phase (decode steps differ slightly as the KV cache grows); empty for
  // phases the group is not called in. A host-placed group's time includes gathering its rows.
  // This is the time with the link idle.
  std::array<std::optional<double>, kPhaseCount> exe_s;
  // C_EXE while a copy crosses the link the whole time (the copy's traffic slows kernels: on the
  // H200, decode GEMVs 12-22%, prefill 2-5%, gathers from host memory 3x). Absent for a phase:
  // the same as exe_s. Only for phases exe_s has.
  std::array<std::optional<double>, kPhaseCount> exe_copying_s;
  // C_EXE when the group is read in place from the registered host mapping by its kernels (the
  // map path: no copy, no slot), the link otherwise idle. Absent: not measured (the profiler's
  // map pass needs a tier kernels can read and a checkpoint whose group ranges are their layout),
  // and the planner then never maps the group. Only for phases exe_s has.
  std::array<std::optional<double>, kPhaseCount> exe_mapped_s;
  // What a call adds to C_EXE (alone or copying, which are back to back: the previous call's
  // compute just ended) when it starts on an idle engine: after waiting for its copy, after a
  // host step, first in the inference. Absent: 0. Only for phases exe_s has.
  std::array<std::optional<double>, kPhaseCount> idle_start_s;
  // C_DEC: one decode of the group's compressed form into a slot (issue 24), on the decode
  // stream. Absent: not measured; the schedule then models it (Profile::decode_bytes_per_s). Not
  // yet written to or read from profile files (the profiler does not measure it yet).
  std::optional<double> decode_s;
};

// Host work the schedule waits for (seconds). See plan/schedule.h for where each one falls.
struct HostCosts {
  double sampling_s = 0;  // after the LM head's last call of a step: read logits, pick a token
  double euler_s = 0;     // after expert.out: read the velocity, one Euler update
  double launch_s = 0;    // host time to enqueue one call (the GPU waits for it after a host step)
  // The host steps while a copy crosses the link (reading the result shares the link with it);
  // absent: the same as alone.
  std::optional<double> sampling_copying_s;
  std::optional<double> euler_copying_s;
  // Per phase (index phase_index(Phase)): the host's time between the previous stage's last call
  // and this stage's first, less one launch. The executor synchronizes at every stage boundary
  // and the next stage sets up its inputs, so the engine waits that long; it replaces the host
  // step after the previous stage's last call (the sampling after prefill is part of it).
  // Absent for a phase: that call's own host step, or none.
  std::array<std::optional<double>, kPhaseCount> stage_entry_s;
  // From the inference's start until its inputs (the images' pixels) are on the device: the
  // executor uploads them on the compute stream before the first call, and the copies start after
  // them (CallHandler::upload_inputs), so the compute engine and the link are both taken until
  // then. Absent: 0 (a profile from before the upload moved out of the first call, whose C_EXE
  // then holds it).
  std::optional<double> inputs_s;
};

// What the profile was measured with (C_EXE depends on it); informative, all optional.
struct ProfileWorkload {
  int64_t num_images = 0;
  int64_t image_height = 0;
  int64_t image_width = 0;
  int64_t prompt_tokens = 0;
  int64_t gen_tokens = 0;
  int64_t flow_steps = 0;

  bool operator==(const ProfileWorkload&) const = default;
};

// The fields of a workload that a profile records.
ProfileWorkload profile_workload(const Workload& w);

struct Profile {
  std::string source = "measured";  // "measured" (the profiler) or "estimated" (the cost model)
  std::string device;               // "NVIDIA H200"
  int64_t runs = 1;                 // runs each time is the median of
  std::string byte_path;            // how copies read host memory ("pinned", "registered-mapping")
  double link_bytes_per_s = 0;      // measured host-to-device peak over that path
  double peak_flops = 0;            // measured dense BF16 GEMM peak
  double memory_bandwidth = 0;      // device memory bandwidth, bytes/s (0 when not measured)
  HostCosts host;
  // The decoder's output rate (decoded bytes/s) assumed for a group without C_DEC: a guess until
  // measured (0: kAssumedDecodeBytesPerS, plan/schedule.h). Not yet in profile files.
  double decode_bytes_per_s = 0;
  std::optional<ProfileWorkload> workload;
  std::vector<GroupProfile> groups;  // one per ModelWeights group, same order

  const GroupProfile* find(std::string_view name) const;
};

// Allowed ranges, so that a file cannot drive the planner into overflow or nonsense.
inline constexpr double kMaxProfileSeconds = 3600;  // any single time
inline constexpr double kMaxLinkRate = 1e14;        // bytes/s
inline constexpr double kMaxFlops = 1e18;           // FLOP/s
inline constexpr uint64_t kMaxGroupBytes = 1ull << 44;
inline constexpr size_t kMaxProfileGroups = 100000;
inline constexpr size_t kMaxProfileString = 256;

std::string profile_to_json(const Profile& p);
// Parses and range-checks a profile file; errors (ErrorCode::format) start with "profile: ".
Result<Profile> parse_profile(std::string_view text);
// The profile describes this model (group names, order, bytes) and times every (group, phase)
// the call sequence has.
Status check_profile(const Profile& p, const ModelWeights& weights, const std::vector<Call>& calls);

// Rates estimate_profile assumes (measured ones where known: DESIGN.md's table, machine_limits).
struct MachineRates {
  std::string device = "estimate";
  std::string byte_path = "estimate";
  double link_bytes_per_s = 0;
  double peak_flops = 0;
  double memory_bandwidth = 0;
  double decode_bytes_per_s = 0;  // the group decoder's output rate (0: not known)
  HostCosts host;
};

// A profile of `weights` with the rates' peaks, host costs, device and byte path, every group
// named and sized, and no times yet (what estimate_profile and the profiler fill in).
Profile profile_skeleton(const ModelWeights& weights, const MachineRates& rates,
                         std::string source);

// A profile from the cost model: C_DMA = bytes / link rate; C_EXE = the mean over the group's
// calls in the phase of max(FLOPs / peak, bytes / bandwidth) (model/cost.h), plus, for a group
// kept on the host, its gathered rows over the link.
Result<Profile> estimate_profile(const ModelConfig& config, const ModelWeights& weights,
                                 const std::vector<Call>& calls, const CostContext& ctx,
                                 const MachineRates& rates);

}  // namespace ferry
