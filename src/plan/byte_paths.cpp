#include "plan/byte_paths.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <numeric>

#include "format/strict_json.h"

namespace ferry {

const char* byte_path_name(BytePath p) {
  switch (p) {
    case BytePath::map:
      return "map";
    case BytePath::resident:
      return "resident";
    case BytePath::stream:
      return "stream";
    case BytePath::per_use_copy:
      return "per_use_copy";
  }
  return "?";
}

std::string byte_path_rates_to_json(const BytePathRates& r) {
  nlohmann::ordered_json j;
  j["format"] = "ferry-byte-paths";
  j["version"] = 1;
  j["device"] = r.device;
  j["host_path"] = r.host_path;
  j["working_set_bytes"] = r.working_set_bytes;
  nlohmann::ordered_json rates = nlohmann::ordered_json::object();
  for (BytePath p : kBytePaths) {
    const PathRate& pr = r.of(p);
    rates[byte_path_name(p)] = {
        {"bytes_per_s", pr.bytes_per_s ? nlohmann::ordered_json(*pr.bytes_per_s) : nullptr},
        {"bytes", pr.bytes},
        {"passes", pr.passes},
        {"note", pr.note}};
  }
  j["rates"] = rates;
  return j.dump(2) + "\n";
}

Result<BytePathRates> byte_path_rates_from_json(std::string_view text) {
  FERRY_ASSIGN_OR_RETURN(nlohmann::json j, strict_json::parse(text, 4, "byte-path rates", "file"));
  auto bad = [](const std::string& m) {
    return make_error(ErrorCode::format, "byte-path rates: " + m);
  };
  if (!j.is_object()) return bad("not a JSON object");
  if (!j.contains("format") || j["format"] != "ferry-byte-paths") {
    return bad("\"format\" must be \"ferry-byte-paths\"");
  }
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"] != 1) {
    return bad("\"version\" must be 1");
  }
  BytePathRates r;
  for (const char* key : {"device", "host_path"}) {
    if (!j.contains(key) || !j[key].is_string()) return bad(std::string("\"") + key + "\" missing");
  }
  r.device = j["device"].get<std::string>();
  r.host_path = j["host_path"].get<std::string>();
  if (!j.contains("working_set_bytes") || !j["working_set_bytes"].is_number_unsigned()) {
    return bad("\"working_set_bytes\" must be a non-negative integer");
  }
  r.working_set_bytes = j["working_set_bytes"].get<uint64_t>();
  if (!j.contains("rates") || !j["rates"].is_object()) return bad("\"rates\" must be an object");
  const auto& rates = j["rates"];
  for (auto it = rates.begin(); it != rates.end(); ++it) {
    bool known = false;
    for (BytePath p : kBytePaths) known = known || it.key() == byte_path_name(p);
    if (!known) return bad("unknown path " + strict_json::quote(it.key()));
  }
  for (BytePath p : kBytePaths) {
    const std::string name = byte_path_name(p);
    if (!rates.contains(name)) return bad("path " + name + " is missing");
    const auto& e = rates[name];
    if (!e.is_object() || !e.contains("bytes_per_s") || !e.contains("bytes") ||
        !e.contains("passes") || !e.contains("note") || e.size() != 4) {
      return bad(name + ": needs exactly bytes_per_s, bytes, passes, note");
    }
    PathRate& pr = r.of(p);
    if (!e["bytes_per_s"].is_null()) {
      if (!e["bytes_per_s"].is_number()) return bad(name + ": bytes_per_s is not a number");
      const double v = e["bytes_per_s"].get<double>();
      if (!std::isfinite(v) || v <= 0) return bad(name + ": bytes_per_s must be positive");
      pr.bytes_per_s = v;
    }
    if (!e["bytes"].is_number_unsigned() || !e["passes"].is_number_unsigned() ||
        !e["note"].is_string()) {
      return bad(name + ": bytes and passes are non-negative integers, note a string");
    }
    if (e["passes"].get<uint64_t>() > 1'000'000) return bad(name + ": passes out of range");
    pr.bytes = e["bytes"].get<uint64_t>();
    pr.passes = static_cast<int>(e["passes"].get<uint64_t>());
    pr.note = e["note"].get<std::string>();
  }
  return r;
}

