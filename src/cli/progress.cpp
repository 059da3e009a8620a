#include "cli/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace ferry::cli {
namespace {

constexpr auto kQuietFor = std::chrono::seconds(1);

size_t index_of(Phase p) {
  return static_cast<size_t>(p);
}

// Vision and prefill count their calls (one per group); decode and expert count steps.
bool counts_steps(Phase p) {
  return p == Phase::decode || p == Phase::expert;
}

}  // namespace

Progress::Progress(std::string command, bool enabled) : command_(std::move(command)) {
  start_ = std::chrono::steady_clock::now();
  if (!enabled) return;
  tty_ = ::isatty(STDERR_FILENO) != 0;
  thread_ = std::thread([this] { loop(); });
}

Progress::~Progress() {
  stop();
}

void Progress::stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Progress::stage(std::string text) {
  std::lock_guard<std::mutex> lock(mu_);
  stage_ = std::move(text);
}

void Progress::begin_calls(std::span<const Call> calls) {
  std::lock_guard<std::mutex> lock(mu_);
  phase_total_ = {};
  phase_seen_ = {};
  for (const Call& c : calls) {
    int64_t& total = phase_total_[index_of(c.phase)];
    total = counts_steps(c.phase) ? std::max<int64_t>(total, c.step + 1) : total + 1;
  }
  in_calls_ = true;
  call_index_ = 0;
}

void Progress::at(const Call& call) {
  std::lock_guard<std::mutex> lock(mu_);
  call_ = call;
  int64_t& seen = phase_seen_[index_of(call.phase)];
  call_index_ = counts_steps(call.phase) ? call.step + 1 : ++seen;
}

void Progress::end_calls() {
  std::lock_guard<std::mutex> lock(mu_);
  in_calls_ = false;
}

std::string Progress::line() const {
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::lock_guard<std::mutex> lock(mu_);
  std::string out = command_ + ": " + stage_;
  if (in_calls_ && call_index_ > 0) {
    const Phase p = call_.phase;
    out += (stage_.empty() ? "" : ", ") + std::string(phase_name(p)) +
           (counts_steps(p) ? " step " : " ") + std::to_string(call_index_) + "/" +
           std::to_string(phase_total_[index_of(p)]);
  }
  char elapsed[32];
  std::snprintf(elapsed, sizeof elapsed, ", %.1f s", s);
  return out + elapsed;
}

void Progress::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  const auto period = std::chrono::milliseconds(tty_ ? 250 : 2000);
  // Nothing for the first second: short work stays silent.
  if (cv_.wait_until(lock, start_ + kQuietFor, [this] { return stop_; })) return;
  do {
    lock.unlock();
    const std::string text = line();
    std::fprintf(stderr, tty_ ? "\r%-78s" : "%s\n", text.c_str());
    std::fflush(stderr);
    lock.lock();
    printed_ = true;
  } while (!cv_.wait_for(lock, period, [this] { return stop_; }));
  if (tty_ && printed_) std::fprintf(stderr, "\r%78s\r", "");
}

}  // namespace ferry::cli
