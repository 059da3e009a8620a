#include "plan/profile.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>

#include <nlohmann/json.hpp>

#include "format/strict_json.h"
#include "plan/plan.h"

namespace ferry {

const GroupProfile* Profile::find(std::string_view name) const {
  for (const GroupProfile& g : groups) {
    if (g.name == name) return &g;
  }
  return nullptr;
}

namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

constexpr std::array<Phase, kPhaseCount> kPhases = {Phase::vision, Phase::prefill, Phase::decode,
                                                    Phase::expert};

Error bad(const std::string& msg) {
  return make_error(ErrorCode::format, "profile: " + msg);
}

// Checks that an object has only the allowed keys and all the required ones.
Status check_keys(const json& j, const std::string& where, std::initializer_list<const char*> req,
                  std::initializer_list<const char*> opt) {
  if (!j.is_object()) return bad(where + " must be a JSON object");
  for (const char* k : req) {
    if (!j.contains(k)) return bad(where + " has no \"" + k + "\"");
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool known = false;
    for (const char* k : req) known = known || it.key() == k;
    for (const char* k : opt) known = known || it.key() == k;
    if (!known) return bad(where + ": unknown key " + strict_json::quote(it.key()));
  }
  return {};
}

Result<double> read_number(const json& j, const std::string& where, double lo, double hi) {
  if (!j.is_number()) return bad(where + " must be a number");
  const double v = j.get<double>();
  if (!std::isfinite(v) || v < lo || v > hi) {
    return bad(where + " = " + j.dump() + " is outside [" + json(lo).dump() + ", " +
               json(hi).dump() + "]");
  }
  return v;
}

Result<int64_t> read_count(const json& j, const std::string& where, int64_t hi) {
  if (!j.is_number_unsigned()) return bad(where + " must be a non-negative integer");
  const uint64_t v = j.get<uint64_t>();
  if (v > static_cast<uint64_t>(hi)) {
    return bad(where + " = " + j.dump() + " is above " + std::to_string(hi));
  }
  return static_cast<int64_t>(v);
}

Result<std::string> read_string(const json& j, const std::string& where, bool allow_empty) {
  if (!j.is_string()) return bad(where + " must be a string");
  std::string s = j.get<std::string>();
  if (s.size() > kMaxProfileString) {
    return bad(where + " is longer than " + std::to_string(kMaxProfileString) + " bytes");
  }
  if (s.empty() && !allow_empty) return bad(where + " is empty");
  for (char c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return bad(where + " has a control character: " + strict_json::quote(s));
    }
  }
  return s;
}

// A group's seconds per phase (`key`: "exe_s" or "exe_copying_s"); with `only`, no phase that
// `only` lacks.
using PhaseTimes = std::array<std::optional<double>, kPhaseCount>;
Result<PhaseTimes> read_phase_times(const json& j, const std::string& at, const char* key,
                                    const PhaseTimes* only) {
  const std::string where = at + ": " + key;
  FERRY_RETURN_IF_ERROR(check_keys(j, where, {}, {"vision", "prefill", "decode", "expert"}));
  PhaseTimes out;
  for (Phase p : kPhases) {
    const char* name = phase_name(p);
    if (!j.contains(name)) continue;
    if (only != nullptr && !(*only)[phase_index(p)]) {
      return bad(where + "." + name + " without exe_s." + name);
    }
    FERRY_ASSIGN_OR_RETURN(double t,
                           read_number(j[name], where + "." + name, 0, kMaxProfileSeconds));
    out[phase_index(p)] = t;
  }
  return out;
}

// The phases `times` has (where `only` has them too, if given) as a JSON object.
ojson phase_times_json(const PhaseTimes& times, const PhaseTimes* only) {
  ojson out = ojson::object();
  for (Phase ph : kPhases) {
    const size_t k = phase_index(ph);
    if (times[k] && (only == nullptr || (*only)[k])) out[phase_name(ph)] = *times[k];
  }
  return out;
}

