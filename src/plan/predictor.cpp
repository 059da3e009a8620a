#include "plan/predictor.h"

#include <algorithm>

namespace ferry {
namespace {

constexpr int kMaxSlots = 64;  // validate_plan's limit

// Walks the calls once, handing each call's timing to `on_call(i, timing, ready)` where `ready`
// is when the call could have started had its copy been there. Returns the total latency.
template <class OnCall>
double simulate(const Schedule& s, const Plan& plan, OnCall&& on_call) {
  const int slots = std::clamp(plan.slots, 1, kMaxSlots);
  const bool sequential = plan.mode == StreamMode::sequential;
  std::array<double, kMaxSlots> slot_free{};  // compute end of each slot's last user
  double host_clock = 0;
  double prev_end = 0;
  double copy_free = 0;
  int64_t k = 0;
  for (size_t i = 0; i < s.calls.size(); ++i) {
    const size_t g = static_cast<size_t>(s.calls[i].group);
    CallTiming t;
    host_clock += s.launch_s;
    t.enqueued = host_clock;
    const double ready = std::max(prev_end, t.enqueued);
    t.compute_start = ready;
    const bool streamed = plan.placement[g] == Placement::streamed;
    if (streamed) {
      t.slot = static_cast<int>(k % slots);
      double start = std::max(copy_free, slot_free[static_cast<size_t>(t.slot)]);
      if (sequential) start = std::max(start, prev_end);
      t.copy_start = start;
      t.copy_end = start + s.dma_s[g];
      copy_free = t.copy_end;
      t.compute_start = std::max(ready, t.copy_end);
      ++k;
    }
    t.compute_end = t.compute_start + s.exe_s[i];
    if (streamed) slot_free[static_cast<size_t>(t.slot)] = t.compute_end;
    prev_end = t.compute_end;
    t.finished = t.compute_end;
    if (s.host_after[i] != HostStep::none) {
      host_clock = std::max(host_clock, t.compute_end) + s.host_after_s[i];
      t.finished = host_clock;
    }
    on_call(i, t, ready);
  }
  return std::max(prev_end, host_clock);
}

// Time during which both engines were busy: the intersection of two sorted lists of disjoint
// intervals.
double overlap(const std::vector<std::pair<double, double>>& a,
               const std::vector<std::pair<double, double>>& b) {
  double total = 0;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const double lo = std::max(a[i].first, b[j].first);
    const double hi = std::min(a[i].second, b[j].second);
    if (hi > lo) total += hi - lo;
    if (a[i].second < b[j].second) {
      ++i;
    } else {
      ++j;
    }
  }
  return total;
}

}  // namespace

double predict_total_s(const Schedule& schedule, const Plan& plan) {
  return simulate(schedule, plan, [](size_t, const CallTiming&, double) {});
}

Prediction predict_unchecked(const Schedule& schedule, const Plan& plan,
                             std::vector<CallTiming>* trace) {
  Prediction p;
  std::vector<std::pair<double, double>> copies, computes;
  computes.reserve(schedule.calls.size());
  if (trace != nullptr) trace->assign(schedule.calls.size(), CallTiming{});
  // `finished` never decreases along the calls (a call after a host step cannot start before
  // it), so each call's phase gets the time from the previous call's finish to its own.
  double last_finished = 0;
  p.total_s = simulate(schedule, plan, [&](size_t i, const CallTiming& t, double ready) {
    const Call& c = schedule.calls[i];
    const size_t g = static_cast<size_t>(c.group);
    PhaseTime& ph = p.phases[phase_index(c.phase)];
    ph.wall_s += t.finished - last_finished;
    last_finished = t.finished;
    ++ph.calls;
    ph.compute_s += schedule.exe_s[i];
    ph.host_s += schedule.host_after_s[i];
    if (t.copy_end >= 0) {
      ph.copy_s += schedule.dma_s[g];
      ph.link_bytes += schedule.bytes[g];
      ph.stall_s += t.compute_start - ready;
      copies.emplace_back(t.copy_start, t.copy_end);
    }
    computes.emplace_back(t.compute_start, t.compute_end);
    if (trace != nullptr) (*trace)[i] = t;
  });
  for (const PhaseTime& ph : p.phases) {
    p.link_bytes += ph.link_bytes;
    p.copy_busy_s += ph.copy_s;
    p.compute_busy_s += ph.compute_s;
    p.host_s += ph.host_s;
    p.stall_s += ph.stall_s;
  }
  p.copies = static_cast<int64_t>(copies.size());
  p.hidden_copy_s = overlap(copies, computes);
  p.hidden_fraction = p.copy_busy_s > 0 ? p.hidden_copy_s / p.copy_busy_s : 1.0;
  return p;
}

Result<Prediction> predict(const ModelWeights& weights, const Schedule& schedule, const Plan& plan,
                           std::vector<CallTiming>* trace) {
  FERRY_RETURN_IF_ERROR(validate_plan(plan, weights));
  if (schedule.group_count() != weights.groups.size()) {
    return make_error(ErrorCode::invalid_argument,
                      "predict: the schedule was built for a model of " +
                          std::to_string(schedule.group_count()) + " groups, not " +
                          std::to_string(weights.groups.size()));
  }
  return predict_unchecked(schedule, plan, trace);
}

}  // namespace ferry
