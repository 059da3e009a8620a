// The host engine (issue 26): worker threads pinned to physical cores that compute batch-1 GEMVs
// straight from host memory (the registered read-only mapping of a checkpoint, or any host tier)
// in the fixed order of backend/gemv_order.h, so their dot products are the bits the GPU's
// linear_gemv and the CPU backend give. Rows are split into tasks of kHostGemvRows rows taken in
// turn by the workers; a row is never split along K, so the split changes no bit.
//
// A job hands back fp32 dot products only; the epilogue (bias, activation, rounding) runs where
// the output lives (ops.h Linear, gemv_order.h).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "backend/gemv_order.h"
#include "core/status.h"
#include "host/cpu_topology.h"

namespace ferry {

inline constexpr int64_t kHostGemvRows = 64;  // rows per task

// out[r] = dot(x, row r of w) for r in [0, n): x [k] bf16, w rows of k bf16 at stride ldw
// elements, out [n] fp32. The memory stays valid and unchanged until `done` has been called.
struct HostGemvJob {
  const uint16_t* x = nullptr;
  const uint16_t* w = nullptr;
  int64_t ldw = 0;
  int64_t n = 0;
  int64_t k = 0;
  float* out = nullptr;
  // Called once, by the worker that finishes the job's last task (or by submit for an empty or
  // refused job), after every product is written: item 3 sets the GPU's host-mapped flag here.
  std::function<void(Status)> done;
};

struct HostGemvOptions {
  int threads = 0;                // 0: default_host_threads of the host's topology
  bool pin = true;                // pin worker i to worker_cores(topology, threads)[i]
  GemvIsa isa = gemv_best_isa();  // an engine this CPU does not run falls back to scalar
  // Tests: called by a worker before each task (random delays, so a missing wait shows).
  std::function<void(int worker)> before_task;
};

class HostGemv {
 public:
  // Starts the workers. Pinning that the system refuses is not an error (pinned() says so).
  static Result<std::unique_ptr<HostGemv>> create(const HostGemvOptions& options);
  ~HostGemv();  // finishes every submitted job, then joins the workers
  HostGemv(const HostGemv&) = delete;
  HostGemv& operator=(const HostGemv&) = delete;

  // Enqueues a job; returns at once. Jobs run in submission order, each spread over all workers.
  void submit(HostGemvJob job);
  // Runs a job and waits for it.
  Status run(const uint16_t* x, const uint16_t* w, int64_t ldw, int64_t n, int64_t k, float* out);

  int threads() const { return static_cast<int>(workers_.size()); }
  GemvIsa isa() const { return isa_; }
  bool pinned() const { return pinned_; }
  const std::vector<CpuCore>& cores() const { return cores_; }

 private:
  struct Active;  // a job being worked on: its tasks and how many are left
  explicit HostGemv(const HostGemvOptions& options);
  void worker_loop(int index);

  GemvIsa isa_;
  bool pinned_ = false;
  std::vector<CpuCore> cores_;
  std::function<void(int)> before_task_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Active>> queue_;  // front: the job the workers take tasks from
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace ferry