Result<HostCosts> read_host(const json& j) {
  FERRY_RETURN_IF_ERROR(
      check_keys(j, "\"host\"", {"sampling_s", "euler_s", "launch_s"},
                 {"sampling_copying_s", "euler_copying_s", "stage_entry_s", "inputs_s"}));
  HostCosts h;
  FERRY_ASSIGN_OR_RETURN(h.sampling_s,
                         read_number(j["sampling_s"], "host.sampling_s", 0, kMaxProfileSeconds));
  FERRY_ASSIGN_OR_RETURN(h.euler_s,
                         read_number(j["euler_s"], "host.euler_s", 0, kMaxProfileSeconds));
  FERRY_ASSIGN_OR_RETURN(h.launch_s,
                         read_number(j["launch_s"], "host.launch_s", 0, kMaxProfileSeconds));
  for (auto [key, out] :
       {std::pair{"sampling_copying_s", &h.sampling_copying_s},
        std::pair{"euler_copying_s", &h.euler_copying_s}, std::pair{"inputs_s", &h.inputs_s}}) {
    if (!j.contains(key)) continue;
    FERRY_ASSIGN_OR_RETURN(double t,
                           read_number(j[key], std::string("host.") + key, 0, kMaxProfileSeconds));
    *out = t;
  }
  if (j.contains("stage_entry_s")) {
    FERRY_ASSIGN_OR_RETURN(h.stage_entry_s, read_phase_times(j["stage_entry_s"], "\"host\"",
                                                             "stage_entry_s", nullptr));
  }
  return h;
}

Result<ProfileWorkload> read_workload(const json& j) {
  FERRY_RETURN_IF_ERROR(check_keys(
      j, "\"workload\"", {},
      {"num_images", "image_height", "image_width", "prompt_tokens", "gen_tokens", "flow_steps"}));
  ProfileWorkload w;
  auto field = [&](const char* key, int64_t& out, int64_t hi) -> Status {
    if (!j.contains(key)) return {};
    FERRY_ASSIGN_OR_RETURN(out, read_count(j[key], std::string("workload.") + key, hi));
    return {};
  };
  FERRY_RETURN_IF_ERROR(field("num_images", w.num_images, kMaxImages));
  FERRY_RETURN_IF_ERROR(field("image_height", w.image_height, kMaxImageSide));
  FERRY_RETURN_IF_ERROR(field("image_width", w.image_width, kMaxImageSide));
  FERRY_RETURN_IF_ERROR(field("prompt_tokens", w.prompt_tokens, kMaxSequence));
  FERRY_RETURN_IF_ERROR(field("gen_tokens", w.gen_tokens, kMaxSequence));
  FERRY_RETURN_IF_ERROR(field("flow_steps", w.flow_steps, kMaxFlowSteps));
  return w;
}

// A group's optional times per phase, by their JSON key, in the order a file has them: each only
// for phases exe_s has.
template <class Group>
auto optional_times(Group& g) {
  return std::array{std::pair{"exe_copying_s", &g.exe_copying_s},
                    std::pair{"idle_start_s", &g.idle_start_s},
                    std::pair{"exe_mapped_s", &g.exe_mapped_s}};
}

