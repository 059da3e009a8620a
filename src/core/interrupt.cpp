#include "core/interrupt.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

namespace ferry {
namespace {

std::atomic<int> g_scopes{0};
std::atomic<int> g_pending{0};

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};

// Async-signal-safe: atomics, write(2) and _exit(2) only.
void on_interrupt(int sig) {
  if (g_scopes.load() > 0) {
    int expected = 0;
    g_pending.compare_exchange_strong(expected, sig);
    return;
  }
  const char* msg = sig == SIGINT    ? "ferry: interrupted by SIGINT\n"
                    : sig == SIGTERM ? "ferry: interrupted by SIGTERM\n"
                                     : "ferry: interrupted by SIGHUP\n";
  ssize_t rc = ::write(STDERR_FILENO, msg, std::strlen(msg));
  (void)rc;
  ::_exit(128 + sig);
}

}  // namespace

void install_interrupt_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  for (int s : kSignals) sigaddset(&sa.sa_mask, s);  // one handler at a time
  sa.sa_flags = SA_RESTART;  // a blocked read or flock resumes; writers poll instead
  for (int s : kSignals) {
    struct sigaction old {};
    // A signal ignored when ferry started (nohup, a shell's background job) stays ignored.
    if (::sigaction(s, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    ::sigaction(s, &sa, nullptr);
  }
}

InterruptScope::InterruptScope() {
  g_scopes.fetch_add(1);
}

InterruptScope::~InterruptScope() {
  g_scopes.fetch_sub(1);
}

void defer_interrupts_until_exit() {
  g_scopes.fetch_add(1);  // never taken back
}

int pending_interrupt() {
  return g_pending.load(std::memory_order_relaxed);
}

Status check_interrupt(const std::string& context) {
  const int sig = pending_interrupt();
  if (sig == 0) return {};
  return make_error(ErrorCode::interrupted, "interrupted by " + signal_name(sig) + context);
}

std::string signal_name(int sig) {
  switch (sig) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGHUP:
      return "SIGHUP";
    default:
      return "signal " + std::to_string(sig);
  }
}

}  // namespace ferry
