#include "plan/schedule.h"

#include <algorithm>

#include "plan/plan.h"

namespace ferry {

const char* host_step_name(HostStep s) {
  switch (s) {
    case HostStep::none:
      return "none";
    case HostStep::sampling:
      return "sampling";
    case HostStep::euler:
      return "euler";
    case HostStep::stage:
      return "stage";
  }
  return "?";
}

HostStep host_step_after(const std::vector<Call>& calls, const ModelWeights& weights, size_t i) {
  if (i >= calls.size()) return HostStep::none;
  auto kind = [&](size_t k) { return weights.groups.at(static_cast<size_t>(calls[k].group)).kind; };
  const GroupKind k = kind(i);
  if (k == GroupKind::expert_out) return HostStep::euler;
  if (k != GroupKind::lm_head) return HostStep::none;
  const bool last_of_run = i + 1 == calls.size() || kind(i + 1) != GroupKind::lm_head ||
                           calls[i + 1].phase != calls[i].phase ||
                           calls[i + 1].step != calls[i].step;
  return last_of_run ? HostStep::sampling : HostStep::none;
}

Result<Schedule> make_schedule(const ModelWeights& weights, const std::vector<Call>& calls,
                               const Profile& profile) {
  FERRY_RETURN_IF_ERROR(check_profile(profile, weights, calls));
  Schedule s;
  s.calls = calls;
  s.launch_s = profile.host.launch_s;
  s.inputs_s = profile.host.inputs_s.value_or(0);
  s.link_bytes_per_s = profile.link_bytes_per_s;
  const size_t n = weights.groups.size();
  s.dma_s.resize(n);
  s.bytes.resize(n);
  s.calls_of.assign(n, 0);
  s.host_allowed.resize(n);
  s.gathers_rows.resize(n);
  s.map_measured.assign(n, false);
  s.map_allowed.assign(n, false);
  for (size_t g = 0; g < n; ++g) {
    s.dma_s[g] = profile.groups[g].dma_s;
    s.bytes[g] = weights.groups[g].bytes;
    s.host_allowed[g] = host_placement_allowed(weights.groups[g]);
    s.gathers_rows[g] = s.host_allowed[g];
    s.map_measured[g] = !s.gathers_rows[g];  // until a call's phase lacks a mapped time
  }
  s.exe_s.resize(calls.size());
  s.exe_copying_s.resize(calls.size());
  s.exe_mapped_s.resize(calls.size());
  s.idle_start_s.resize(calls.size());
  s.host_after.resize(calls.size());
  s.host_after_s.resize(calls.size());
  s.host_after_copying_s.resize(calls.size());
  for (size_t i = 0; i < calls.size(); ++i) {
    const size_t g = static_cast<size_t>(calls[i].group);
    const size_t ph = phase_index(calls[i].phase);
    s.exe_s[i] = *profile.groups[g].exe_s[ph];
    s.exe_copying_s[i] = profile.groups[g].exe_copying_s[ph].value_or(s.exe_s[i]);
    s.idle_start_s[i] = profile.groups[g].idle_start_s[ph].value_or(0);
    const std::optional<double>& mapped = profile.groups[g].exe_mapped_s[ph];
    if (!mapped) s.map_measured[g] = false;
    s.exe_mapped_s[i] = mapped.value_or(std::max(
        s.exe_s[i], static_cast<double>(s.bytes[g]) / std::max(profile.link_bytes_per_s, 1.0)));
    ++s.calls_of[g];
    s.host_after[i] = host_step_after(calls, weights, i);
    switch (s.host_after[i]) {
      case HostStep::none:
        s.host_after_s[i] = 0;
        s.host_after_copying_s[i] = 0;
        break;
      case HostStep::sampling:
        s.host_after_s[i] = profile.host.sampling_s;
        s.host_after_copying_s[i] = profile.host.sampling_copying_s.value_or(s.host_after_s[i]);
        break;
      case HostStep::euler:
        s.host_after_s[i] = profile.host.euler_s;
        s.host_after_copying_s[i] = profile.host.euler_copying_s.value_or(s.host_after_s[i]);
        break;
      case HostStep::stage:
        break;  // host_step_after never names it
    }
    // A stage boundary with a measured entry: the whole gap, the host step before it included.
    if (i + 1 < calls.size() && calls[i + 1].phase != calls[i].phase) {
      if (const auto& entry = profile.host.stage_entry_s[phase_index(calls[i + 1].phase)]) {
        s.host_after[i] = HostStep::stage;
        s.host_after_s[i] = *entry;
        s.host_after_copying_s[i] = *entry;
      }
    }
  }
  for (size_t g = 0; g < n; ++g) {
    if (s.calls_of[g] == 0) s.map_measured[g] = false;
  }
  return s;
}

Status set_compressed(Schedule& s, std::span<const uint64_t> compressed, const Profile& profile) {
  const size_t n = s.group_count();
  if (compressed.size() != n || profile.groups.size() != n) {
    return make_error(ErrorCode::invalid_argument,
                      "schedule: compressed sizes for " + std::to_string(compressed.size()) +
                          " groups, the model has " + std::to_string(n));
  }
  const double rate =
      profile.decode_bytes_per_s > 0 ? profile.decode_bytes_per_s : kAssumedDecodeBytesPerS;
  s.compressed_bytes.assign(compressed.begin(), compressed.end());
  s.dma_compressed_s.assign(n, 0.0);
  s.decode_s.assign(n, 0.0);
  for (size_t g = 0; g < n; ++g) {
    if (compressed[g] == 0) continue;
    s.dma_compressed_s[g] = s.bytes[g] > 0 ? s.dma_s[g] * static_cast<double>(compressed[g]) /
                                                 static_cast<double>(s.bytes[g])
                                           : 0.0;
    const std::optional<double>& measured = profile.groups[g].decode_s;
    s.decode_s[g] = measured ? *measured : static_cast<double>(s.bytes[g]) / rate;
  }
  return {};
}

}  // namespace ferry
