// ferry verify PATH [--json] [--threads N]: every tensor of a checkpoint scanned for NaN and Inf
// (format/nonfinite_scan.h). Exit status 0 when every value is finite, 1 when some tensor holds
// non-finite values (each one listed), 2 when the checkpoint cannot be read.
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/cli_support.h"
#include "cli/commands.h"
#include "cli/inspect_report.h"
#include "model/config_json.h"
#include "format/nonfinite_scan.h"
#include "model/weights.h"

namespace ferry::cli {
namespace {

struct VerifyOptions {
  std::string path;
  bool json = false;
  int64_t threads = 0;
};

const Reporter report{"verify"};

// Checkpoint name -> weight group, when config.json is there and names a known architecture.
std::map<std::string, std::string> groups_of(const Checkpoint& checkpoint) {
  std::map<std::string, std::string> out;
  auto config = load_config(checkpoint.dir());
  if (!config.ok()) return out;
  auto weights = describe_weights(*config);
  if (!weights.ok()) return out;
  for (const WeightGroup& g : weights->groups)
    for (const WeightSpec& s : g.tensors) out.emplace(s.checkpoint_name, g.name);
  return out;
}

int verify(const VerifyOptions& o) {
  const Checkpoint checkpoint = report.check(Checkpoint::open(o.path));
  const NonFiniteScan scan =
      report.check(scan_nonfinite(checkpoint, static_cast<unsigned>(o.threads)));
  const std::map<std::string, std::string> groups = groups_of(checkpoint);
  auto group = [&](const std::string& name) {
    auto it = groups.find(name);
    return it == groups.end() ? std::string() : it->second;
  };
  const double gbps =
      scan.seconds > 0 ? static_cast<double>(scan.scanned_bytes) / scan.seconds / 1e9 : 0.0;
  if (o.json) {
    nlohmann::json j;
    j["path"] = o.path;
    j["ok"] = scan.damaged.empty();
    j["tensors"] = scan.tensors;
    j["bytes"] = scan.bytes;
    j["scanned_bytes"] = scan.scanned_bytes;
    j["threads"] = scan.threads;
    j["seconds"] = scan.seconds;
    j["gb_per_s"] = gbps;
    j["damaged"] = nlohmann::json::array();
    for (const DamagedTensor& d : scan.damaged) {
      j["damaged"].push_back({{"tensor", d.name},
                              {"group", group(d.name)},
                              {"file", d.file},
                              {"dtype", std::string(dtype_name(d.dtype))},
                              {"nan", d.count.nan},
                              {"inf", d.count.inf},
                              {"first_index", d.count.first}});
    }
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  } else {
    std::printf("verify %s: %llu tensors, %s (%s floating) in %.2f s, %.2f GB/s, %u threads\n",
                o.path.c_str(), static_cast<unsigned long long>(scan.tensors),
                human_bytes(scan.bytes).c_str(), human_bytes(scan.scanned_bytes).c_str(),
                scan.seconds, gbps, scan.threads);
    for (const DamagedTensor& d : scan.damaged) {
      const std::string g = group(d.name);
      std::printf("damaged %s%s\n", describe_damage(d).c_str(),
                  g.empty() ? "" : (", group " + g).c_str());
    }
    if (scan.damaged.empty()) std::printf("ok: every value is finite\n");
  }
  if (!scan.damaged.empty()) {
    std::fprintf(stderr, "ferry verify: %zu of %llu tensors hold NaN or Inf\n", scan.damaged.size(),
                 static_cast<unsigned long long>(scan.tensors));
    return 1;
  }
  return 0;
}

}  // namespace

void add_verify_command(CLI::App& app) {
  auto opts = std::make_shared<VerifyOptions>();
  auto* cmd = app.add_subcommand(
      "verify", "Scan every tensor of a checkpoint for NaN and Inf (exit 1 if any holds one)");
  cmd->add_option("path", opts->path, "checkpoint folder or .safetensors file")
      ->check(not_empty())
      ->required();
  cmd->add_flag("--json", opts->json, "print JSON");
  add_int_option(cmd, "--threads", &opts->threads, 0, 4096,
                 "scanning threads (default: one per hardware thread)");
  cmd->callback([opts] {
    const int rc = verify(*opts);
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace ferry::cli
