// ferry synth --preset P --out DIR [--seed S] [--max-shard 5GB] [--force] [--init normal]: the
// flags of api/synth.h's run_synth, whose SynthReport print_synth_report renders (text only).
#include <exception>
#include <memory>
#include <utility>

#include "api/synth.h"
#include "cli/cli_support.h"
#include "cli/commands.h"
#include "core/interrupt.h"
#include "model/presets.h"

namespace ferry::cli {
void add_synth_command(CLI::App& app) {
  auto opts = std::make_shared<SynthOptions>();
  std::string names;
  for (auto n : preset_names()) names += (names.empty() ? "" : ", ") + std::string(n);
  auto* cmd = app.add_subcommand("synth", "Write a preset's config.json and seeded random weights");
  cmd->add_option("--preset", opts->preset, "model preset: " + names)
      ->check(not_empty())
      ->required();
  cmd->add_option("--out", opts->out,
                  "output folder: new, empty, or (with --force) one holding a checkpoint")
      ->check(not_empty())
      ->required();
  add_uint_option(cmd, "--seed", &opts->seed, "random seed (default 0)");
  cmd->add_option("--max-shard", opts->max_shard, "largest shard, e.g. 5GB, 500MB, 2GiB")
      ->check(not_empty());
  cmd->add_flag("--force", opts->force,
                "replace a checkpoint already in --out (written beside it, swapped in when "
                "complete; other files there are kept)");
  cmd->add_option("--init", opts->init,
                  "weight distribution: uniform (default) or normal (the same std per tensor; "
                  "exponents like trained weights', for compression figures)")
      ->check(CLI::IsMember({"uniform", "normal"}));
  cmd->add_flag("--config-only", opts->config_only, "write config.json only, no weights");
  cmd->callback([opts] {
    Result<SynthReport> r = make_error(ErrorCode::internal, "synth did not run");
    {
      InterruptScope interruptible;  // SIGINT/SIGTERM stop the write; the old folder stays
      try {
        r = run_synth(*opts);
      } catch (const std::exception& e) {
        r = make_error(ErrorCode::internal, e.what());
      }
    }
    if (const int sig = pending_interrupt(); sig != 0) {
      // Whichever layer noticed it: before the swap --out is as it was, after it, complete.
      r = make_error(ErrorCode::interrupted,
                     "interrupted by " + signal_name(sig) +
                         (r.ok() ? " after " + opts->out + " was written (it is complete)"
                                 : ": " + opts->out + " was left as it was"));
    }
    print_synth_report(Reporter("synth").check(std::move(r)));
  });
}

}  // namespace ferry::cli
