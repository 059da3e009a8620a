#include "cli/inspect_report.h"

#include <charconv>
#include <climits>
#include <cstdio>
#include <map>
#include <optional>

#include <nlohmann/json.hpp>

#include "model/weights.h"

namespace ferry::cli {
namespace {

// Elements of a validated tensor: its byte span bounds the product, but a zero dimension
// anywhere makes it 0 before the others are multiplied (they may overflow on their own).
int64_t numel(const std::vector<int64_t>& shape) {
  for (int64_t d : shape) {
    if (d == 0) return 0;
  }
  int64_t n = 1;
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(n, d, &n)) return INT64_MAX;
  }
  return n;
}

// A group's layer index; nullopt when it does not fit (names are file content).
std::optional<uint64_t> parse_index(const std::string& s) {
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    parts.push_back(s.substr(start, dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return parts;
}

std::string join(const std::vector<std::string>& parts, size_t n) {
  std::string out;
  for (size_t i = 0; i < n && i < parts.size(); ++i) out += (i ? "." : "") + parts[i];
  return out;
}

// The module of a prefix group: the group name without its trailing layer index.
std::string prefix_module(const std::string& group) {
  auto parts = split(group);
  if (parts.size() > 1 && all_digits(parts.back())) parts.pop_back();
  return join(parts, parts.size());
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

void add_to_module(InspectReport& r, const std::string& module, int64_t params, uint64_t bytes) {
  for (auto& m : r.modules) {
    if (m.module == module) {
      m.params += params;
      m.bytes += bytes;
      return;
    }
  }
  r.modules.push_back({module, params, bytes});
}

// Consecutive groups of the same module whose names differ only in a trailing index and that
// have the same size print as one row: "text.layers.0-35".
struct Row {
  std::string name;
  size_t count = 0;
  size_t tensors = 0;
  int64_t params = 0;  // per group
  uint64_t bytes = 0;  // per group
};

// A row's unit: one group, or a decoder layer's consecutive part groups ("text.layers.3.attn",
// ".gate_up", ".down") as the layer "text.layers.3".
struct Unit {
  std::string name;
  size_t tensors = 0;
  int64_t params = 0;
  uint64_t bytes = 0;
};

std::vector<Unit> units_of(const InspectReport& r) {
  std::vector<Unit> units;
  std::string open_layer;  // the layer whose parts the last unit collects
  for (const auto& g : r.groups) {
    const std::string layer(layer_of_group_name(g.name));
    if (layer != g.name && !units.empty() && layer == open_layer) {
      Unit& u = units.back();
      u.tensors += g.tensors.size();
      u.params += g.params;
      u.bytes += g.bytes;
      continue;
    }
    units.push_back({layer, g.tensors.size(), g.params, g.bytes});
    open_layer = layer != g.name ? layer : "";
  }
  return units;
}

std::vector<Row> collapse(const InspectReport& r) {
  std::vector<Row> rows;
  std::string last_stem;
  std::string last_index;
  for (const Unit& g : units_of(r)) {
    auto parts = split(g.name);
    std::string index = parts.size() > 1 && all_digits(parts.back()) ? parts.back() : "";
    std::string stem = index.empty() ? g.name : join(parts, parts.size() - 1);
    if (!rows.empty() && !index.empty() && stem == last_stem && rows.back().params == g.params &&
        rows.back().bytes == g.bytes && rows.back().tensors == g.tensors && parse_index(index) &&
        parse_index(last_index) && *parse_index(index) == *parse_index(last_index) + 1) {
      Row& row = rows.back();
      row.count++;
      auto first = row.name.substr(stem.size() + 1);
      first = first.substr(0, first.find('-'));
      row.name = stem + "." + first + "-" + index;
    } else {
      rows.push_back({g.name, 1, g.tensors, g.params, g.bytes});
    }
    last_stem = stem;
    last_index = index;
  }
  return rows;
}

}  // namespace

std::string prefix_group(const std::string& tensor_name) {
  auto parts = split(tensor_name);
  for (size_t i = 0; i < parts.size(); ++i) {
    if (all_digits(parts[i])) return join(parts, i + 1);
  }
  if (parts.size() == 1) return parts[0];
  return join(parts, parts.size() - 1);
}

void group_report(InspectReport& r, const ModelConfig* config) {
  r.groups.clear();
  r.modules.clear();
  r.total_params = 0;
  r.total_bytes = 0;
  std::vector<bool> placed(r.tensors.size(), false);
  if (config != nullptr) {
    auto weights = describe_weights(*config);
    if (!weights.ok()) {
      r.note = "no table: " + weights.error().message;
    } else {
      r.architecture = architecture_name(config->arch);
      std::map<std::string, size_t> by_name;
      std::vector<TensorMeta> metas;
      for (size_t i = 0; i < r.tensors.size(); ++i) {
        by_name.emplace(r.tensors[i].name, i);
        metas.push_back({r.tensors[i].name, r.tensors[i].dtype, r.tensors[i].shape});
      }
      Status bound = bind_tensors(*weights, metas, "binding");
      r.binding = bound.ok() ? "ok" : bound.error().message.substr(std::string("binding: ").size());
      for (const auto& wg : weights->groups) {
        InspectGroup g{wg.name, group_module_name(wg.kind), 0, 0, {}};
        for (const auto& spec : wg.tensors) {
          auto it = by_name.find(spec.checkpoint_name);
          if (it == by_name.end() || placed[it->second]) continue;  // missing, or tied
          placed[it->second] = true;
          g.tensors.push_back(it->second);
        }
        if (!g.tensors.empty()) r.groups.push_back(std::move(g));
      }
    }
  }
  // Everything the table did not take, by prefix, in checkpoint order.
  std::map<std::string, size_t> prefix_index;
  for (size_t i = 0; i < r.tensors.size(); ++i) {
    if (placed[i]) continue;
    const InspectTensor& t = r.tensors[i];
    // `ferry pack`'s gap fillers, all in one group.
    std::string name = is_pack_padding(t.name, t.dtype, t.shape.size()) ? std::string("ferry.pad")
                                                                        : prefix_group(t.name);
    auto [it, fresh] = prefix_index.emplace(name, r.groups.size());
    if (fresh) r.groups.push_back(InspectGroup{name, prefix_module(name), 0, 0, {}});
    r.groups[it->second].tensors.push_back(i);
  }
  for (auto& g : r.groups) {
    for (size_t i : g.tensors) {
      g.params += numel(r.tensors[i].shape);
      g.bytes += r.tensors[i].bytes;
    }
    add_to_module(r, g.module, g.params, g.bytes);
    r.total_params += g.params;
    r.total_bytes += g.bytes;
  }
}

std::string format_text(const InspectReport& r, bool list_tensors) {
  std::string out;
  out += "checkpoint: " + r.path + " (" + std::to_string(r.files) +
         (r.files == 1 ? " file, " : " files, ") + std::to_string(r.tensors.size()) + " tensors, " +
         human_bytes(r.total_bytes) + ")\n";
  if (!r.architecture.empty()) {
    out += "architecture: " + r.architecture + " (grouped by its weight table)\n";
    out += "binding: " + r.binding + "\n";
  } else {
    out += "architecture: none recognised (" + r.note + "); grouped by name prefix\n";
  }
  char line[256];
  out += "\n";
  std::snprintf(line, sizeof line, "%-44s %8s %10s %12s\n", "group", "tensors", "params", "bytes");
  out += line;
  for (const Row& row : collapse(r)) {
    std::string params = human_params(row.params);
    std::string bytes = human_bytes(row.bytes);
    if (row.count > 1) {
      params += " x" + std::to_string(row.count);
      bytes += " x" + std::to_string(row.count);
    }
    std::snprintf(line, sizeof line, "%-44s %8zu %10s %12s\n", row.name.c_str(), row.tensors,
                  params.c_str(), bytes.c_str());
    out += line;
  }
  out += "\nmodules:\n";
  for (const auto& m : r.modules) {
    std::snprintf(line, sizeof line, "  %-24s %s params, %s\n", m.module.c_str(),
                  human_params(m.params).c_str(), human_bytes(m.bytes).c_str());
    out += line;
  }
  std::snprintf(line, sizeof line, "total: %s params (%lld), %s (%llu bytes)\n",
                human_params(r.total_params).c_str(), static_cast<long long>(r.total_params),
                human_bytes(r.total_bytes).c_str(), static_cast<unsigned long long>(r.total_bytes));
  out += line;
  if (list_tensors) {
    out += "\ntensors:\n";
    for (const auto& g : r.groups) {
      out += "  " + g.name + "\n";
      for (size_t i : g.tensors) {
        const auto& t = r.tensors[i];
        std::snprintf(line, sizeof line, "    %-60s %-5s %-22s %12s  %s\n", t.name.c_str(),
                      std::string(dtype_name(t.dtype)).c_str(), shape_string(t.shape).c_str(),
                      human_bytes(t.bytes).c_str(), t.file.c_str());
        out += line;
      }
    }
  }
  return out;
}

std::string format_json(const InspectReport& r, bool list_tensors) {
  using json = nlohmann::json;
  json j;
  j["path"] = r.path;
  j["files"] = r.files;
  j["architecture"] = r.architecture.empty() ? json(nullptr) : json(r.architecture);
  if (!r.architecture.empty()) j["binding"] = r.binding;
  if (!r.note.empty()) j["note"] = r.note;
  json groups = json::array();
  for (const auto& g : r.groups) {
    json jg = {{"name", g.name},
               {"module", g.module},
               {"tensors", g.tensors.size()},
               {"params", g.params},
               {"bytes", g.bytes}};
    if (list_tensors) {
      json ts = json::array();
      for (size_t i : g.tensors) {
        const auto& t = r.tensors[i];
        ts.push_back({{"name", t.name},
                      {"dtype", std::string(dtype_name(t.dtype))},
                      {"shape", t.shape},
                      {"bytes", t.bytes},
                      {"file", t.file}});
      }
      jg["tensor_list"] = std::move(ts);
    }
    groups.push_back(std::move(jg));
  }
  j["groups"] = std::move(groups);
  json modules = json::array();
  for (const auto& m : r.modules) {
    modules.push_back({{"module", m.module}, {"params", m.params}, {"bytes", m.bytes}});
  }
  j["modules"] = std::move(modules);
  j["total"] = {
      {"tensors", r.tensors.size()}, {"params", r.total_params}, {"bytes", r.total_bytes}};
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace ferry::cli
