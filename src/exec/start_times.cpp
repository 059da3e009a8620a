#include "exec/start_times.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>

namespace ferry {

namespace {

struct ProcessStart {
  std::chrono::steady_clock::time_point at;
  double before_main = -1.0;
};

ProcessStart& process_start() {
  static ProcessStart start{std::chrono::steady_clock::now(), -1.0};
  return start;
}

// Seconds since the kernel started this process: field 22 of /proc/self/stat (clock ticks after
// boot) against CLOCK_BOOTTIME. Negative when unreadable.
double seconds_since_exec() {
  std::ifstream in("/proc/self/stat");
  std::string line;
  if (!std::getline(in, line)) return -1.0;
  // The command name (field 2) is in parentheses and may hold spaces: count from after it.
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return -1.0;
  std::istringstream fields(line.substr(close + 1));
  std::string field;
  unsigned long long ticks = 0;
  for (int i = 3; i <= 22; ++i) {
    if (!(fields >> field)) return -1.0;
    if (i == 22) ticks = std::stoull(field);
  }
  const long hz = ::sysconf(_SC_CLK_TCK);
  timespec now{};
  if (hz <= 0 || ::clock_gettime(CLOCK_BOOTTIME, &now) != 0) return -1.0;
  const double up = static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
  return up - static_cast<double>(ticks) / static_cast<double>(hz);
}

}  // namespace

double StartTimes::register_blocked_s() const {
  return tier_s + upload_wait_s + register_wait_s;
}

double StartTimes::register_hidden_s() const {
  return std::max(0.0, register_s - register_blocked_s());
}

double StartTimes::other_s() const {
  return total_s - config_s - checkpoint_s - backend_s - machine_limits_s - open_s;
}

void StartTimes::take_session(const StartTimes& s) {
  tier_s = s.tier_s;
  compress_s = s.compress_s;
  plan_s = s.plan_s;
  plan_context_s = s.plan_context_s;
  plan_choose_s = s.plan_choose_s;
  plan_evaluations = s.plan_evaluations;
  reserve_s = s.reserve_s;
  upload_s = s.upload_s;
  upload_wait_s = s.upload_wait_s;
  upload_bytes = s.upload_bytes;
  register_wait_s = s.register_wait_s;
  slots_s = s.slots_s;
  link_check_s = s.link_check_s;
  fallback_s = s.fallback_s;
  runner_s = s.runner_s;
  open_s = s.open_s;
  register_s = s.register_s;
  register_calls_s = s.register_calls_s;
  register_pieces = s.register_pieces;
  register_threads = s.register_threads;
  register_bytes = s.register_bytes;
  files_bytes = s.files_bytes;
  cached_bytes = s.cached_bytes;
  available_bytes = s.available_bytes;
}

void mark_process_start() {
  ProcessStart& p = process_start();
  p.at = std::chrono::steady_clock::now();
  try {
    p.before_main = seconds_since_exec();
  } catch (const std::exception&) {  // a malformed field: unknown
    p.before_main = -1.0;
  }
}

double seconds_since_process_start() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - process_start().at)
      .count();
}

double seconds_before_main() {
  return process_start().before_main;
}

}  // namespace ferry
