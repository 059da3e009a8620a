#include "cli/timeline_json.h"

#include <utility>

namespace ferry {

nlohmann::ordered_json timeline_json(const StreamTimeline& t, const ModelWeights& weights) {
  nlohmann::ordered_json j;
  j["inputs_end"] = t.inputs_end;
  nlohmann::ordered_json calls = nlohmann::ordered_json::array();
  for (size_t i = 0; i < t.calls.size() && i < t.compute.size(); ++i) {
    const Call& c = t.calls[i];
    nlohmann::ordered_json e;
    e["phase"] = phase_name(c.phase);
    e["step"] = c.step;
    const auto g = static_cast<size_t>(c.group);
    e["group"] = g < weights.groups.size() ? weights.groups[g].name : std::string("?");
    e["start"] = t.compute[i].start;
    e["end"] = t.compute[i].end;
    const int64_t k = i < t.copy_of.size() ? t.copy_of[i] : -1;
    if (k >= 0 && static_cast<size_t>(k) < t.copies.size()) {
      const auto u = static_cast<size_t>(k);
      e["copy_start"] = t.copies[u].start;
      e["copy_end"] = t.copies[u].end;
      if (u < t.copy_bytes.size()) e["copy_bytes"] = t.copy_bytes[u];
    }
    calls.push_back(std::move(e));
  }
  j["calls"] = std::move(calls);
  return j;
}

}  // namespace ferry
