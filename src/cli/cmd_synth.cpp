// Placeholder until the synth command lands (see the open issues); replaced, not extended.
#include "cli/commands.h"

namespace ferry::cli {

void add_synth_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("synth", "(not built yet)");
  cmd->callback([] { throw CLI::RuntimeError("ferry synth: not built yet", 2); });
}

}  // namespace ferry::cli
