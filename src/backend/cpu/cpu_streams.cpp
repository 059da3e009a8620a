#include "backend/cpu/cpu_streams.h"

#include <chrono>

namespace ferry::cpu {

CpuStream::CpuStream(int max_delay_us, uint64_t seed)
    : max_delay_us_(max_delay_us), rng_(seed), thread_([this] { loop(); }) {}

CpuStream::~CpuStream() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  thread_.join();
}

void CpuStream::enqueue(std::function<Status()> item) {
  {
    std::lock_guard lock(mutex_);
    if (recording_) {
      recording_->push_back(std::move(item));
      return;
    }
    queue_.push_back(std::move(item));
    ++enqueued_;
  }
  work_cv_.notify_one();
}

Status CpuStream::synchronize() {
  std::unique_lock lock(mutex_);
  const uint64_t target = enqueued_;
  done_cv_.wait(lock, [&] { return completed_ >= target; });
  if (!error_) return Status();
  Error e = std::move(*error_);
  error_.reset();
  return e;
}

Status CpuStream::begin_capture() {
  std::lock_guard lock(mutex_);
  if (recording_)
    return make_error(ErrorCode::invalid_argument, "cpu: stream is already capturing");
  recording_.emplace();
  capture_error_.reset();
  return Status();
}

Result<std::vector<std::function<Status()>>> CpuStream::end_capture() {
  std::lock_guard lock(mutex_);
  if (!recording_) return make_error(ErrorCode::invalid_argument, "cpu: stream is not capturing");
  std::vector<std::function<Status()>> items = std::move(*recording_);
  recording_.reset();
  if (capture_error_) {
    Error e = std::move(*capture_error_);
    capture_error_.reset();
    return e;
  }
  return items;
}

bool CpuStream::capturing() const {
  std::lock_guard lock(mutex_);
  return recording_.has_value();
}

void CpuStream::fail_capture(Error error) {
  std::lock_guard lock(mutex_);
  if (!capture_error_) capture_error_ = std::move(error);
}

void CpuStream::loop() {
  for (;;) {
    std::function<Status()> item;
    {
      std::unique_lock lock(mutex_);
      work_cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    if (max_delay_us_ > 0) {
      std::uniform_int_distribution<int> dist(0, max_delay_us_);
      std::this_thread::sleep_for(std::chrono::microseconds(dist(rng_)));
    }
    Status status = item();
    {
      std::lock_guard lock(mutex_);
      if (!status.ok() && !error_) error_ = status.error();
      ++completed_;
    }
    done_cv_.notify_all();
  }
}

}  // namespace ferry::cpu
