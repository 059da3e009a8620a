// Placeholder until the bench command lands (see the open issues); replaced, not extended.
#include "cli/commands.h"

namespace ferry::cli {

void add_bench_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "(not built yet)");
  cmd->callback([] { throw CLI::RuntimeError("ferry bench: not built yet", 2); });
}

}  // namespace ferry::cli
