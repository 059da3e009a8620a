// model.safetensors.index.json: which shard file holds each tensor.
#include <set>
#include <string>

#include "format/safetensors.h"
#include "format/strict_json.h"

namespace ferry {
namespace {

using json = nlohmann::json;
using strict_json::quote;

constexpr std::string_view kShardSuffix = ".safetensors";

// Shard names come from the file and are joined to the checkpoint folder: they must name a
// plain file inside it.
std::string shard_name_problem(const std::string& s) {
  if (s.empty()) return "is empty";
  if (s.find('\0') != std::string::npos) return "contains a NUL byte";
  if (s.find('/') != std::string::npos || s.find('\\') != std::string::npos)
    return "contains a path separator (shards must be in the checkpoint folder)";
  if (s == "." || s == "..") return "is not a file name";
  if (s.size() <= kShardSuffix.size() ||
      s.compare(s.size() - kShardSuffix.size(), kShardSuffix.size(), kShardSuffix) != 0)
    return "does not end in .safetensors";
  return {};
}

std::string scalar_string(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

}  // namespace

Result<SafetensorsIndex> parse_safetensors_index(std::string_view json_text,
                                                 std::string_view label) {
  auto err = [&](const std::string& msg) {
    return make_error(ErrorCode::format, std::string(label) + ": " + msg);
  };
  FERRY_ASSIGN_OR_RETURN(json root, strict_json::parse(json_text, 3, label, "index"));
  if (!root.is_object()) return err("index is not a JSON object");
  for (const auto& [k, v] : root.items()) {
    (void)v;
    if (k != "metadata" && k != "weight_map")
      return err("unknown key " + quote(k) + " (expected only metadata, weight_map)");
  }
  SafetensorsIndex index;
  if (root.contains("metadata")) {
    const json& md = root["metadata"];
    if (!md.is_object()) return err("metadata is not an object");
    for (const auto& [k, v] : md.items()) {
      if (v.is_object() || v.is_array())
        return err("metadata: value of " + quote(k) + " is not a scalar");
      index.metadata.emplace(k, scalar_string(v));
    }
  }
  if (!root.contains("weight_map")) return err("missing 'weight_map'");
  const json& wm = root["weight_map"];
  if (!wm.is_object()) return err("weight_map is not an object");
  if (wm.empty()) return err("weight_map is empty");
  std::set<std::string> shards;
  for (const auto& [name, shard] : wm.items()) {
    if (name.empty()) return err("weight_map: empty tensor name");
    if (name.find('\0') != std::string::npos)
      return err("weight_map: tensor " + quote(name) + ": name contains a NUL byte");
    if (!shard.is_string())
      return err("weight_map: tensor " + quote(name) + ": shard is not a string");
    const auto& s = shard.get_ref<const std::string&>();
    if (auto problem = shard_name_problem(s); !problem.empty())
      return err("weight_map: tensor " + quote(name) + ": shard name " + quote(s) + " " + problem);
    index.weight_map.emplace(name, s);
    shards.insert(s);
  }
  index.shards.assign(shards.begin(), shards.end());
  return index;
}

}  // namespace ferry
