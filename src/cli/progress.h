// Progress of long `run` and `bench` work on stderr: nothing for work that ends within about a
// second, then the stage, step/steps and the elapsed time ("run: decode step 5/21, 3.1 s"),
// rewritten in place on a terminal (4 times a second) and as a line every 2 s otherwise. A
// thread prints; the work only stores what it is doing. --quiet turns it off.
#pragma once

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <thread>

#include "exec/executor.h"
#include "model/call_sequence.h"

namespace ferry::cli {

class Progress {
 public:
  // `command` prefixes every line ("run", "bench"). Disabled: no thread, no output.
  Progress(std::string command, bool enabled);
  ~Progress();  // stop()
  // Stops printing for good and clears the line on a terminal (before text is printed as it is
  // generated); the other calls stay valid and print nothing.
  void stop();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // What is being done: "loading weights", "run 3/5". Shown before the call's position.
  void stage(std::string text);
  // The calls about to run (the step counts per phase come from them); then each call as it
  // starts (ProgressProvider does this).
  void begin_calls(std::span<const Call> calls);
  void at(const Call& call);
  void end_calls();

  // The line as it would be printed now (tests).
  std::string line() const;

 private:
  void loop();

  std::string command_;
  bool tty_ = false;
  std::chrono::steady_clock::time_point start_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::string stage_;
  bool in_calls_ = false;
  Call call_{};
  int64_t call_index_ = 0;  // within its phase (vision and prefill: groups; else steps)
  std::array<int64_t, kPhaseCount> phase_total_{};
  std::array<int64_t, kPhaseCount> phase_seen_{};
  bool printed_ = false;
  std::thread thread_;
};

// A GroupProvider decorator that tells a Progress which call runs (as OpTimingProvider labels
// ops): the executor and the models stay unaware of progress reporting.
class ProgressProvider final : public GroupProvider {
 public:
  ProgressProvider(GroupProvider& inner, Progress& progress) : inner_(inner), progress_(progress) {}

  Status begin(Stream& stream, std::span<const Call> calls) override {
    progress_.begin_calls(calls);
    return inner_.begin(stream, calls);
  }
  Result<void*> acquire(Stream& stream, const Call& call) override {
    progress_.at(call);
    return inner_.acquire(stream, call);
  }
  Status release(Stream& stream, const Call& call) override { return inner_.release(stream, call); }
  Status skip_to(Stream& stream, size_t next) override { return inner_.skip_to(stream, next); }
  Status end_run(Stream& stream) override { return inner_.end_run(stream); }

 private:
  GroupProvider& inner_;
  Progress& progress_;
};

}  // namespace ferry::cli
