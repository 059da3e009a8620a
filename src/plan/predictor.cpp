#include "plan/predictor.h"

#include <algorithm>
#include <array>

#include "plan/lent_cache.h"

namespace ferry {
namespace {

using Intervals = std::vector<std::pair<double, double>>;

// The end of a call (or a host step) that starts at `start` and needs `alone` seconds with the
// link idle and `copying` seconds with a copy running the whole time: it progresses at 1/alone
// outside the copy intervals and at 1/copying inside them. `copies[from, to)` are the copy
// engine's scheduled intervals, in time order and disjoint.
double end_of_work(double start, double alone, double copying, const Intervals& copies, size_t from,
                   size_t to) {
  if (copying == alone) return start + alone;
  double t = start;
  double left = 1;  // the fraction of the call's work still to do
  for (size_t j = from; j < to; ++j) {
    const auto [a, b] = copies[j];
    if (b <= t) continue;
    if (a > t) {  // the link idle until this copy starts
      const double done = (a - t) / alone;
      if (done >= left) return t + left * alone;
      left -= done;
      t = a;
    }
    const double done = (b - t) / copying;
    if (done >= left) return t + left * copying;
    left -= done;
    t = b;
  }
  return t + left * alone;
}

// Walks the calls once, handing each call's timing to `on_call(i, timing, ready)` where `ready`
// is when the call could have started had its copy been there. Returns the total latency.
//
// Pipelined mode schedules each copy (plan/lent_cache.h's CopyOrder: ring copies and lent-cache
// fills, in call order) as soon as what it waits for is known (the copy before it and the call
// whose compute frees its destination), which can be before its own call: the copies of later
// calls that run while a call computes are then known, and the call computes at its copying
// rate for that time. A copy that waits for this call or a later one starts after this call
// ends, so every copy that can overlap a call is scheduled by the time it computes.
template <class OnCall>
double simulate(const Schedule& s, const Plan& plan, OnCall&& on_call) {
  const bool sequential = plan.mode == StreamMode::sequential;
  // Storage kept per thread: the planner runs tens of thousands of predictions a plan.
  thread_local CopyOrder order;
  thread_local std::vector<double> compute_end;
  thread_local Intervals copies;
  thread_local std::vector<int32_t> mapped_before;  // per call: the last mapped call before it
  thread_local Intervals decodes;                   // per decode: its start and end
  copy_order_into(order, plan, s.calls, s.bytes);
  const std::vector<CopyItem>& items = order.items;
  compute_end.assign(s.calls.size(), 0.0);
  copies.resize(items.size());
  decodes.resize(order.decodes.size());
  // A copy's C_DMA: a staged copy moves the group's compressed bytes.
  auto dma_of = [&](const CopyItem& it) {
    const auto g = static_cast<size_t>(s.calls[it.call].group);
    return it.staging >= 0 && g < s.dma_compressed_s.size() ? s.dma_compressed_s[g] : s.dma_s[g];
  };
  auto decode_of = [&](const DecodeItem& d) {
    const auto g = static_cast<size_t>(s.calls[d.call].group);
    return g < s.decode_s.size() ? s.decode_s[g] : 0.0;
  };
  // A mapped call reads its group over the link while it computes: the link is taken, in call
  // order, by the copies and the mapped calls alike, so a copy for a later call starts after
  // the mapped calls before that call have ended (on a saturated link, sharing it would end the
  // pair at the same time; the order only says which of the two finishes first).
  // Most plans map nothing: then no copy waits for a mapped call and the walk is skipped.
  bool maps = false;
  for (size_t g = 0; g < plan.placement.size() && !maps; ++g) {
    maps = plan.placement[g] == Placement::host && !s.gathers_rows[g];
  }
  mapped_before.resize(maps ? s.calls.size() : 0);
  for (int32_t i = 0, last = -1; maps && i < static_cast<int32_t>(s.calls.size()); ++i) {
    mapped_before[static_cast<size_t>(i)] = last;
    const auto g = static_cast<size_t>(s.calls[static_cast<size_t>(i)].group);
    if (plan.placement[g] == Placement::host && !s.gathers_rows[g]) last = i;
  }
  // The inputs' upload has the compute stream and the link to itself first (Schedule::inputs_s);
  // the host enqueues it without waiting.
  double host_clock = 0;
  double prev_end = s.inputs_s;
  double copy_free = s.inputs_s;
  double decode_free = s.inputs_s;
  size_t consumed = 0;    // copies whose calls have computed
  size_t scheduled = 0;   // copies scheduled (pipelined mode)
  size_t dscheduled = 0;  // decodes scheduled (pipelined mode)
  // Pipelined: schedules every copy whose `after` call is among the first `computed` calls (and,
  // for a staged copy, whose staging buffer's previous decode is scheduled), and every decode
  // whose slot's previous user is among them and whose copy is scheduled; each engine in order.
  auto schedule_copies = [&](size_t computed) {
    for (bool progress = true; progress;) {
      progress = false;
      while (scheduled < items.size()) {
        const CopyItem& it = items[scheduled];
        const int32_t after =
            maps ? std::max(it.after, mapped_before[static_cast<size_t>(it.call)]) : it.after;
        if (after >= static_cast<int32_t>(computed)) break;
        if (it.after_decode >= static_cast<int32_t>(dscheduled)) break;
        double start =
            after >= 0 ? std::max(copy_free, compute_end[static_cast<size_t>(after)]) : copy_free;
        if (it.after_decode >= 0) {
          start = std::max(start, decodes[static_cast<size_t>(it.after_decode)].second);
        }
        copy_free = start + dma_of(it);
        copies[scheduled++] = {start, copy_free};
        progress = true;
      }
      while (dscheduled < order.decodes.size()) {
        const DecodeItem& d = order.decodes[dscheduled];
        if (d.after >= static_cast<int32_t>(computed)) break;
        if (d.copy >= static_cast<int32_t>(scheduled)) break;
        double start = decode_free;
        if (d.after >= 0) start = std::max(start, compute_end[static_cast<size_t>(d.after)]);
        if (d.copy >= 0) start = std::max(start, copies[static_cast<size_t>(d.copy)].second);
        decode_free = start + decode_of(d);
        decodes[dscheduled++] = {start, decode_free};
        progress = true;
      }
    }
  };
  for (size_t i = 0; i < s.calls.size(); ++i) {
    const size_t g = static_cast<size_t>(s.calls[i].group);
    CallTiming t;
    host_clock += s.launch_s;
    t.enqueued = host_clock;
    const double ready = std::max(prev_end, t.enqueued);
    t.compute_start = ready;
    const int32_t item = order.item[i];
    const int32_t decode = order.decode[i];
    size_t overlap_from = consumed;
    if (item >= 0) {
      t.slot = order.slot[i];
      if (sequential) {
        t.copy_start = std::max(copy_free, prev_end);
        t.copy_end = t.copy_start + dma_of(items[static_cast<size_t>(item)]);
        copy_free = t.copy_end;
      } else {
        schedule_copies(i);
        const auto [a, b] = copies[static_cast<size_t>(item)];
        t.copy_start = a;
        t.copy_end = b;
      }
      t.compute_start = std::max(ready, t.copy_end);
      overlap_from = consumed + 1;
    } else if (!sequential) {
      schedule_copies(i);
    }
    if (decode >= 0) {
      t.slot = order.slot[i];
      if (sequential) {  // after its copy (or the call before it), on the compute stream
        t.decode_start = item >= 0 ? t.copy_end : prev_end;
        t.decode_end = t.decode_start + decode_of(order.decodes[static_cast<size_t>(decode)]);
      } else {
        const auto [a, b] = decodes[static_cast<size_t>(decode)];
        t.decode_start = a;
        t.decode_end = b;
      }
      t.compute_start = std::max(ready, t.decode_end);
    }
    // A call that starts on an idle engine (its copy, a host step or the launch kept the
    // engine waiting) first spends idle_start_s; then its work, back to back.
    const double work_start =
        t.compute_start > prev_end ? t.compute_start + s.idle_start_s[i] : t.compute_start;
    if (plan.placement[g] == Placement::host && !s.gathers_rows[g]) {
      // Mapped: nothing else crosses the link meanwhile (above), so its time alone.
      if (!sequential) schedule_copies(i);
      t.compute_end = work_start + s.exe_mapped_s[i];
    } else {
      t.compute_end = sequential ? work_start + s.exe_s[i]
                                 : end_of_work(work_start, s.exe_s[i], s.exe_copying_s[i], copies,
                                               overlap_from, scheduled);
    }
    compute_end[i] = t.compute_end;
    if (item >= 0) ++consumed;
    prev_end = t.compute_end;
    t.finished = t.compute_end;
    if (s.host_after[i] != HostStep::none) {
      const double step_start = std::max(host_clock, t.compute_end);
      if (!sequential) schedule_copies(i + 1);  // what waited for this call can start now
      host_clock = sequential ? step_start + s.host_after_s[i]
                              : end_of_work(step_start, s.host_after_s[i],
                                            s.host_after_copying_s[i], copies, consumed, scheduled);
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
    ph.compute_s += t.compute_end - t.compute_start;  // C_EXE, slowed where copies ran
    ph.host_s += schedule.host_after_s[i];
    if (plan.placement[g] == Placement::host && !schedule.gathers_rows[g]) {
      ph.link_bytes += schedule.bytes[g];
      ph.mapped_bytes += schedule.bytes[g];
      ++ph.mapped_calls;
    }
    const bool staged = t.copy_end >= 0 && t.decode_end >= 0;
    if (t.copy_end >= 0) {
      ph.copy_s += staged ? schedule.dma_compressed_s[g] : schedule.dma_s[g];
      ph.link_bytes += staged ? schedule.compressed_bytes[g] : schedule.bytes[g];
      copies.emplace_back(t.copy_start, t.copy_end);
    }
    if (t.decode_end >= 0) {
      ph.decode_s += schedule.decode_s[g];
      ++ph.decodes;
    }
    if (t.copy_end >= 0 || t.decode_end >= 0) ph.stall_s += t.compute_start - ready;
    computes.emplace_back(t.compute_start, t.compute_end);
    if (trace != nullptr) (*trace)[i] = t;
  });
  for (const PhaseTime& ph : p.phases) {
    p.link_bytes += ph.link_bytes;
    p.mapped_bytes += ph.mapped_bytes;
    p.copy_busy_s += ph.copy_s;
    p.compute_busy_s += ph.compute_s;
    p.host_s += ph.host_s;
    p.stall_s += ph.stall_s;
    p.decode_busy_s += ph.decode_s;
    p.decodes += ph.decodes;
  }
  p.copies = static_cast<int64_t>(copies.size());
  p.hidden_copy_s = overlap(copies, computes);
  p.hidden_fraction = p.copy_busy_s > 0 ? p.hidden_copy_s / p.copy_busy_s : 1.0;
  return p;
}

Result<Prediction> predict(const ModelWeights& weights, const Schedule& schedule, const Plan& plan,
                           std::vector<CallTiming>* trace) {
  FERRY_RETURN_IF_ERROR(validate_plan(plan, weights, schedule.compressed_bytes));
  if (schedule.group_count() != weights.groups.size()) {
    return make_error(ErrorCode::invalid_argument,
                      "predict: the schedule was built for a model of " +
                          std::to_string(schedule.group_count()) + " groups, not " +
                          std::to_string(weights.groups.size()));
  }
  FERRY_RETURN_IF_ERROR(copy_order(plan, schedule.calls, schedule.bytes).status());
  return predict_unchecked(schedule, plan, trace);
}

}  // namespace ferry
