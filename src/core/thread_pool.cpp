#include "core/thread_pool.h"

#include <algorithm>
#include <atomic>

namespace ferry {

// One parallel_for call: ranges are claimed through `next`; `pending` counts unfinished ranges.
struct ThreadPool::Job {
  const std::function<void(int64_t, int64_t)>* fn = nullptr;
  int64_t n = 0;
  int64_t chunk = 1;
  int64_t num_chunks = 0;
  std::atomic<int64_t> next{0};
  std::mutex mutex;
  std::condition_variable done_cv;
  int64_t finished = 0;  // guarded by mutex
};

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_ranges(Job& job) {
  int64_t done = 0;
  for (;;) {
    const int64_t c = job.next.fetch_add(1);
    if (c >= job.num_chunks) break;
    const int64_t begin = c * job.chunk;
    (*job.fn)(begin, std::min(job.n, begin + job.chunk));
    ++done;
  }
  if (done > 0) {
    std::lock_guard lock(job.mutex);
    job.finished += done;
    if (job.finished == job.num_chunks) job.done_cv.notify_all();
  }
}

void ThreadPool::worker_loop() {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_ && queue_.empty()) return;
      job = queue_.front();
      // Leave the job queued while ranges remain, so other idle workers join it.
      if (job->next.load() + 1 >= job->num_chunks) queue_.pop_front();
    }
    run_ranges(*job);
    {
      std::lock_guard lock(mutex_);
      auto it = std::find(queue_.begin(), queue_.end(), job);
      if (it != queue_.end() && job->next.load() >= job->num_chunks) queue_.erase(it);
    }
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t max_chunks = (n + grain - 1) / grain;
  // A few ranges per thread balance uneven work without much queueing overhead.
  const int64_t want = std::min<int64_t>(max_chunks, 4 * static_cast<int64_t>(threads()));
  if (want <= 1 || workers_.empty()) {
    fn(0, n);
    return;
  }
  auto job = std::make_shared<Job>();
  job->fn = &fn;
  job->n = n;
  job->chunk = (n + want - 1) / want;
  job->num_chunks = (n + job->chunk - 1) / job->chunk;
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(job);
  }
  cv_.notify_all();
  run_ranges(*job);
  {
    std::unique_lock lock(job->mutex);
    job->done_cv.wait(lock, [&] { return job->finished == job->num_chunks; });
  }
  std::lock_guard lock(mutex_);
  auto it = std::find(queue_.begin(), queue_.end(), job);
  if (it != queue_.end()) queue_.erase(it);
}

void parallel_for(ThreadPool* pool, int64_t n, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn) {
  if (pool == nullptr) {
    if (n > 0) fn(0, n);
    return;
  }
  pool->parallel_for(n, grain, fn);
}

}  // namespace ferry
