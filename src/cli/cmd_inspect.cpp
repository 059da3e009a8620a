// ferry inspect PATH [--json] [--tensors]: a checkpoint's tensors by weight group, with
// per-module and total parameters and bytes. A bad file is one line on stderr and exit code 2; a
// readable checkpoint no known architecture reads (or with no config.json) is printed by name
// prefix with a one-line note and exit code 0; one that does not bind to the architecture its
// config names is printed, then one line on stderr and exit code 1.
#include <sys/stat.h>

#include <exception>
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/inspect_report.h"
#include "model/config_json.h"
#include "format/safetensors.h"

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

int run_inspect(const InspectOptions& o) {
  auto ckpt = Checkpoint::open(o.path);
  if (!ckpt.ok()) {
    std::cerr << "ferry inspect: " << ckpt.error().to_string() << "\n";
    return 2;
  }
  InspectReport report;
  report.path = o.path;
  report.files = ckpt->files().size();
  for (const auto& e : ckpt->entries()) {
    const std::string& file = ckpt->files()[e.shard].path();
    report.tensors.push_back(InspectTensor{e.info->name, e.info->dtype, e.info->shape,
                                           e.info->bytes,
                                           std::filesystem::path(file).filename().string()});
  }
  // config.json beside the weights (in the folder, or next to a single .safetensors file).
  std::filesystem::path dir = o.path;
  if (is_file(o.path)) dir = dir.parent_path();
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
  std::cout << (o.json ? format_json(report, o.tensors) : format_text(report, o.tensors));
  // What was found is printed either way. A valid checkpoint with no config.json, or one no known
  // architecture reads, is no failure (it was inspected, by name prefix); one whose config names
  // an architecture its tensors do not match is.
  if (report.architecture.empty()) {
    std::cerr << "ferry inspect: no known architecture recognised in " << o.path << " ("
              << report.note << "): tensors grouped by name prefix\n";
    return 0;
  }
  if (report.binding != "ok") {
    std::cerr << "ferry inspect: " << o.path << " does not bind to its architecture: "
              << report.binding << "\n";
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
