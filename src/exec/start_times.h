// Where the time from process start to the first inference ready goes (issue 11, "fast start"):
// the caller's steps (the CLI's: config, checkpoint, backend) and Session::open's, each timed on
// the thread that opens the session, plus the host registration, which runs beside them on
// threads of its own (host/host_registrar.h). `run --json` and `bench --json` print it as
// "start"; docs/byte_paths.md says what each part covers.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ferry {

struct StartTimes {
  // Before main: the dynamic loader (the CUDA libraries), static initializers. From the kernel's
  // process start time (/proc/self/stat, 10 ms ticks); negative when unknown. Not in total_s.
  double before_main_s = -1.0;

  // The caller's steps, in order (zero where the caller has none).
  double config_s = 0.0;      // config.json read, the weight table built
  double checkpoint_s = 0.0;  // shards mapped, headers parsed and checked, names bound
  double backend_s = 0.0;     // the backend made (CUDA: driver, context, cuBLASLt, NVML)
  std::vector<std::pair<std::string, double>> backend_parts;  // Backend::creation_seconds()
  double machine_limits_s = 0.0;  // `bench` only: the GEMM peak and copy rates, measured first

  // Session::open's steps, in order; open_s is their sum and the checks between them.
  double tier_s = 0.0;           // HostTier::open: the first piece registered, the rest started (or
                                 // the bounce ring made)
  double compress_s = 0.0;       // every group encoded (SessionOptions::compress_at_open)
  double plan_s = 0.0;           // measure pass, profile, planner, budget check
  double plan_context_s = 0.0;   // of plan_s: the measure pass, call sequence, profile, schedule
  double plan_choose_s = 0.0;    // of plan_s: the planner's search, budget check, prediction
  int64_t plan_evaluations = 0;  // the planner's predictor runs
  double reserve_s = 0.0;        // the budget's region reserved, the compute stream made
  double upload_s = 0.0;         // the resident groups copied in: first enqueue to completion
  double upload_wait_s = 0.0;    // of upload_s: waiting for pieces to be registered
  uint64_t upload_bytes = 0;     // the resident groups' bytes
  double register_wait_s = 0.0;  // after the upload: waiting for the rest of the registration
  double slots_s = 0.0;          // copy lists, the slot ring, the host path's rate probe
  double link_check_s = 0.0;     // the link check (SessionPlan::link_check)
  double fallback_s = 0.0;  // a registration refused part-way: the attempt, release, replanning
  double runner_s = 0.0;    // activation buffers, KV cache, page-locked inputs
  double open_s = 0.0;

  // The registration, beside the steps from tier_s to register_wait_s.
  double register_s = 0.0;        // the first piece's call to the last one's end
  double register_calls_s = 0.0;  // the calls' own times, summed (more than register_s on threads)
  int64_t register_pieces = 0;
  int register_threads = 0;  // 0: every piece registered by HostTier::open
  uint64_t register_bytes = 0;

  // What the host tier found when it opened (host/page_cache.h): the weights files' bytes, those
  // in the page cache, the host's MemAvailable (0: unknown).
  uint64_t files_bytes = 0;
  uint64_t cached_bytes = 0;
  uint64_t available_bytes = 0;

  double total_s = 0.0;  // main's first line to the first inference ready

  // What the opening thread waited for the registration: its first piece (in tier_s), the waits
  // in the upload and after it. The registration's time not spent waiting ran under other work.
  double register_blocked_s() const;
  double register_hidden_s() const;
  // total_s less every step above: argument parsing, the workload and call sequence, inputs.
  double other_s() const;
  // Copies Session::open's part (tier_s .. open_s and the registration) from `session`.
  void take_session(const StartTimes& session);
};

// The process's start on the steady clock, and before_main_s: call first in main.
void mark_process_start();
// Seconds since mark_process_start() (since the first call of either when it was never called).
double seconds_since_process_start();
// before_main_s as mark_process_start() measured it (negative when unknown or not marked).
double seconds_before_main();

}  // namespace ferry
