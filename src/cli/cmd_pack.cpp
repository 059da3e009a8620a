// ferry pack IN OUT [--force] [--json]: a checkpoint relaid out so that each weight group is one
// page-aligned range of one safetensors file, laid out as in memory (model/pack.h): one group is
// one transfer. --compress writes the compressed checkpoint instead (model/compressed_checkpoint.h)
// and --decompress gives a compressed one back as a raw checkpoint. Written atomically: OUT is
// untouched until the new folder is complete.
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "backend/cpu/cpu_backend.h"
#include "cli/cli_support.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/inspect_report.h"
#include "cli/progress.h"
#include "core/interrupt.h"
#include "host/host_tier.h"
#include "model/compressed_checkpoint.h"
#include "model/pack.h"

namespace ferry::cli {
namespace {

struct PackArgs {
  std::string in;
  std::string out;
  bool force = false;
  bool json = false;
  bool compress = false;
  bool decompress = false;
  int threads = 0;
};

const Reporter report{"pack"};

// Copies per group as the host tier will issue them from the packed file.
struct Transfers {
  size_t groups = 0;
  size_t one_copy = 0;
  std::vector<std::string> more;  // "text.head.0 (2 copies)"
};

Transfers count_transfers(const std::string& dir) {
  const OpenModel m = report.check(open_model(dir));
  std::unique_ptr<Backend> cpu = create_cpu_backend();
  const HostTier tier = report.check(HostTier::open(*cpu, m.checkpoint, HostPath::pageable));
  Transfers t;
  for (const WeightGroup& g : m.weights.groups) {
    const size_t n = report.check(tier.copies(g)).size();
    ++t.groups;
    if (n == 1) {
      ++t.one_copy;
    } else {
      t.more.push_back(g.name + " (" + std::to_string(n) + " copies)");
    }
  }
  return t;
}

// What `ferry pack` did: the pack (model/pack.h) and the copies its groups now take.
struct PackedReport {
  const PackArgs& a;
  PackReport pack;
  Transfers transfers;
};

nlohmann::ordered_json pack_report_json(const PackedReport& r) {
  const PackReport& p = r.pack;
  const Transfers& t = r.transfers;
  nlohmann::ordered_json j;
  j["in"] = r.a.in;
  j["out"] = r.a.out;
  j["file_bytes"] = p.file_bytes;
  j["data_bytes"] = p.layout.data_bytes;
  j["padding_bytes"] = p.padding_bytes;
  j["group_alignment"] = kPackGroupAlignment;
  j["groups"] = t.groups;
  j["groups_one_copy"] = t.one_copy;
  j["groups_more_copies"] = t.more;
  j["other_files"] = p.other_files;
  j["seconds"] = p.seconds;
  return j;
}

void print_pack_report(const PackedReport& r) {
  const PackReport& p = r.pack;
  const Transfers& t = r.transfers;
  std::printf("packed %s -> %s/model.safetensors: %s (%s of padding), %.2f s\n", r.a.in.c_str(),
              r.a.out.c_str(), human_bytes(p.file_bytes).c_str(),
              human_bytes(p.padding_bytes).c_str(), p.seconds);
  std::printf("groups %zu, %zu of them one copy each, page-aligned", t.groups, t.one_copy);
  if (!t.more.empty()) {
    std::printf("; more (a tensor shared with an earlier group):");
    for (const std::string& m : t.more) std::printf(" %s", m.c_str());
  }
  std::printf("\nfiles  %zu other file(s) copied beside the weights\n", p.other_files);
}

double ratio(uint64_t part, uint64_t whole) {
  return whole > 0 ? static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

void print_json(const nlohmann::ordered_json& j) {
  std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
}

// Runs `work` with interrupts stopping it, and the progress line on stderr fed by its callback.
template <class T, class F>
T staged(const char* what, F work) {
  Progress progress("pack", true);
  CompressOptions o;
  o.progress = [&progress, what](size_t done, size_t total) {
    progress.stage(std::string(what) + " group " + std::to_string(done) + "/" +
                   std::to_string(total));
  };
  T out;
  {
    InterruptScope interruptible;  // SIGINT/SIGTERM stop the write; OUT stays as it was
    out = report.check(work(o));
    defer_interrupts_until_exit();  // OUT is written: say so whatever comes now
  }
  progress.stop();
  return out;
}

void run_compress(const PackArgs& a) {
  const CompressReport r = staged<CompressReport>("compress", [&a](CompressOptions o) {
    o.force = a.force;
    o.threads = a.threads;
    return compress_checkpoint(a.in, a.out, o);
  });
  size_t coded = 0;
  uint64_t decoded = 0, groups_compressed = 0;
  for (const GroupRatio& g : r.groups) {
    coded += g.coded;
    decoded += g.decoded_bytes;
    groups_compressed += g.compressed_bytes;
  }
  if (a.json) {
    nlohmann::ordered_json j;
    j["in"] = a.in;
    j["out"] = a.out;
    j["mode"] = "compress";
    j["raw_bytes"] = r.raw_bytes;
    j["compressed_bytes"] = r.compressed_bytes;
    j["ratio"] = ratio(r.compressed_bytes, r.raw_bytes);
    j["file_bytes"] = r.file_bytes;
    j["groups"] = r.groups.size();
    j["groups_coded"] = coded;
    j["groups_decoded_bytes"] = decoded;
    j["groups_compressed_bytes"] = groups_compressed;
    j["groups_ratio"] = ratio(groups_compressed, decoded);
    j["stored_tensors"] = r.stored_tensors;
    j["other_files"] = r.other_files;
    j["threads"] =
        a.threads > 0 ? a.threads : static_cast<int>(std::thread::hardware_concurrency());
    j["seconds"] = r.seconds;
    print_json(j);
    return;
  }
  std::printf("compressed %s -> %s/model.safetensors: %s -> %s (ratio %.4f), %.2f s\n",
              a.in.c_str(), a.out.c_str(), human_bytes(r.raw_bytes).c_str(),
              human_bytes(r.compressed_bytes).c_str(), ratio(r.compressed_bytes, r.raw_bytes),
              r.seconds);
  std::printf("groups %zu, %zu coded, %zu stored whole; layouts %s -> %s (ratio %.4f)\n",
              r.groups.size(), coded, r.groups.size() - coded, human_bytes(decoded).c_str(),
              human_bytes(groups_compressed).c_str(), ratio(groups_compressed, decoded));
  std::printf("files  %zu tensor(s) stored raw, %zu other file(s) copied beside the weights\n",
              r.stored_tensors, r.other_files);
}

void run_decompress(const PackArgs& a) {
  const DecompressReport r = staged<DecompressReport>("decompress", [&a](CompressOptions o) {
    o.force = a.force;
    o.threads = a.threads;
    return decompress_checkpoint(a.in, a.out, o);
  });
  if (a.json) {
    nlohmann::ordered_json j;
    j["in"] = a.in;
    j["out"] = a.out;
    j["mode"] = "decompress";
    j["compressed_bytes"] = r.compressed_bytes;
    j["raw_bytes"] = r.raw_bytes;
    j["ratio"] = ratio(r.compressed_bytes, r.raw_bytes);
    j["file_bytes"] = r.file_bytes;
    j["tensors"] = r.tensors;
    j["other_files"] = r.other_files;
    j["seconds"] = r.seconds;
    print_json(j);
    return;
  }
  std::printf("decompressed %s -> %s/model.safetensors: %zu tensors, %s -> %s, %.2f s\n",
              a.in.c_str(), a.out.c_str(), r.tensors, human_bytes(r.compressed_bytes).c_str(),
              human_bytes(r.raw_bytes).c_str(), r.seconds);
}

void pack(const PackArgs& a) {
  if (a.compress && a.decompress) report.fail("--compress and --decompress exclude each other");
  if (a.compress) return run_compress(a);
  if (a.decompress) return run_decompress(a);
  PackOptions o;
  o.force = a.force;
  PackReport packed;
  {
    InterruptScope interruptible;  // SIGINT/SIGTERM stop the write; OUT stays as it was
    packed = report.check(pack_checkpoint(a.in, a.out, o));
    // OUT holds the new checkpoint: finish and say so (status 0) whatever signal comes now, so
    // that the status always tells whether OUT was written.
    defer_interrupts_until_exit();
  }
  const PackedReport r{.a = a, .pack = std::move(packed), .transfers = count_transfers(a.out)};
  if (a.json) {
    std::cout << pack_report_json(r).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
              << '\n';
    return;
  }
  print_pack_report(r);
}

}  // namespace

void add_pack_command(CLI::App& app) {
  auto args = std::make_shared<PackArgs>();
  auto* cmd = app.add_subcommand(
      "pack",
      "Relay a checkpoint out so that each weight group is one page-aligned range of one "
      "safetensors file, in execution order (one group, one transfer)");
  cmd->add_option("IN", args->in, "Checkpoint folder (config.json + safetensors)")
      ->check(not_empty())
      ->required();
  cmd->add_option("OUT", args->out, "Folder to write (model.safetensors and the other files)")
      ->check(not_empty())
      ->required();
  cmd->add_flag("--force", args->force, "Replace a checkpoint already in OUT");
  cmd->add_flag("--json", args->json, "Print one JSON object");
  cmd->add_flag("--compress", args->compress,
                "Write a compressed checkpoint (docs/compression.md): one coded tensor per group");
  cmd->add_flag("--decompress", args->decompress,
                "Give a compressed checkpoint back as a raw one, byte for byte");
  add_int_option(cmd, "--threads", &args->threads, 0, 4096,
                 "encoder/decoder threads (default: one per hardware thread)");
  cmd->callback([args] { pack(*args); });
}

}  // namespace ferry::cli
