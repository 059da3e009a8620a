// ferry verify PATH [--json] [--threads N]: every tensor of a checkpoint scanned for NaN and Inf
// (format/nonfinite_scan.h). Exit status 0 when every value is finite, 1 when some tensor holds
// non-finite values (each one listed), 2 when the checkpoint cannot be read. A compressed
// checkpoint (ferry pack --compress) has every group decoded and its checksum checked as well
// (cli/verify_compressed.h): a damaged group is exit status 1, one line naming group and tensor.
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/cli_support.h"
#include "cli/commands.h"
#include "cli/inspect_report.h"
#include "cli/verify_compressed.h"
#include "format/nonfinite_scan.h"
#include "model/compressed_checkpoint.h"
#include "model/config_json.h"
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

// What `ferry verify` found: the scan, and the weight group of each damaged tensor.
struct VerifyReport {
  std::string path;
  NonFiniteScan scan;
  std::vector<std::string> groups;  // per damaged tensor; empty where config.json names none
  double gb_per_s() const {
    return scan.seconds > 0 ? static_cast<double>(scan.scanned_bytes) / scan.seconds / 1e9 : 0.0;
  }
};

VerifyReport gather_verify(const VerifyOptions& o) {
  const Checkpoint checkpoint = report.check(Checkpoint::open(o.path));
  VerifyReport r;
  r.path = o.path;
  r.scan = report.check(scan_nonfinite(checkpoint, static_cast<unsigned>(o.threads)));
  const std::map<std::string, std::string> groups = groups_of(checkpoint);
  for (const DamagedTensor& d : r.scan.damaged) {
    auto it = groups.find(d.name);
    r.groups.push_back(it == groups.end() ? std::string() : it->second);
  }
  return r;
}

nlohmann::json verify_report_json(const VerifyReport& r) {
  const NonFiniteScan& scan = r.scan;
  nlohmann::json j;
  j["path"] = r.path;
  j["ok"] = scan.damaged.empty();
  j["tensors"] = scan.tensors;
  j["bytes"] = scan.bytes;
  j["scanned_bytes"] = scan.scanned_bytes;
  j["threads"] = scan.threads;
  j["seconds"] = scan.seconds;
  j["gb_per_s"] = r.gb_per_s();
  j["damaged"] = nlohmann::json::array();
  for (size_t i = 0; i < scan.damaged.size(); ++i) {
    const DamagedTensor& d = scan.damaged[i];
    j["damaged"].push_back({{"tensor", d.name},
                            {"group", r.groups[i]},
                            {"file", d.file},
                            {"dtype", std::string(dtype_name(d.dtype))},
                            {"nan", d.count.nan},
                            {"inf", d.count.inf},
                            {"first_index", d.count.first}});
  }
  return j;
}

void print_verify_report(const VerifyReport& r) {
  const NonFiniteScan& scan = r.scan;
  std::printf("verify %s: %llu tensors, %s (%s floating) in %.2f s, %.2f GB/s, %u threads\n",
              r.path.c_str(), static_cast<unsigned long long>(scan.tensors),
              human_bytes(scan.bytes).c_str(), human_bytes(scan.scanned_bytes).c_str(),
              scan.seconds, r.gb_per_s(), scan.threads);
  for (size_t i = 0; i < scan.damaged.size(); ++i) {
    const std::string& g = r.groups[i];
    std::printf("damaged %s%s\n", describe_damage(scan.damaged[i]).c_str(),
                g.empty() ? "" : (", group " + g).c_str());
  }
  if (scan.damaged.empty()) std::printf("ok: every value is finite\n");
}

int verify_compressed_checkpoint(const VerifyOptions& o) {
  const CompressedVerifyReport r =
      report.check(verify_compressed(o.path, static_cast<unsigned>(o.threads)));
  const bool ok = r.damaged_groups.empty() && r.nonfinite_tensors.empty();
  if (o.json) {
    nlohmann::json j;
    j["path"] = r.path;
    j["compressed"] = true;
    j["ok"] = ok;
    j["groups"] = r.groups;
    j["tensors"] = r.tensors;
    j["compressed_bytes"] = r.compressed_bytes;
    j["decoded_bytes"] = r.decoded_bytes;
    j["threads"] = r.threads;
    j["seconds"] = r.seconds;
    j["damaged_groups"] = r.damaged_groups;
    j["nonfinite_tensors"] = r.nonfinite_tensors;
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  } else {
    std::printf(
        "verify %s: %zu groups decoded, checksums checked, %s -> %s in %.2f s, %u threads\n",
        r.path.c_str(), r.groups, human_bytes(r.compressed_bytes).c_str(),
        human_bytes(r.decoded_bytes).c_str(), r.seconds, r.threads);
    for (const std::string& d : r.damaged_groups) std::printf("damaged %s\n", d.c_str());
    for (const std::string& d : r.nonfinite_tensors) std::printf("damaged %s\n", d.c_str());
    if (ok) std::printf("ok: every group's checksum holds, every value is finite\n");
  }
  if (!r.damaged_groups.empty()) {
    std::fprintf(
        stderr, "ferry verify: %s%s\n", r.damaged_groups.front().c_str(),
        r.damaged_groups.size() > 1
            ? (" (and " + std::to_string(r.damaged_groups.size() - 1) + " more groups)").c_str()
            : "");
    return 1;
  }
  if (!r.nonfinite_tensors.empty()) {
    std::fprintf(stderr, "ferry verify: %zu of %zu tensors hold NaN or Inf\n",
                 r.nonfinite_tensors.size(), r.tensors);
    return 1;
  }
  return 0;
}

int verify(const VerifyOptions& o) {
  if (auto ck = Checkpoint::open(o.path); ck.ok() && is_compressed_checkpoint(*ck)) {
    return verify_compressed_checkpoint(o);
  }
  const VerifyReport r = gather_verify(o);
  if (o.json) {
    std::cout << verify_report_json(r).dump(-1, ' ', false,
                                            nlohmann::json::error_handler_t::replace)
              << '\n';
  } else {
    print_verify_report(r);
  }
  if (!r.scan.damaged.empty()) {
    std::fprintf(stderr, "ferry verify: %zu of %llu tensors hold NaN or Inf\n",
                 r.scan.damaged.size(), static_cast<unsigned long long>(r.scan.tensors));
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
