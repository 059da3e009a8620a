#include "cli/cli_support.h"

#include <iostream>

#include "core/interrupt.h"

namespace ferry::cli {

void Reporter::fail(const std::string& message) const {
  std::cerr << "ferry " << command_ << ": " << message << '\n';
  // Stopped by a signal: the shell's convention, 128 + the signal (without dying of it).
  const int sig = pending_interrupt();
  throw CLI::RuntimeError(sig != 0 ? 128 + sig : 2);
}

void add_graphs_option(CLI::App* cmd, bool* graphs) {
  cmd->add_option_function<std::string>(
         "--graphs",
         [graphs](const std::string& v) {
           if (v != "on" && v != "off") throw CLI::ValidationError("--graphs", "on or off");
           *graphs = v == "on";
         },
         "Record decode and flow-step layers once and replay them: on (default) or off; the "
         "output is the same either way")
      ->type_name("on|off");
}

}  // namespace ferry::cli
