// Streams and events of the CPU backend (internal to backend/cpu).
//
// A stream is one worker thread consuming a queue of closures in order. An event is a generation
// counter: record() bumps `recorded` and enqueues a marker that raises `completed` to that
// generation when it runs; a wait enqueues a closure that blocks its stream until `completed`
// reaches the generation recorded at the time of the wait call. `completed` only grows, so an
// event re-recorded on a second stream before the first record ran counts as complete for both
// once the later one runs (CUDA events have the same last-record-wins meaning). A timing event
// also keeps the steady_clock time at which its latest generation's marker ran.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "backend/backend.h"

namespace ferry::cpu {

class CpuStream final : public Stream {
 public:
  // max_delay_us > 0: sleep a random 0..max_delay_us (from `seed`) before each item.
  CpuStream(int max_delay_us, uint64_t seed);
  ~CpuStream() override;  // finishes every queued item, then joins the thread
  CpuStream(const CpuStream&) = delete;
  CpuStream& operator=(const CpuStream&) = delete;

  // Items run in enqueue order on the stream's thread. A failed item's error is kept (the
  // first one) and returned by synchronize(); later items still run, so events still fire.
  void enqueue(std::function<Status()> item);
  // Blocks until every item enqueued so far has run; returns and clears the stored error.
  Status synchronize();

  // Recording (Backend::begin_capture): while on, enqueue() appends to the recording instead of
  // the queue. fail_capture() marks a call that cannot be recorded; end_capture() returns the
  // first such error or the recorded items.
  Status begin_capture();
  Result<std::vector<std::function<Status()>>> end_capture();
  bool capturing() const;
  void fail_capture(Error error);

 private:
  void loop();

  mutable std::mutex mutex_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  std::deque<std::function<Status()>> queue_;
  uint64_t enqueued_ = 0;
  uint64_t completed_ = 0;
  std::optional<Error> error_;
  std::optional<std::vector<std::function<Status()>>> recording_;
  std::optional<Error> capture_error_;
  bool stopping_ = false;
  int max_delay_us_ = 0;
  std::mt19937_64 rng_;
  std::thread thread_;  // last: starts after every other member is ready
};

// Shared by the event and the markers and waits that refer to it, so an event may be destroyed
// while work referring to it is still queued.
struct EventState {
  std::mutex mutex;
  std::condition_variable cv;
  uint64_t recorded = 0;   // generation of the latest record()
  uint64_t completed = 0;  // highest generation whose marker has run
  // Timing events: when the marker of generation `completed` ran, read on the stream's thread.
  bool timing = false;
  std::chrono::steady_clock::time_point completed_at{};
};

class CpuEvent final : public Event {
 public:
  explicit CpuEvent(bool timing = false) : state_(std::make_shared<EventState>()) {
    state_->timing = timing;
  }
  const std::shared_ptr<EventState>& state() const { return state_; }

 private:
  std::shared_ptr<EventState> state_;
};

}  // namespace ferry::cpu
