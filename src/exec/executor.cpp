#include "exec/executor.h"

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace ferry {

namespace {

// Records run_call's work on `stream` into a graph. The capture is ended whatever the handler
// returns, so the stream is usable afterwards.
Result<std::unique_ptr<Graph>> record_call(Backend& backend, Stream& stream, CallHandler& handler,
                                           const Call& call, const WeightGroup& group, void* base) {
  FERRY_RETURN_IF_ERROR(backend.begin_capture(stream));
  const Status body = handler.run_call(stream, call, group, base);
  Result<std::unique_ptr<Graph>> graph = backend.end_capture(stream);
  if (!body.ok()) return body.error();
  return graph;
}

}  // namespace

Result<PhaseTimes> execute(Backend& backend, Stream& stream, const ModelWeights& weights,
                           std::span<const Call> calls, GroupProvider& provider,
                           CallHandler& handler, const ExecOptions& options, GraphCache* kept) {
  using clock = std::chrono::steady_clock;
  GraphCache local;
  GraphCache& graphs = kept != nullptr ? *kept : local;
  PhaseTimes times;
  const auto start = clock::now();
  auto phase_start = start;
  FERRY_RETURN_IF_ERROR(provider.begin(stream, calls));
  FERRY_RETURN_IF_ERROR(handler.upload_inputs(stream));
  for (size_t i = 0; i < calls.size(); ++i) {
    const Call& c = calls[i];
    if (c.group < 0 || static_cast<size_t>(c.group) >= weights.groups.size()) {
      return make_error(ErrorCode::internal,
                        "execute: call " + std::to_string(i) + " names no group");
    }
    const WeightGroup& g = weights.groups[static_cast<size_t>(c.group)];
    FERRY_ASSIGN_OR_RETURN(void* base, provider.acquire(stream, c));
    Status st;
    const auto phase = static_cast<size_t>(c.phase);
    if (options.graphs && handler.replayable(c, g)) {
      const GraphCache::Key key{c.group, base, c.phase};
      const Graph* graph = graphs.find(key);
      if (graph != nullptr) {
        ++times.replayed[phase];
      } else {
        const auto record_start = clock::now();
        Result<std::unique_ptr<Graph>> recorded = record_call(backend, stream, handler, c, g, base);
        times.record_seconds[phase] +=
            std::chrono::duration<double>(clock::now() - record_start).count();
        if (recorded.ok()) {
          graph = graphs.add(key, std::move(recorded).value());
          ++times.recorded[phase];
        } else {
          st = recorded.status();
        }
      }
      if (st.ok()) st = backend.launch(stream, *graph);
    } else {
      st = handler.run_call(stream, c, g, base);
    }
    if (!st.ok()) {
      return make_error(st.error().code, std::string(phase_name(c.phase)) + " step " +
                                             std::to_string(c.step) + ", " + g.name + ": " +
                                             st.error().message);
    }
    FERRY_RETURN_IF_ERROR(provider.release(stream, c));
    st = handler.host_step(stream, c, g);
    if (!st.ok()) {
      return make_error(st.error().code, std::string(phase_name(c.phase)) + " step " +
                                             std::to_string(c.step) + ", " + g.name + ": " +
                                             st.error().message);
    }
    ++times.calls[static_cast<size_t>(c.phase)];
    size_t next = i + 1;
    while (next < calls.size() && handler.skip(calls[next])) ++next;
    if (next != i + 1) FERRY_RETURN_IF_ERROR(provider.skip_to(stream, next));
    const bool phase_ends = next == calls.size() || calls[next].phase != c.phase;
    if (phase_ends) {
      FERRY_RETURN_IF_ERROR(backend.synchronize(stream));
      const auto now = clock::now();
      times.seconds[static_cast<size_t>(c.phase)] +=
          std::chrono::duration<double>(now - phase_start).count();
      phase_start = now;
    }
    i = next - 1;
  }
  FERRY_RETURN_IF_ERROR(provider.end_run(stream));
  times.total_seconds = std::chrono::duration<double>(clock::now() - start).count();
  return times;
}

Result<InferenceResult> run_inference(Backend& backend, const ModelConfig& config,
                                      const ModelWeights& weights, GroupProvider& provider,
                                      const Workload& workload, const InferenceOptions& options,
                                      const ModelInputs* inputs) {
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<ModelRunner> runner,
                         create_runner(backend, config, weights, workload, options));
  if (inputs != nullptr) FERRY_RETURN_IF_ERROR(runner->set_inputs(*inputs));
  auto stream = backend.create_stream();
  Executor executor(backend, weights, provider, nullptr);
  return runner->run(*stream, executor);
}

}  // namespace ferry