namespace {

std::string rate_text(double bytes_per_s) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f GB/s", bytes_per_s / 1e9);
  return b;
}

}  // namespace

GroupPathVerdict choose_byte_path(const BytePathRates& rates, const GroupPathInput& g,
                                  double tie_band) {
  GroupPathVerdict v;
  v.group = g.name;
  if (g.cached_fraction < kCachedEnough) {
    char pct[16];
    std::snprintf(pct, sizeof pct, "%.1f%%", g.cached_fraction * 100);
    v.storage_bound = true;
    v.reason = std::string("storage-bound: ") + pct +
               " of its pages were in the page cache; every path reads it at the storage's rate "
               "until the working set is cached";
    return v;
  }
  const double work =
      static_cast<double>(g.bytes) * static_cast<double>(std::max<int64_t>(g.uses, 1));
  std::string excluded;
  for (BytePath p : kBytePaths) {
    const PathRate& pr = rates.of(p);
    if (!pr.bytes_per_s) continue;
    if (p == BytePath::resident && !g.resident_fits) {
      excluded = "resident excluded: " + g.fit_reason;
      continue;
    }
    v.seconds[static_cast<size_t>(p)] = work / *pr.bytes_per_s;
  }
  std::optional<BytePath> best;
  for (BytePath p : kBytePaths) {
    const auto& t = v.seconds[static_cast<size_t>(p)];
    if (t && (!best || *t < *v.seconds[static_cast<size_t>(*best)])) best = p;
  }
  if (!best) {
    v.reason = "no path was measured";
    if (!excluded.empty()) v.reason += "; " + excluded;
    return v;
  }
  const double fastest = *v.seconds[static_cast<size_t>(*best)];
  const auto& map = v.seconds[static_cast<size_t>(BytePath::map)];
  if (*best != BytePath::map && map && *map <= fastest * (1.0 + tie_band)) {
    char pct[16];
    std::snprintf(pct, sizeof pct, "%.1f%%", (*map / fastest - 1.0) * 100);
    v.path = BytePath::map;
    v.reason = std::string("map is within the tie band of ") + byte_path_name(*best) + " (" + pct +
               " slower): one evictable representation, no second copy";
  } else {
    v.path = best;
    v.reason = std::string("fastest: ") + rate_text(*rates.of(*best).bytes_per_s);
    if (*best != BytePath::map && map) {
      char pct[16];
      std::snprintf(pct, sizeof pct, "%.0f%%", (*map / fastest - 1.0) * 100);
      v.reason += std::string("; map ") + pct + " slower, outside the tie band";
    } else if (!map) {
      v.reason += "; map not measured (" + rates.of(BytePath::map).note + ")";
    }
  }
  if (!excluded.empty()) v.reason += "; " + excluded;
  return v;
}

void gate_resident(std::vector<GroupPathInput>& groups, uint64_t room) {
  std::vector<size_t> order(groups.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (groups[a].uses != groups[b].uses) return groups[a].uses > groups[b].uses;
    return groups[a].bytes < groups[b].bytes;
  });
  uint64_t used = 0;
  for (size_t i : order) {
    GroupPathInput& g = groups[i];
    if (g.bytes <= room && used <= room - g.bytes) {
      used += g.bytes;
      g.resident_fits = true;
      g.fit_reason.clear();
    } else {
      g.resident_fits = false;
      g.fit_reason = "does not fit beside everything else (" + std::to_string(room - used) +
                     " of " + std::to_string(room) + " bytes of resident room left after the " +
                     "groups used more often)";
    }
  }
}

}  // namespace ferry