Result<GroupProfile> read_group(const json& j, size_t index, int64_t version) {
  const std::string where = "groups[" + std::to_string(index) + "]";
  if (version >= 3) {
    FERRY_RETURN_IF_ERROR(check_keys(j, where, {"name", "bytes", "dma_s", "exe_s"},
                                     {"exe_copying_s", "exe_mapped_s", "idle_start_s"}));
  } else {
    FERRY_RETURN_IF_ERROR(
        check_keys(j, where, {"name", "bytes", "dma_s", "exe_s"}, {"exe_copying_s"}));
  }
  GroupProfile g;
  FERRY_ASSIGN_OR_RETURN(g.name, read_string(j["name"], where + ".name", false));
  const std::string at = "group " + g.name;
  FERRY_ASSIGN_OR_RETURN(
      int64_t bytes, read_count(j["bytes"], at + ": bytes", static_cast<int64_t>(kMaxGroupBytes)));
  g.bytes = static_cast<uint64_t>(bytes);
  FERRY_ASSIGN_OR_RETURN(g.dma_s, read_number(j["dma_s"], at + ": dma_s", 0, kMaxProfileSeconds));
  FERRY_ASSIGN_OR_RETURN(g.exe_s, read_phase_times(j["exe_s"], at, "exe_s", nullptr));
  for (auto [key, times] : optional_times(g)) {
    if (!j.contains(key)) continue;
    FERRY_ASSIGN_OR_RETURN(*times, read_phase_times(j[key], at, key, &g.exe_s));
  }
  return g;
}

}  // namespace

std::string profile_to_json(const Profile& p) {
  ojson j;
  j["format"] = "ferry-profile";
  j["version"] = 3;
  j["source"] = p.source;
  j["device"] = p.device;
  j["runs"] = p.runs;
  j["link"] = {{"byte_path", p.byte_path}, {"h2d_peak_bytes_per_s", p.link_bytes_per_s}};
  j["compute"] = {{"peak_flops", p.peak_flops},
                  {"memory_bandwidth_bytes_per_s", p.memory_bandwidth}};
  j["host"] = {{"sampling_s", p.host.sampling_s},
               {"euler_s", p.host.euler_s},
               {"launch_s", p.host.launch_s}};
  if (p.host.sampling_copying_s) j["host"]["sampling_copying_s"] = *p.host.sampling_copying_s;
  if (p.host.euler_copying_s) j["host"]["euler_copying_s"] = *p.host.euler_copying_s;
  if (p.host.inputs_s) j["host"]["inputs_s"] = *p.host.inputs_s;
  if (std::any_of(p.host.stage_entry_s.begin(), p.host.stage_entry_s.end(),
                  [](const auto& t) { return t.has_value(); })) {
    j["host"]["stage_entry_s"] = phase_times_json(p.host.stage_entry_s, nullptr);
  }
  if (p.workload) {
    const ProfileWorkload& w = *p.workload;
    j["workload"] = {{"num_images", w.num_images},   {"image_height", w.image_height},
                     {"image_width", w.image_width}, {"prompt_tokens", w.prompt_tokens},
                     {"gen_tokens", w.gen_tokens},   {"flow_steps", w.flow_steps}};
  }
  auto groups = ojson::array();
  for (const GroupProfile& g : p.groups) {
    ojson e;
    e["name"] = g.name;
    e["bytes"] = g.bytes;
    e["dma_s"] = g.dma_s;
    e["exe_s"] = phase_times_json(g.exe_s, nullptr);
    for (auto [key, times] : optional_times(g)) {
      ojson t = phase_times_json(*times, &g.exe_s);
      if (!t.empty()) e[key] = std::move(t);
    }
    groups.push_back(std::move(e));
  }
  j["groups"] = std::move(groups);
  return j.dump(2) + "\n";
}

