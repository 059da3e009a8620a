// A small fixed pool of worker threads: the CPU backend splits one op over rows, columns or
// heads with it, the planner prices a round of candidate plans.
//
// parallel_for(n, grain, fn) calls fn(begin, end) on disjoint ranges covering [0, n); the caller
// runs ranges too, so a pool of `threads` uses threads - 1 workers. Several threads (e.g. the
// worker threads of several streams) may call parallel_for at the same time. The op
// implementations only split over independent outputs and never split a reduction, so their
// results do not depend on the thread count.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace ferry {

class ThreadPool {
 public:
  // threads <= 0: std::thread::hardware_concurrency().
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs fn over [0, n) in ranges of at least `grain` items (the last may be shorter) and returns
  // when every range has finished. fn must not call parallel_for itself.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  struct Job;
  void worker_loop();
  static void run_ranges(Job& job);

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

// Runs fn over [0, n) on the pool, or inline on the calling thread when pool is null.
void parallel_for(ThreadPool* pool, int64_t n, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn);

}  // namespace ferry
