// What a model's runner and the executor agree on: the handler a runner gives the executor for
// one inference (the model side of each call), the options and per-phase times of a walk over a
// call sequence, the recorded calls kept across walks, and the walker a runner is handed to run
// its calls (exec/executor.h implements it over a GroupProvider). The runner never learns where a
// group's bytes come from.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <numeric>
#include <span>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"
#include "model/call_sequence.h"
#include "model/weights.h"

namespace ferry {

// The model side: enqueues one call's work, then runs the host step that follows it.
class CallHandler {
 public:
  virtual ~CallHandler() = default;
  virtual Status run_call(Stream& stream, const Call& call, const WeightGroup& group,
                          void* base) = 0;

  // Enqueues the inference's inputs that the calls read from the host (the images' pixels) on
  // `stream`, before the first call. The executor runs it after the provider's begin() and before
  // the first acquire(): a provider that copies on a stream of its own starts the inference's
  // copies after it, so the inputs cross the link alone instead of sharing it with copies.
  virtual Status upload_inputs(Stream& /*stream*/) { return {}; }

  // Host work that reads the call's results (sampling after the LM head's last chunk, the Euler
  // update after expert.out); it may synchronize. The executor calls it after releasing the
  // call's group, so the copies of the groups that follow are already enqueued and run while the
  // host waits here: prefetch crosses step boundaries.
  virtual Status host_step(Stream& /*stream*/, const Call& /*call*/, const WeightGroup& /*group*/) {
    return {};
  }

  // True promises that run_call(call) only enqueues backend work on `stream` (no host copy, no
  // synchronization, no host state that later calls depend on), and that every pointer, shape and
  // parameter of that work is a function of (call.group, base, call.phase) alone: what changes
  // from one such call to the next lives in device memory. The executor may then record the work
  // once and replay it for every later call with the same key instead of calling run_call.
  virtual bool replayable(const Call& /*call*/, const WeightGroup& /*group*/) const {
    return false;
  }

  // Asked after each host step for the calls that follow, in order: true skips `call` (the call
  // sequence is built for the most tokens a run may generate; a generation that stops early
  // skips the decode calls left). The executor then tells the provider where it continues.
  virtual bool skip(const Call& /*call*/) const { return false; }
};

struct ExecOptions {
  // Record replayable calls once per (group, base, phase) and replay them (CUDA graphs): one
  // launch per call instead of one per op.
  bool graphs = true;
};

struct PhaseTimes {
  // Indexed by Phase (phase_index): wall time, synchronized at boundaries.
  std::array<double, kPhaseCount> seconds{};
  std::array<int64_t, kPhaseCount> calls{};
  std::array<int64_t, kPhaseCount> recorded{};  // calls recorded into a new graph
  std::array<int64_t, kPhaseCount> replayed{};  // calls run by replaying a graph recorded earlier
  // Host time spent recording and instantiating graphs.
  std::array<double, kPhaseCount> record_seconds{};
  double total_seconds = 0.0;

  double of(Phase p) const { return seconds[static_cast<size_t>(p)]; }
  // Over every phase.
  int64_t recorded_calls() const {
    return std::accumulate(recorded.begin(), recorded.end(), int64_t{0});
  }
  int64_t replayed_calls() const {
    return std::accumulate(replayed.begin(), replayed.end(), int64_t{0});
  }
  double record_time() const {
    return std::accumulate(record_seconds.begin(), record_seconds.end(), 0.0);
  }
};

// Recorded calls, by what their work depends on: (group, base, phase). Kept across executions
// by a session whose buffers stay put, so each call is recorded once per placement and replayed
// by every later inference.
class GraphCache {
 public:
  struct Key {
    int group;
    const void* base;
    Phase phase;
    bool operator==(const Key&) const = default;
  };
  const Graph* find(const Key& key) const;
  const Graph* add(const Key& key, std::unique_ptr<Graph> graph);
  size_t size() const { return entries_.size(); }
  void clear() { entries_.clear(); }
  // Forgets the recordings of one phase (their work no longer fits what the next run needs).
  void drop(Phase phase) {
    std::erase_if(entries_, [phase](const auto& e) { return e.first.phase == phase; });
  }

 private:
  // A few hundred entries at most (groups × phases × slots), looked up once per call: a list.
  std::vector<std::pair<Key, std::unique_ptr<Graph>>> entries_;
};

// Walks a call sequence for a runner: each call's group placed on the device, handed to the
// handler with its address, the host step after it; phase times measured at the boundaries.
class CallWalker {
 public:
  virtual ~CallWalker() = default;
  virtual Result<PhaseTimes> walk(Stream& stream, std::span<const Call> calls, CallHandler& handler,
                                  const ExecOptions& options) = 0;
  // Recorded calls kept across walks (null: recorded for one walk only); a handler may drop the
  // recordings its next calls can no longer replay.
  virtual GraphCache* graphs() = 0;
};

}  // namespace ferry
