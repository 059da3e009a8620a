// ferry inspect PATH [--json] [--tensors]: a checkpoint's tensors by weight group, with
// per-module and total parameters and bytes. A bad file is one line on stderr and exit code 2. A
// readable checkpoint is printed and exits 0, grouped by name prefix when no architecture was
// recognised (no config.json, or one naming none ferry knows: the report says which); only a
// recognised architecture whose weight table the tensors do not bind is a failure, printed, then
// one line on stderr and exit code 1.
#include <sys/stat.h>

#include <exception>
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/inspect_compressed.h"
#include "cli/inspect_report.h"
#include "format/safetensors.h"
#include "model/compressed_checkpoint.h"
#include "model/config_json.h"

namespace ferry::cli {
namespace {

struct InspectOptions {
  std::string path;
  bool json = false;
  bool tensors = false;
};

bool is_file(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The report of PATH: its tensors, grouped through config.json beside them (in the folder, or
// next to a single .safetensors file) when it names a known architecture, else by prefix.
Result<InspectReport> gather_inspect(const std::string& path) {
  FERRY_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::open(path));
  InspectReport report;
  report.path = path;
  report.files = ckpt.files().size();
  for (const auto& e : ckpt.entries()) {
    const std::string& file = ckpt.files()[e.shard].path();
    report.tensors.push_back(InspectTensor{e.info->name, e.info->dtype, e.info->shape,
                                           e.info->bytes,
                                           std::filesystem::path(file).filename().string()});
  }
  std::filesystem::path dir = path;
  if (is_file(path)) dir = dir.parent_path();
  const std::string config_path = (dir / "config.json").string();
  std::optional<ModelConfig> config;
  if (!is_file(config_path)) {
    report.note = "no config.json";
  } else if (auto c = load_config(config_path); c.ok()) {
    config = std::move(c).value();
  } else {
    report.note = c.error().message;
  }
  group_report(report, config ? &*config : nullptr);
  return report;
}

// A compressed checkpoint: the ratio of every group, module and the model
// (cli/inspect_compressed.h).
int run_inspect_compressed(const InspectOptions& o) {
  const Result<CompressedInspectReport> report = gather_compressed_inspect(o.path);
  if (!report.ok()) {
    std::cerr << "ferry inspect: " << report.error().to_string() << "\n";
    return 2;
  }
  std::cout << (o.json ? format_compressed_json(*report) : format_compressed_text(*report));
  if (report->binding != "ok" && report->binding != "no config.json") {
    std::cerr << "ferry inspect: " << o.path
              << " does not bind to its config.json: " << report->binding << "\n";
    return 1;
  }
  return 0;
}

int run_inspect(const InspectOptions& o) {
  if (auto ck = Checkpoint::open(o.path); ck.ok() && is_compressed_checkpoint(*ck)) {
    return run_inspect_compressed(o);
  }
  const Result<InspectReport> report = gather_inspect(o.path);
  if (!report.ok()) {
    std::cerr << "ferry inspect: " << report.error().to_string() << "\n";
    return 2;
  }
  std::cout << (o.json ? format_json(*report, o.tensors) : format_text(*report, o.tensors));
  // No architecture recognised is a finding the report states (by prefix), not a failure; a
  // recognised one that the tensors do not bind is.
  if (!report->architecture.empty() && report->binding != "ok") {
    std::cerr << "ferry inspect: " << o.path << " does not bind to " << report->architecture << ": "
              << report->binding << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  auto opts = std::make_shared<InspectOptions>();
  auto* cmd = app.add_subcommand(
      "inspect", "Tensors, dtypes, shapes and bytes of a checkpoint, by weight group and module");
  cmd->add_option("path", opts->path, "checkpoint folder or .safetensors file")
      ->check(not_empty())
      ->required();
  cmd->add_flag("--json", opts->json, "print JSON");
  cmd->add_flag("--tensors", opts->tensors, "list every tensor");
  cmd->callback([opts] {
    int rc = 2;
    try {
      rc = run_inspect(*opts);
    } catch (const std::exception& e) {
      std::cerr << "ferry inspect: internal error: " << e.what() << "\n";
    }
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace ferry::cli
