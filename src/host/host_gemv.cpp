#include "host/host_gemv.h"

#include <algorithm>
#include <future>
#include <string>
#include <utility>

namespace ferry {

struct HostGemv::Active {
  HostGemvJob job;
  int64_t tasks = 0;
  std::atomic<int64_t> next{0};  // the next task to take
  std::atomic<int64_t> left{0};  // tasks not yet finished
};

namespace {

constexpr int kMaxThreads = 1024;

Status check_job(const HostGemvJob& j) {
  if (j.k < 0 || j.ldw < j.k || (j.n > 1 && j.ldw == 0)) {
    return make_error(ErrorCode::invalid_argument,
                      "host gemv: row stride " + std::to_string(j.ldw) +
                          " is shorter than K = " + std::to_string(j.k));
  }
  if (j.x == nullptr || j.w == nullptr || j.out == nullptr) {
    return make_error(ErrorCode::invalid_argument, "host gemv: a null x, w or out");
  }
  return Status();
}

}  // namespace

HostGemv::HostGemv(const HostGemvOptions& options)
    : isa_(gemv_isa_supported(options.isa) ? options.isa : GemvIsa::scalar),
      before_task_(options.before_task) {}

Result<std::unique_ptr<HostGemv>> HostGemv::create(const HostGemvOptions& options) {
  if (options.threads < 0 || options.threads > kMaxThreads) {
    return make_error(ErrorCode::invalid_argument, "host gemv: " + std::to_string(options.threads) +
                                                       " threads (0 for the default, at most " +
                                                       std::to_string(kMaxThreads) + ")");
  }
  std::unique_ptr<HostGemv> engine(new HostGemv(options));
  const CpuTopology topology = host_cpu_topology();
  const int threads = options.threads > 0 ? options.threads : default_host_threads(topology);
  engine->cores_ = worker_cores(topology, threads);
  bool all_pinned = options.pin && static_cast<int>(engine->cores_.size()) == threads;
  engine->workers_.reserve(static_cast<size_t>(threads));
  for (int i = 0; i < threads; ++i) {
    HostGemv* self = engine.get();
    engine->workers_.emplace_back([self, i] { self->worker_loop(i); });
    if (options.pin && i < static_cast<int>(engine->cores_.size())) {
      all_pinned =
          pin_thread_to(engine->workers_.back(), engine->cores_[static_cast<size_t>(i)].cpu) &&
          all_pinned;
    }
  }
  engine->pinned_ = all_pinned;
  return engine;
}

HostGemv::~HostGemv() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void HostGemv::submit(HostGemvJob job) {
  if (job.n <= 0) {
    if (job.done) job.done(Status());
    return;
  }
  if (Status st = check_job(job); !st.ok()) {
    if (job.done) job.done(std::move(st));
    return;
  }
  auto a = std::make_shared<Active>();
  a->tasks = (job.n + kHostGemvRows - 1) / kHostGemvRows;
  a->left.store(a->tasks);
  a->job = std::move(job);
  {
    std::lock_guard lock(mu_);
    queue_.push_back(std::move(a));
  }
  cv_.notify_all();
}

Status HostGemv::run(const uint16_t* x, const uint16_t* w, int64_t ldw, int64_t n, int64_t k,
                     float* out) {
  std::promise<Status> finished;
  std::future<Status> result = finished.get_future();
  submit({x, w, ldw, n, k, out, [&finished](Status st) { finished.set_value(std::move(st)); }});
  return result.get();
}

void HostGemv::worker_loop(int index) {
  for (;;) {
    std::shared_ptr<Active> a;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and every job is taken
      a = queue_.front();
    }
    const int64_t t = a->next.fetch_add(1);
    if (t >= a->tasks) {
      // Every task of the front job is taken (others may still be computing theirs): move on.
      std::lock_guard lock(mu_);
      if (!queue_.empty() && queue_.front() == a) queue_.pop_front();
      continue;
    }
    if (before_task_) before_task_(index);
    const HostGemvJob& j = a->job;
    const int64_t r0 = t * kHostGemvRows;
    const int64_t rows = std::min(kHostGemvRows, j.n - r0);
    gemv_fixed_order(isa_, j.x, j.w + r0 * j.ldw, j.ldw, rows, j.k, j.out + r0);
    if (a->left.fetch_sub(1, std::memory_order_acq_rel) == 1 && j.done) j.done(Status());
  }
}

}  // namespace ferry
