#include "exec/runner.h"

#include <chrono>
#include <string>

namespace ferry {

Result<PhaseTimes> execute(Backend& backend, Stream& stream, const ModelWeights& weights,
                           std::span<const Call> calls, GroupProvider& provider,
                           CallHandler& handler) {
  using clock = std::chrono::steady_clock;
  PhaseTimes times;
  const auto start = clock::now();
  auto phase_start = start;
  for (size_t i = 0; i < calls.size(); ++i) {
    const Call& c = calls[i];
    if (c.group < 0 || static_cast<size_t>(c.group) >= weights.groups.size()) {
      return make_error(ErrorCode::internal,
                        "execute: call " + std::to_string(i) + " names no group");
    }
    const WeightGroup& g = weights.groups[static_cast<size_t>(c.group)];
    FERRY_ASSIGN_OR_RETURN(void* base, provider.acquire(stream, c));
    Status st = handler.run_call(stream, c, g, base);
    if (!st.ok()) {
      return make_error(st.error().code, std::string(phase_name(c.phase)) + " step " +
                                             std::to_string(c.step) + ", " + g.name + ": " +
                                             st.error().message);
    }
    FERRY_RETURN_IF_ERROR(provider.release(stream, c));
    ++times.calls[static_cast<size_t>(c.phase)];
    const bool phase_ends = i + 1 == calls.size() || calls[i + 1].phase != c.phase;
    if (phase_ends) {
      FERRY_RETURN_IF_ERROR(backend.synchronize(stream));
      const auto now = clock::now();
      times.seconds[static_cast<size_t>(c.phase)] +=
          std::chrono::duration<double>(now - phase_start).count();
      phase_start = now;
    }
  }
  times.total_seconds = std::chrono::duration<double>(clock::now() - start).count();
  return times;
}

}  // namespace ferry
