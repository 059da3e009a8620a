// Placeholder until the run command lands (see the open issues); replaced, not extended.
#include "cli/commands.h"

namespace ferry::cli {

void add_run_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "(not built yet)");
  cmd->callback([] { throw CLI::RuntimeError("ferry run: not built yet", 2); });
}

}  // namespace ferry::cli
