// Placeholder until the inspect command lands (see the open issues); replaced, not extended.
#include "cli/commands.h"

namespace ferry::cli {

void add_inspect_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("inspect", "(not built yet)");
  cmd->callback([] { throw CLI::RuntimeError("ferry inspect: not built yet", 2); });
}

}  // namespace ferry::cli
