#include "plan/plan.h"

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "format/strict_json.h"

namespace ferry {

const char* placement_name(Placement p) {
  switch (p) {
    case Placement::resident:
      return "resident";
    case Placement::streamed:
      return "streamed";
    case Placement::host:
      return "host";
  }
  return "?";
}

const char* stream_mode_name(StreamMode m) {
  return m == StreamMode::sequential ? "sequential" : "pipelined";
}

const char* form_name(Form f) {
  return f == Form::compressed ? "compressed" : "raw";
}

bool host_placement_allowed(const WeightGroup& group) {
  return group.kind == GroupKind::embedding;
}

namespace {

template <class Pred>
uint64_t sum_bytes(const Plan& plan, const ModelWeights& weights, Pred pred) {
  uint64_t total = 0;
  const size_t n = std::min(plan.placement.size(), weights.groups.size());
  for (size_t i = 0; i < n; ++i) {
    if (pred(plan.placement[i])) total += weights.groups[i].bytes;
  }
  return total;
}

Error bad_plan(const std::string& msg) {
  return make_error(ErrorCode::invalid_argument, "plan: " + msg);
}

std::string some_group_names(const ModelWeights& weights) {
  std::string s;
  const size_t n = weights.groups.size();
  const size_t show = std::min<size_t>(n, 4);
  for (size_t i = 0; i < show; ++i) s += (i ? ", " : "") + weights.groups[i].name;
  if (n > show) s += ", ..., " + weights.groups.back().name;
  return s;
}

// The groups a name selects: the group of that name, or, for a decoder layer's name
// ("text.layers.3"), its part groups. Empty when there is none.
std::vector<size_t> groups_named(const ModelWeights& weights, const std::string& name) {
  std::vector<size_t> out;
  for (size_t i = 0; i < weights.groups.size(); ++i) {
    if (weights.groups[i].name == name) return {i};
  }
  for (size_t i = 0; i < weights.groups.size(); ++i) {
    const WeightGroup& g = weights.groups[i];
    if (g.part != LayerPart::whole && layer_of_group_name(g.name) == name) out.push_back(i);
  }
  return out;
}

}  // namespace

bool ring_group(const Plan& plan, size_t g) {
  if (g >= plan.placement.size()) return false;
  return plan.placement[g] == Placement::streamed ||
         (plan.placement[g] == Placement::resident && decoded_group(plan, g));
}

uint64_t resident_bytes(const Plan& plan, const ModelWeights& weights, CompressedSizes compressed) {
  uint64_t total = 0;
  const size_t n = std::min(plan.placement.size(), weights.groups.size());
  for (size_t i = 0; i < n; ++i) {
    if (plan.placement[i] != Placement::resident) continue;
    const bool packed = decoded_group(plan, i) && i < compressed.size() && compressed[i] > 0;
    // The arena hands out kGroupAlignment units: a compressed size takes its rounded bytes.
    total += packed ? align_group_bytes(compressed[i]) : weights.groups[i].bytes;
  }
  return total;
}

uint64_t host_bytes(const Plan& plan, const ModelWeights& weights) {
  return sum_bytes(plan, weights, [](Placement p) { return p == Placement::host; });
}

uint64_t streamed_bytes(const Plan& plan, const ModelWeights& weights) {
  return sum_bytes(plan, weights, [](Placement p) { return p == Placement::streamed; });
}

uint64_t largest_streamed_group(const Plan& plan, const ModelWeights& weights) {
  uint64_t largest = 0;
  const size_t n = std::min(plan.placement.size(), weights.groups.size());
  for (size_t i = 0; i < n; ++i) {
    if (ring_group(plan, i)) largest = std::max(largest, weights.groups[i].bytes);
  }
  return largest;
}

uint64_t largest_staged_group(const Plan& plan, CompressedSizes compressed) {
  uint64_t largest = 0;
  const size_t n = std::min(plan.placement.size(), compressed.size());
  for (size_t i = 0; i < n; ++i) {
    if (plan.placement[i] == Placement::streamed && decoded_group(plan, i)) {
      largest = std::max(largest, compressed[i]);
    }
  }
  return largest;
}

uint64_t plan_weight_device_bytes(const Plan& plan, const ModelWeights& weights,
                                  CompressedSizes compressed) {
  return resident_bytes(plan, weights, compressed) +
         static_cast<uint64_t>(plan.slots) * plan.slot_bytes +
         static_cast<uint64_t>(plan.staging) * plan.staging_bytes;
}

namespace {

// Forms and staging buffers. `compressed` null: the forms' structure only (a plan file read
// before the model's compressed groups are known); else compressed forms only where it has one.
Status validate_forms(const Plan& plan, const ModelWeights& weights,
                      const CompressedSizes* compressed) {
  if (!plan.form.empty() && plan.form.size() != weights.groups.size()) {
    return bad_plan(std::to_string(plan.form.size()) + " forms for a model of " +
                    std::to_string(weights.groups.size()) + " weight groups");
  }
  bool staged = false;
  for (size_t g = 0; g < plan.form.size(); ++g) {
    if (plan.form[g] != Form::compressed) continue;
    const WeightGroup& group = weights.groups[g];
    if (plan.placement[g] == Placement::host) {
      return bad_plan("group " + group.name +
                      " is on the host and compressed (kernels read only raw groups in place)");
    }
    if (compressed != nullptr && (g >= compressed->size() || (*compressed)[g] == 0)) {
      return bad_plan("group " + group.name +
                      " is compressed in the plan, but the model has no compressed form of it");
    }
    staged = staged || plan.placement[g] == Placement::streamed;
  }
  if (!staged) {
    if (plan.staging != 0 || plan.staging_bytes != 0) {
      return bad_plan("no compressed group is streamed, so there must be no staging buffers");
    }
    return {};
  }
  if (plan.mode == StreamMode::sequential && plan.staging != 1) {
    return bad_plan("sequential mode stages compressed copies in exactly one buffer, not " +
                    std::to_string(plan.staging));
  }
  if (plan.mode == StreamMode::pipelined && (plan.staging < 1 || plan.staging > 64)) {
    return bad_plan("pipelined mode needs 1 to 64 staging buffers, not " +
                    std::to_string(plan.staging));
  }
  if (plan.staging_bytes % kGroupAlignment != 0) {
    return bad_plan("staging buffer size must be a multiple of " + std::to_string(kGroupAlignment));
  }
  if (compressed != nullptr) {
    const uint64_t largest = largest_staged_group(plan, *compressed);
    if (plan.staging_bytes < largest) {
      return bad_plan("staging buffers of " + std::to_string(plan.staging_bytes) +
                      " bytes cannot hold the largest streamed compressed group (" +
                      std::to_string(largest) + " bytes)");
    }
  } else if (plan.staging_bytes == 0) {
    return bad_plan("staging buffers of 0 bytes");
  }
  return {};
}

Status validate(const Plan& plan, const ModelWeights& weights, const CompressedSizes* compressed) {
  if (plan.placement.size() != weights.groups.size()) {
    return bad_plan(std::to_string(plan.placement.size()) + " placements for a model of " +
                    std::to_string(weights.groups.size()) + " weight groups");
  }
  FERRY_RETURN_IF_ERROR(validate_forms(plan, weights, compressed));
  const uint64_t largest = largest_streamed_group(plan, weights);
  if (largest == 0) {
    if (plan.slots != 0 || plan.slot_bytes != 0) {
      return bad_plan("no group is streamed or decoded, so there must be no slots");
    }
    return {};
  }
  if (plan.mode == StreamMode::sequential && plan.slots != 1) {
    return bad_plan("sequential mode streams through exactly one slot, not " +
                    std::to_string(plan.slots));
  }
  if (plan.mode == StreamMode::pipelined && (plan.slots < 2 || plan.slots > 64)) {
    return bad_plan("pipelined mode needs 2 to 64 slots, not " + std::to_string(plan.slots));
  }
  if (plan.slot_bytes < largest) {
    return bad_plan("slots of " + std::to_string(plan.slot_bytes) +
                    " bytes cannot hold the largest streamed or decoded group (" +
                    std::to_string(largest) + " bytes)");
  }
  if (plan.slot_bytes % kGroupAlignment != 0) {
    return bad_plan("slot size must be a multiple of " + std::to_string(kGroupAlignment));
  }
  int previous = -1;
  for (const CacheEntry& e : plan.cached) {
    if (e.group <= previous || static_cast<size_t>(e.group) >= weights.groups.size()) {
      return bad_plan("cache entries must name groups of the model once each, in group order");
    }
    previous = e.group;
    const WeightGroup& g = weights.groups[static_cast<size_t>(e.group)];
    if (plan.placement[static_cast<size_t>(e.group)] != Placement::streamed) {
      return bad_plan("group " + g.name + " is cached in the lent region but not streamed");
    }
    if (decoded_group(plan, static_cast<size_t>(e.group))) {
      return bad_plan("group " + g.name + " is cached in the lent region but compressed");
    }
    if (e.offset % kGroupAlignment != 0) {
      return bad_plan("group " + g.name + ": lent offset " + std::to_string(e.offset) +
                      " is not a multiple of " + std::to_string(kGroupAlignment));
    }
    if (e.offset > (uint64_t{1} << 50)) {  // far past any device: keeps offset + bytes exact
      return bad_plan("group " + g.name + ": lent offset " + std::to_string(e.offset) +
                      " is out of range");
    }
  }
  return {};
}

}  // namespace

Status validate_plan(const Plan& plan, const ModelWeights& weights, CompressedSizes compressed) {
  return validate(plan, weights, &compressed);
}

Plan all_resident_plan(const ModelWeights& weights) {
  Plan p;
  p.placement.assign(weights.groups.size(), Placement::resident);
  p.slots = 0;
  p.slot_bytes = 0;
  return p;
}

std::vector<int> interleaved_layers(int k, int n) {
  std::vector<int> out;
  if (n <= 0 || k <= 0) return out;
  if (k >= n) {
    for (int i = 0; i < n; ++i) out.push_back(i);
    return out;
  }
  for (int i = 0; i < k; ++i) {
    out.push_back(static_cast<int>(static_cast<int64_t>(i) * (n - 1) / k));
  }
  return out;
}

namespace {

// Fills slots and slot_bytes for the placements already set.
void size_slots(Plan& p, const ModelWeights& weights, int slots) {
  const uint64_t largest = largest_streamed_group(p, weights);
  if (largest == 0) {
    p.slots = 0;
    p.slot_bytes = 0;
    return;
  }
  p.slots = p.mode == StreamMode::sequential ? 1 : slots;
  p.slot_bytes = align_group_bytes(largest);
}

}  // namespace

Result<Plan> plan_with_resident(const ModelWeights& weights, const std::vector<std::string>& names,
                                StreamMode mode, int slots) {
  Plan p;
  p.mode = mode;
  p.placement.assign(weights.groups.size(), Placement::streamed);
  for (size_t i = 0; i < weights.groups.size(); ++i) {
    if (host_placement_allowed(weights.groups[i])) p.placement[i] = Placement::host;
  }
  std::set<std::string> seen;
  for (const std::string& name : names) {
    if (!seen.insert(name).second) return bad_plan("group " + name + " is named twice");
    const std::vector<size_t> selected = groups_named(weights, name);
    for (size_t i : selected) {
      if (p.placement[i] == Placement::resident) {
        return bad_plan("group " + weights.groups[i].name + " is named twice");
      }
      p.placement[i] = Placement::resident;
    }
    if (selected.empty()) {
      return bad_plan("the model has no weight group '" + name + "' (its groups: " +
                      some_group_names(weights) + "; `ferry inspect` lists them all)");
    }
  }
  size_slots(p, weights, slots);
  FERRY_RETURN_IF_ERROR(validate_plan(p, weights));
  return p;
}

Result<Plan> with_mapped(Plan plan, const ModelWeights& weights,
                         const std::vector<std::string>& names) {
  FERRY_RETURN_IF_ERROR(validate_plan(plan, weights));
  std::set<std::string> seen;
  for (const std::string& name : names) {
    if (!seen.insert(name).second) return bad_plan("--map: group " + name + " is named twice");
    const std::vector<size_t> selected = groups_named(weights, name);
    if (selected.empty()) {
      return bad_plan("--map: the model has no weight group '" + name + "' (its groups: " +
                      some_group_names(weights) + "; `ferry inspect` lists them all)");
    }
    for (size_t i : selected) plan.placement[i] = Placement::host;
  }
  std::erase_if(plan.cached, [&](const CacheEntry& e) {
    return plan.placement[static_cast<size_t>(e.group)] != Placement::streamed;
  });
  const int slots = plan.slots > 0 ? plan.slots : (plan.mode == StreamMode::sequential ? 1 : 2);
  size_slots(plan, weights, slots);
  FERRY_RETURN_IF_ERROR(validate_plan(plan, weights));
  return plan;
}

Result<Plan> with_compressed(Plan plan, const ModelWeights& weights,
                             const std::vector<std::string>& names, CompressedSizes compressed,
                             int staging) {
  FERRY_RETURN_IF_ERROR(validate_plan(plan, weights, compressed));
  if (names.empty()) return plan;
  if (plan.form.empty()) plan.form.assign(weights.groups.size(), Form::raw);
  std::set<std::string> seen;
  for (const std::string& name : names) {
    if (!seen.insert(name).second) return bad_plan("compressed: group " + name + " is named twice");
    const std::vector<size_t> selected = groups_named(weights, name);
    if (selected.empty()) {
      return bad_plan("compressed: the model has no weight group '" + name + "' (its groups: " +
                      some_group_names(weights) + "; `ferry inspect` lists them all)");
    }
    for (size_t i : selected) plan.form[i] = Form::compressed;
  }
  std::erase_if(plan.cached, [&](const CacheEntry& e) {
    return plan.form[static_cast<size_t>(e.group)] == Form::compressed;
  });
  const uint64_t largest = largest_streamed_group(plan, weights);
  if (largest > 0) {
    if (plan.slots == 0) plan.slots = plan.mode == StreamMode::sequential ? 1 : 2;
    plan.slot_bytes = std::max(plan.slot_bytes, align_group_bytes(largest));
  }
  const uint64_t staged = largest_staged_group(plan, compressed);
  if (staged > 0) {
    plan.staging = plan.mode == StreamMode::sequential ? 1 : std::clamp(staging, 1, 64);
    plan.staging_bytes = align_group_bytes(staged);
  } else {
    plan.staging = 0;
    plan.staging_bytes = 0;
  }
  FERRY_RETURN_IF_ERROR(validate_plan(plan, weights, compressed));
  return plan;
}

std::string plan_to_json(const Plan& plan, const ModelWeights& weights) {
  nlohmann::ordered_json j;
  j["format"] = "ferry-plan";
  j["version"] = 1;
  j["mode"] = stream_mode_name(plan.mode);
  j["slots"] = plan.slots;
  j["slot_bytes"] = plan.slot_bytes;
  if (plan.staging > 0) {
    j["staging"] = plan.staging;
    j["staging_bytes"] = plan.staging_bytes;
  }
  auto groups = nlohmann::ordered_json::array();
  auto entry = plan.cached.begin();
  for (size_t i = 0; i < plan.placement.size() && i < weights.groups.size(); ++i) {
    nlohmann::ordered_json g;
    g["name"] = weights.groups[i].name;
    g["placement"] = placement_name(plan.placement[i]);
    g["bytes"] = weights.groups[i].bytes;
    if (form_of(plan, i) == Form::compressed) g["form"] = form_name(Form::compressed);
    if (entry != plan.cached.end() && entry->group == static_cast<int>(i)) {
      g["lent_offset"] = entry->offset;
      ++entry;
    }
    groups.push_back(std::move(g));
  }
  j["groups"] = std::move(groups);
  return j.dump(2) + "\n";
}

Result<Plan> plan_from_json(std::string_view text, const ModelWeights& weights) {
  FERRY_ASSIGN_OR_RETURN(nlohmann::json j, strict_json::parse(text, 8, "plan", "file"));
  auto bad = [](const std::string& m) { return make_error(ErrorCode::format, "plan file: " + m); };
  if (!j.is_object()) return bad("not a JSON object");
  if (!j.contains("format") || j["format"] != "ferry-plan") {
    return bad("\"format\" must be \"ferry-plan\"");
  }
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"] != 1) {
    return bad("\"version\" must be 1");
  }
  Plan p;
  if (!j.contains("mode") || !j["mode"].is_string()) return bad("\"mode\" is missing");
  const std::string mode = j["mode"].get<std::string>();
  if (mode == "pipelined") {
    p.mode = StreamMode::pipelined;
  } else if (mode == "sequential") {
    p.mode = StreamMode::sequential;
  } else {
    return bad("unknown mode " + strict_json::quote(mode));
  }
  if (!j.contains("slots") || !j["slots"].is_number_integer() || j["slots"] < 0 ||
      j["slots"] > 64) {
    return bad("\"slots\" must be an integer from 0 to 64");
  }
  p.slots = j["slots"].get<int>();
  if (!j.contains("slot_bytes") || !j["slot_bytes"].is_number_unsigned()) {
    return bad("\"slot_bytes\" must be a non-negative integer");
  }
  p.slot_bytes = j["slot_bytes"].get<uint64_t>();
  if (j.contains("staging")) {
    if (!j["staging"].is_number_integer() || j["staging"] < 0 || j["staging"] > 64) {
      return bad("\"staging\" must be an integer from 0 to 64");
    }
    p.staging = j["staging"].get<int>();
  }
  if (j.contains("staging_bytes")) {
    if (!j["staging_bytes"].is_number_unsigned()) {
      return bad("\"staging_bytes\" must be a non-negative integer");
    }
    p.staging_bytes = j["staging_bytes"].get<uint64_t>();
  }
  if (!j.contains("groups") || !j["groups"].is_array()) return bad("\"groups\" must be a list");
  const auto& groups = j["groups"];
  if (groups.size() != weights.groups.size()) {
    return bad("it lists " + std::to_string(groups.size()) + " groups; the model has " +
               std::to_string(weights.groups.size()) + " (a plan made for another model?)");
  }
  p.placement.resize(groups.size());
  for (size_t i = 0; i < groups.size(); ++i) {
    const auto& g = groups[i];
    if (!g.is_object() || !g.contains("name") || !g["name"].is_string() ||
        !g.contains("placement") || !g["placement"].is_string()) {
      return bad("group " + std::to_string(i) + " needs a \"name\" and a \"placement\"");
    }
    const std::string name = g["name"].get<std::string>();
    if (name != weights.groups[i].name) {
      return bad("group " + std::to_string(i) + " is " + strict_json::quote(name) +
                 "; the model's is " + weights.groups[i].name +
                 " (a plan made for another model?)");
    }
    const std::string where = g["placement"].get<std::string>();
    if (where == "resident") {
      p.placement[i] = Placement::resident;
    } else if (where == "streamed") {
      p.placement[i] = Placement::streamed;
    } else if (where == "host") {
      p.placement[i] = Placement::host;
    } else {
      return bad(name + ": unknown placement " + strict_json::quote(where));
    }
    if (g.contains("form")) {
      const std::string form = g["form"].is_string() ? g["form"].get<std::string>() : "";
      if (form != "raw" && form != "compressed") {
        return bad(name + ": \"form\" must be \"raw\" or \"compressed\"");
      }
      if (form == "compressed") {
        p.form.resize(groups.size(), Form::raw);
        p.form[i] = Form::compressed;
      }
    }
    if (g.contains("lent_offset")) {
      if (!g["lent_offset"].is_number_unsigned()) {
        return bad(name + ": \"lent_offset\" must be a non-negative integer");
      }
      p.cached.push_back({static_cast<int>(i), g["lent_offset"].get<uint64_t>()});
    }
  }
  FERRY_RETURN_IF_ERROR(validate(p, weights, nullptr));
  return p;
}

}  // namespace ferry