Result<Profile> parse_profile(std::string_view text) {
  FERRY_ASSIGN_OR_RETURN(json j, strict_json::parse(text, 8, "profile", "file"));
  FERRY_RETURN_IF_ERROR(check_keys(
      j, "the file", {"format", "version", "source", "device", "link", "compute", "host", "groups"},
      {"runs", "workload"}));
  if (j["format"] != "ferry-profile") return bad("\"format\" must be \"ferry-profile\"");
  if (!j["version"].is_number_integer() || j["version"] < 1 || j["version"] > 3) {
    return bad("\"version\" must be 1, 2 or 3 (the versions this ferry reads)");
  }
  const int64_t version = j["version"].get<int64_t>();
  Profile p;
  FERRY_ASSIGN_OR_RETURN(p.source, read_string(j["source"], "source", false));
  if (p.source != "measured" && p.source != "estimated") {
    return bad("\"source\" must be \"measured\" or \"estimated\", not " +
               strict_json::quote(p.source));
  }
  FERRY_ASSIGN_OR_RETURN(p.device, read_string(j["device"], "device", true));
  if (j.contains("runs")) {
    FERRY_ASSIGN_OR_RETURN(p.runs, read_count(j["runs"], "runs", 1000000));
    if (p.runs < 1) return bad("\"runs\" must be at least 1");
  }

  const json& link = j["link"];
  FERRY_RETURN_IF_ERROR(check_keys(link, "\"link\"", {"byte_path", "h2d_peak_bytes_per_s"}, {}));
  FERRY_ASSIGN_OR_RETURN(p.byte_path, read_string(link["byte_path"], "link.byte_path", false));
  FERRY_ASSIGN_OR_RETURN(
      p.link_bytes_per_s,
      read_number(link["h2d_peak_bytes_per_s"], "link.h2d_peak_bytes_per_s", 1, kMaxLinkRate));
  const json& compute = j["compute"];
  FERRY_RETURN_IF_ERROR(
      check_keys(compute, "\"compute\"", {"peak_flops", "memory_bandwidth_bytes_per_s"}, {}));
  FERRY_ASSIGN_OR_RETURN(p.peak_flops,
                         read_number(compute["peak_flops"], "compute.peak_flops", 0, kMaxFlops));
  FERRY_ASSIGN_OR_RETURN(p.memory_bandwidth,
                         read_number(compute["memory_bandwidth_bytes_per_s"],
                                     "compute.memory_bandwidth_bytes_per_s", 0, kMaxLinkRate));
  FERRY_ASSIGN_OR_RETURN(p.host, read_host(j["host"]));
  if (j.contains("workload")) {
    FERRY_ASSIGN_OR_RETURN(ProfileWorkload w, read_workload(j["workload"]));
    p.workload = w;
  }

  const json& groups = j["groups"];
  if (!groups.is_array()) return bad("\"groups\" must be a list");
  if (groups.size() > kMaxProfileGroups) {
    return bad("more than " + std::to_string(kMaxProfileGroups) + " groups");
  }
  for (size_t i = 0; i < groups.size(); ++i) {
    FERRY_ASSIGN_OR_RETURN(GroupProfile g, read_group(groups[i], i, version));
    if (p.find(g.name) != nullptr) return bad("group " + g.name + " is listed twice");
    p.groups.push_back(std::move(g));
  }
  return p;
}

Status check_profile(const Profile& p, const ModelWeights& weights,
                     const std::vector<Call>& calls) {
  auto mismatch = [](const std::string& m) {
    return make_error(ErrorCode::invalid_argument,
                      "profile: " + m + " (a profile of another model? run `ferry profile` again)");
  };
  if (p.groups.size() != weights.groups.size()) {
    return mismatch("it has " + std::to_string(p.groups.size()) + " groups; the model has " +
                    std::to_string(weights.groups.size()));
  }
  for (size_t i = 0; i < weights.groups.size(); ++i) {
    const WeightGroup& w = weights.groups[i];
    const GroupProfile& g = p.groups[i];
    if (g.name != w.name) {
      return mismatch("group " + std::to_string(i) + " is " + strict_json::quote(g.name) +
                      "; the model's is " + w.name);
    }
    if (g.bytes != w.bytes) {
      return mismatch("group " + w.name + " has " + std::to_string(g.bytes) +
                      " bytes; the model's has " + std::to_string(w.bytes));
    }
  }
  for (const Call& c : calls) {
    if (c.group < 0 || static_cast<size_t>(c.group) >= p.groups.size()) {
      return make_error(ErrorCode::internal, "profile: a call names group " +
                                                 std::to_string(c.group) + ", out of range");
    }
    const GroupProfile& g = p.groups[static_cast<size_t>(c.group)];
    if (!g.exe_s[phase_index(c.phase)]) {
      return make_error(ErrorCode::invalid_argument,
                        "profile: group " + g.name + " has no " + phase_name(c.phase) +
                            " time, and this workload calls it there (profile the same workload)");
    }
  }
  return {};
}

