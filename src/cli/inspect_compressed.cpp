#include "cli/inspect_compressed.h"

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "compress/group_format.h"
#include "core/units.h"
#include "host/compressed_model.h"
#include "model/compressed_checkpoint.h"

namespace ferry::cli {
namespace {

double ratio(uint64_t part, uint64_t whole) {
  return whole > 0 ? static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

// The mode field of a group's header (read_group_layout has checked it).
bool is_coded(std::span<const uint8_t> bytes) {
  return bytes.size() >= compress::kHeaderBytes &&
         bytes[compress::kHeaderMode] == compress::kModeCoded;
}

}  // namespace

Result<CompressedInspectReport> gather_compressed_inspect(const std::string& path) {
  FERRY_ASSIGN_OR_RETURN(OpenContainer c, open_container(path));
  CompressedInspectReport r;
  r.path = path;
  r.codec = std::string(kCodecName) + " v" + std::to_string(compress::kVersion);
  r.file_bytes = c.file.file_bytes().size();
  r.tensors = c.table.tensors.size();
  for (const ContainerTensor& t : c.table.tensors) {
    r.raw_bytes += t.bytes;
    if (t.stored) r.stored_bytes += t.bytes;
  }
  for (size_t g = 0; g < c.table.groups.size(); ++g) {
    const ContainerGroup& cg = c.table.groups[g];
    const CompressedInspectGroup group{cg.name, cg.module, cg.decoded_bytes,
                                       c.group_bytes[g].size(), is_coded(c.group_bytes[g])};
    r.decoded_bytes += group.decoded_bytes;
    r.compressed_bytes += group.compressed_bytes;
    CompressedInspectModule* m = nullptr;
    for (auto& have : r.modules) m = have.module == group.module ? &have : m;
    if (m == nullptr) m = &r.modules.emplace_back(CompressedInspectModule{group.module});
    ++m->groups;
    m->decoded_bytes += group.decoded_bytes;
    m->compressed_bytes += group.compressed_bytes;
    r.groups.push_back(group);
  }
  std::error_code ec;
  const std::filesystem::path dir = std::filesystem::is_directory(path, ec)
                                        ? std::filesystem::path(path)
                                        : std::filesystem::path(path).parent_path();
  if (!std::filesystem::exists(dir / "config.json", ec)) {
    r.binding = "no config.json";
  } else if (auto m = open_compressed_model(dir.string()); m.ok()) {
    r.binding = "ok";
  } else {
    r.binding = m.error().message;
  }
  return r;
}

std::string format_compressed_text(const CompressedInspectReport& r) {
  std::string out;
  char line[512];
  auto add = [&](const char* fmt, auto... args) {
    std::snprintf(line, sizeof line, fmt, args...);
    out += line;
  };
  add("compressed checkpoint %s: %s, %zu tensors, codec %s\n", r.path.c_str(),
      human_bytes(r.file_bytes).c_str(), r.tensors, r.codec.c_str());
  add("page cache %s (the file) for %s of raw tensors: ratio %.4f\n",
      human_bytes(r.file_bytes).c_str(), human_bytes(r.raw_bytes).c_str(),
      ratio(r.file_bytes, r.raw_bytes));
  add("%-32s %-8s %12s %12s %8s\n", "group", "module", "layout", "compressed", "ratio");
  for (const CompressedInspectGroup& g : r.groups) {
    add("%-32s %-8s %12s %12s %8.4f%s\n", g.name.c_str(), g.module.c_str(),
        human_bytes(g.decoded_bytes).c_str(), human_bytes(g.compressed_bytes).c_str(),
        ratio(g.compressed_bytes, g.decoded_bytes), g.coded ? "" : "  (stored whole)");
  }
  for (const CompressedInspectModule& m : r.modules) {
    add("module %-25s %-8zu %12s %12s %8.4f\n", m.module.c_str(), m.groups,
        human_bytes(m.decoded_bytes).c_str(), human_bytes(m.compressed_bytes).c_str(),
        ratio(m.compressed_bytes, m.decoded_bytes));
  }
  add("model  %-25s %-8zu %12s %12s %8.4f\n", "(all groups)", r.groups.size(),
      human_bytes(r.decoded_bytes).c_str(), human_bytes(r.compressed_bytes).c_str(),
      ratio(r.compressed_bytes, r.decoded_bytes));
  if (r.stored_bytes > 0)
    add("stored %s of tensors no group holds, raw\n", human_bytes(r.stored_bytes).c_str());
  add("binding %s\n", r.binding.c_str());
  return out;
}

std::string format_compressed_json(const CompressedInspectReport& r) {
  nlohmann::ordered_json j;
  j["path"] = r.path;
  j["compressed"] = true;
  j["codec"] = r.codec;
  j["file_bytes"] = r.file_bytes;
  j["page_cache_bytes"] = r.file_bytes;
  j["raw_bytes"] = r.raw_bytes;
  j["ratio"] = ratio(r.file_bytes, r.raw_bytes);
  j["stored_bytes"] = r.stored_bytes;
  j["tensors"] = r.tensors;
  nlohmann::ordered_json groups = nlohmann::ordered_json::array();
  for (const CompressedInspectGroup& g : r.groups) {
    groups.push_back({{"name", g.name},
                      {"module", g.module},
                      {"decoded_bytes", g.decoded_bytes},
                      {"compressed_bytes", g.compressed_bytes},
                      {"ratio", ratio(g.compressed_bytes, g.decoded_bytes)},
                      {"coded", g.coded}});
  }
  j["groups"] = groups;
  nlohmann::ordered_json modules = nlohmann::ordered_json::array();
  for (const CompressedInspectModule& m : r.modules) {
    modules.push_back({{"module", m.module},
                       {"groups", m.groups},
                       {"decoded_bytes", m.decoded_bytes},
                       {"compressed_bytes", m.compressed_bytes},
                       {"ratio", ratio(m.compressed_bytes, m.decoded_bytes)}});
  }
  j["modules"] = modules;
  j["model"] = {{"decoded_bytes", r.decoded_bytes},
                {"compressed_bytes", r.compressed_bytes},
                {"ratio", ratio(r.compressed_bytes, r.decoded_bytes)}};
  j["binding"] = r.binding;
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace ferry::cli
