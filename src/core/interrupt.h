// SIGINT, SIGTERM and SIGHUP as a request to stop, never a death in the middle of a write.
//
// main() calls install_interrupt_handlers() first. While no InterruptScope is open, a signal ends
// the process at once with one line on stderr ("ferry: interrupted by SIGINT") and exit status
// 128 + signal: nothing is being written, so nothing can be left half-done. While a scope is open
// (a command is writing files), the signal is only recorded: writers poll pending_interrupt() at
// their check points, stop, remove their temporaries and return an `interrupted` error, which the
// CLI reports as one line with exit status 128 + signal. A process that never installs the
// handlers (tests, the Python module) sees pending_interrupt() == 0 always.
#pragma once

#include <string>

#include "core/status.h"

namespace ferry {

void install_interrupt_handlers();

// While alive, SIGINT/SIGTERM/SIGHUP are recorded instead of ending the process. Nestable; open
// it before the objects whose destructors remove temporaries, so they run first.
class InterruptScope {
 public:
  InterruptScope();
  ~InterruptScope();
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;
};

// For a command whose writes are committed: from now until the process exits, a signal is
// recorded as inside a scope and nothing checks it, so the process finishes its report and exits
// with the status of what it wrote (a SIGTERM a moment after the commit no longer ends it with
// 143 and a complete OUT).
void defer_interrupts_until_exit();

// The signal recorded inside a scope, or 0.
int pending_interrupt();

// An `interrupted` error "interrupted by SIGINT<context>" when a signal is pending, else ok.
Status check_interrupt(const std::string& context = "");

// "SIGINT", "SIGTERM", "SIGHUP", or "signal N".
std::string signal_name(int sig);

}  // namespace ferry