ProfileWorkload profile_workload(const Workload& w) {
  return ProfileWorkload{w.num_images,    w.image_height, w.image_width,
                         w.prompt_tokens, w.gen_tokens,   w.flow_steps};
}

Profile profile_skeleton(const ModelWeights& weights, const MachineRates& rates,
                         std::string source) {
  Profile p;
  p.source = std::move(source);
  p.device = rates.device;
  p.byte_path = rates.byte_path;
  p.link_bytes_per_s = rates.link_bytes_per_s;
  p.peak_flops = rates.peak_flops;
  p.memory_bandwidth = rates.memory_bandwidth;
  p.decode_bytes_per_s = rates.decode_bytes_per_s;
  p.host = rates.host;
  p.groups.resize(weights.groups.size());
  for (size_t i = 0; i < weights.groups.size(); ++i) {
    p.groups[i].name = weights.groups[i].name;
    p.groups[i].bytes = weights.groups[i].bytes;
  }
  return p;
}

Result<Profile> estimate_profile(const ModelConfig& config, const ModelWeights& weights,
                                 const std::vector<Call>& calls, const CostContext& ctx,
                                 const MachineRates& rates) {
  auto positive = [](double v) { return std::isfinite(v) && v > 0; };
  if (!positive(rates.link_bytes_per_s) || !positive(rates.peak_flops) ||
      !positive(rates.memory_bandwidth)) {
    return make_error(ErrorCode::invalid_argument,
                      "estimate_profile: the link rate, compute peak and memory bandwidth must "
                      "all be positive");
  }
  Profile p = profile_skeleton(weights, rates, "estimated");
  // The images' pixels, in bf16, cross the link before the first call (HostCosts::inputs_s).
  if (const Qwen3VLConfig* vlm = config.vlm(); vlm != nullptr && ctx.image_patches > 0) {
    const double pixel_bytes = static_cast<double>(ctx.image_patches) *
                               static_cast<double>(vlm->vision.patch_values()) * 2.0;
    p.host.inputs_s = pixel_bytes / rates.link_bytes_per_s;
  }
  for (size_t i = 0; i < weights.groups.size(); ++i) {
    p.groups[i].dma_s = static_cast<double>(weights.groups[i].bytes) / rates.link_bytes_per_s;
  }
  const std::vector<CallCost> costs = call_costs(config, weights, calls, ctx);
  // Sum and count per (group, phase), then the mean.
  std::vector<std::array<double, kPhaseCount>> sum(weights.groups.size());
  std::vector<std::array<int64_t, kPhaseCount>> count(weights.groups.size());
  for (size_t i = 0; i < calls.size() && i < costs.size(); ++i) {
    const size_t g = static_cast<size_t>(calls[i].group);
    const size_t ph = phase_index(calls[i].phase);
    double t = costs[i].floor_seconds(rates.peak_flops, rates.memory_bandwidth);
    if (host_placement_allowed(weights.groups[g])) {
      t += costs[i].weight_bytes / rates.link_bytes_per_s;  // the rows come over the link
    }
    sum[g][ph] += t;
    ++count[g][ph];
  }
  for (size_t g = 0; g < weights.groups.size(); ++g) {
    for (size_t ph = 0; ph < kPhaseCount; ++ph) {
      if (count[g][ph] > 0) {
        p.groups[g].exe_s[ph] = sum[g][ph] / static_cast<double>(count[g][ph]);
      }
    }
  }
  return p;
}

}  // namespace ferry
