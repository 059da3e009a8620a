#include "measure/profiler.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <span>
#include <tuple>

#include "core/stats.h"
#include "plan/schedule.h"

namespace ferry {

namespace {

using Clock = std::chrono::steady_clock;

// core/stats.h's median (the mean of the two middle samples of an even count), or none.
std::optional<double> median_of(std::vector<double> v) {
  if (v.empty()) return std::nullopt;
  return median(std::move(v));
}

// How a span sits against the copies: a copy in under kCopyCoverMargin of it, in over 1 minus
// that, or in between.
enum class Cover { alone, copying, part };
Cover cover_of(double share) {
  if (share < kCopyCoverMargin) return Cover::alone;
  return share > 1 - kCopyCoverMargin ? Cover::copying : Cover::part;
}

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Times the host around the executor's calls (see profiler.h): host steps and launch gaps.
class HostTimer final : public GroupProvider {
 public:
  HostTimer(Backend& backend, GroupProvider& inner, const ModelWeights& weights)
      : backend_(backend), inner_(inner), weights_(weights) {}

  Status begin(Stream& stream, std::span<const Call> calls) override {
    calls_.assign(calls.begin(), calls.end());
    next_ = 0;
    pending_ = HostStep::none;
    return inner_.begin(stream, calls);
  }

  Result<void*> acquire(Stream& stream, const Call& call) override {
    const Clock::time_point now = Clock::now();
    if (pending_ != HostStep::none) {
      (pending_ == HostStep::sampling ? sampling : euler).push_back(seconds_between(ready_, now));
      pending_ = HostStep::none;
    } else if (next_ > 0 && calls_[next_ - 1].phase == call.phase) {
      launch.push_back(seconds_between(last_acquire_, now));
    }
    last_acquire_ = now;
    return inner_.acquire(stream, call);
  }

  Status release(Stream& stream, const Call& call) override {
    FERRY_RETURN_IF_ERROR(inner_.release(stream, call));
    const HostStep step = host_step_after(calls_, weights_, next_++);
    if (step != HostStep::none) {
      // The host step reads this call's output: it starts when the call's compute is done.
      FERRY_RETURN_IF_ERROR(backend_.synchronize(stream));
      ready_ = Clock::now();
      pending_ = step;
    }
    return {};
  }

  // A host step after the last call ends with the inference.
  void finish() {
    if (pending_ == HostStep::none) return;
    (pending_ == HostStep::sampling ? sampling : euler)
        .push_back(seconds_between(ready_, Clock::now()));
    pending_ = HostStep::none;
  }

  std::vector<double> sampling, euler, launch;

 private:
  Backend& backend_;
  GroupProvider& inner_;
  const ModelWeights& weights_;
  std::vector<Call> calls_;
  size_t next_ = 0;
  HostStep pending_ = HostStep::none;
  Clock::time_point ready_{};
  Clock::time_point last_acquire_{};
};

}  // namespace

Result<GroupCopyTimes> measure_group_copies(Backend& backend, const ModelWeights& weights,
                                            const HostTier& tier, int runs) {
  if (runs < 1) return make_error(ErrorCode::invalid_argument, "profile: runs must be at least 1");
  FERRY_RETURN_IF_ERROR(tier.wait_all());
  uint64_t largest = 0;
  std::vector<std::vector<HostCopy>> copies;
  copies.reserve(weights.groups.size());
  for (const WeightGroup& g : weights.groups) {
    largest = std::max(largest, g.bytes);
    FERRY_ASSIGN_OR_RETURN(std::vector<HostCopy> c, tier.transfer_copies(g));
    copies.push_back(std::move(c));
  }
  FERRY_ASSIGN_OR_RETURN(DeviceBuffer slot,
                         backend.allocate(std::max<uint64_t>(largest, 256), "profile slot"));
  std::unique_ptr<Stream> copy = backend.create_copy_stream();
  std::unique_ptr<Event> start = backend.create_timing_event();
  std::unique_ptr<Event> end = backend.create_timing_event();
  auto enqueue = [&](size_t g) {
    for (const HostCopy& c : copies[g]) {
      backend.copy_from_mapping(*copy, static_cast<char*>(slot.data()) + c.dst_offset, c.src,
                                c.bytes, *c.file);
    }
  };
  // Untimed: pages into the cache and their translations warm, clocks up.
  for (size_t g = 0; g < copies.size(); ++g) enqueue(g);
  FERRY_RETURN_IF_ERROR(backend.synchronize(*copy));
  std::vector<std::vector<double>> times(copies.size());
  GroupCopyTimes out;
  for (int r = 0; r < runs; ++r) {
    double pass = 0;
    for (size_t g = 0; g < copies.size(); ++g) {
      backend.record(*start, *copy);
      enqueue(g);
      backend.record(*end, *copy);
      FERRY_RETURN_IF_ERROR(backend.synchronize(*copy));
      FERRY_ASSIGN_OR_RETURN(double t, backend.elapsed_seconds(*start, *end));
      times[g].push_back(std::max(t, 0.0));
      pass += times[g].back();
    }
    out.pass_s.push_back(pass);
  }
  out.dma_s.reserve(copies.size());
  for (std::vector<double>& t : times) out.dma_s.push_back(median(std::move(t)));
  return out;
}

namespace {

// Whether call `i` of `t` waited for its copy past `end` (the previous call's compute end): a gap
// before it is then not the host's alone.
bool waited_for_copy(const StreamTimeline& t, size_t i, double end) {
  if (i >= t.copy_of.size()) return false;
  const int64_t k = t.copy_of[i];
  return k >= 0 && static_cast<size_t>(k) < t.copies.size() &&
         t.copies[static_cast<size_t>(k)].end > end;
}

}  // namespace

std::array<StepGaps, 3> host_step_gaps(const std::vector<StreamTimeline>& timelines,
                                       const ModelWeights& weights) {
  std::array<std::vector<double>, 3> any, alone, copying;
  for (const StreamTimeline& t : timelines) {
    const std::vector<Span> copies = copies_in_order(t);
    const size_t n = std::min(t.calls.size(), t.compute.size());
    for (size_t i = 0; i + 1 < n; ++i) {
      const HostStep step = host_step_after(t.calls, weights, i);
      if (step == HostStep::none) continue;
      // A stage boundary's gap is more than its host step (stage_entry_gaps).
      if (t.calls[i + 1].phase != t.calls[i].phase) continue;
      const double end = t.compute[i].end;
      // The next call waited for its copy too: not the host step's gap alone.
      if (waited_for_copy(t, i + 1, end)) continue;
      const double gap = std::max(0.0, t.compute[i + 1].start - end);
      const auto kind = static_cast<size_t>(step);
      any[kind].push_back(gap);
      if (gap <= 0) continue;
      const Cover cover = cover_of(copy_time_within(copies, end, end + gap) / gap);
      if (cover == Cover::alone) alone[kind].push_back(gap);
      if (cover == Cover::copying) copying[kind].push_back(gap);
    }
  }
  std::array<StepGaps, 3> out;
  for (size_t k = 0; k < out.size(); ++k) {
    out[k].any = median_of(std::move(any[k]));
    out[k].alone = median_of(std::move(alone[k]));
    out[k].copying = median_of(std::move(copying[k]));
  }
  return out;
}

std::array<std::optional<double>, kPhaseCount> stage_entry_gaps(
    const std::vector<StreamTimeline>& timelines) {
  std::array<std::vector<double>, kPhaseCount> gaps;
  for (const StreamTimeline& t : timelines) {
    const size_t n = std::min(t.calls.size(), t.compute.size());
    for (size_t i = 0; i + 1 < n; ++i) {
      if (t.calls[i + 1].phase == t.calls[i].phase) continue;
      const double end = t.compute[i].end;
      if (waited_for_copy(t, i + 1, end)) continue;  // the first call waited for its copy too
      gaps[phase_index(t.calls[i + 1].phase)].push_back(
          std::max(0.0, t.compute[i + 1].start - end));
    }
  }
  std::array<std::optional<double>, kPhaseCount> out;
  for (size_t p = 0; p < out.size(); ++p) out[p] = median_of(std::move(gaps[p]));
  return out;
}

std::optional<double> inputs_upload_time(const std::vector<StreamTimeline>& timelines) {
  std::vector<double> times;
  for (const StreamTimeline& t : timelines) times.push_back(std::max(t.inputs_end, 0.0));
  return median_of(std::move(times));
}

std::array<double, kPhaseCount> timing_event_cost(const std::vector<StreamTimeline>& timelines) {
  std::array<std::vector<double>, kPhaseCount> gaps;
  std::vector<double> all;
  for (const StreamTimeline& t : timelines) {
    const size_t n = std::min(t.calls.size(), t.compute.size());
    for (size_t i = 0; i + 1 < n; ++i) {
      if (t.calls[i + 1].phase != t.calls[i].phase) continue;
      const double gap = t.compute[i + 1].start - t.compute[i].end;
      if (!(gap > 0) || gap > kBackToBackGap) continue;
      gaps[phase_index(t.calls[i].phase)].push_back(gap);
      all.push_back(gap);
    }
  }
  const double fallback = median_of(std::move(all)).value_or(0.0);
  std::array<double, kPhaseCount> out{};
  for (size_t p = 0; p < out.size(); ++p) {
    out[p] = median_of(std::move(gaps[p])).value_or(fallback);
  }
  return out;
}

namespace {

// Per (group, phase) in one run: the calls' summed spans and counts, alone, copying and all,
// and the summed share of the spans under copies.
struct RunSums {
  double alone = 0, copying = 0, all = 0, cover = 0, alone_b2b = 0, alone_idle = 0;
  int64_t alone_n = 0, copying_n = 0, all_n = 0, alone_b2b_n = 0, alone_idle_n = 0;
  int64_t copying_idle_n = 0, all_idle_n = 0;
};

}  // namespace

ExeSplit split_exe_times(const std::vector<StreamTimeline>& timelines, size_t groups) {
  struct Runs {
    std::vector<double> alone, copying, all, cover, alone_b2b, alone_idle;
    std::vector<double> alone_idle_share, copying_idle_share, all_idle_share;
  };
  std::vector<std::array<Runs, kPhaseCount>> per_run(groups);
  const std::array<double, kPhaseCount> event = timing_event_cost(timelines);
  for (const StreamTimeline& t : timelines) {
    const std::vector<Span> copies = copies_in_order(t);
    std::vector<std::array<RunSums, kPhaseCount>> sums(groups);
    for (size_t i = 0; i < t.calls.size() && i < t.compute.size(); ++i) {
      const auto g = static_cast<size_t>(t.calls[i].group);
      if (g >= groups) continue;
      const size_t ph = phase_index(t.calls[i].phase);
      RunSums& r = sums[g][ph];
      const Span& c = t.compute[i];
      const double span = std::max(0.0, c.seconds());
      const double cover = span > 0 ? copy_time_within(copies, c.start, c.end) / span : 0.0;
      // The call's own time: its span holds one timing event's cost, the run without them none.
      const double d = std::max(0.0, span - event[ph]);
      const bool idle = i == 0 || c.start - t.compute[i - 1].end > kBackToBackGap;
      r.all += d;
      r.cover += cover;
      ++r.all_n;
      r.all_idle_n += idle ? 1 : 0;
      switch (cover_of(cover)) {
        case Cover::alone:
          r.alone += d;
          ++r.alone_n;
          (idle ? r.alone_idle : r.alone_b2b) += d;
          ++(idle ? r.alone_idle_n : r.alone_b2b_n);
          break;
        case Cover::copying:
          r.copying += d;
          ++r.copying_n;
          r.copying_idle_n += idle ? 1 : 0;
          break;
        case Cover::part:
          break;
      }
    }
    for (size_t g = 0; g < groups; ++g) {
      for (size_t ph = 0; ph < kPhaseCount; ++ph) {
        const RunSums& r = sums[g][ph];
        Runs& out = per_run[g][ph];
        if (r.all_n == 0) continue;
        auto share = [](int64_t part, int64_t whole) {
          return static_cast<double>(part) / static_cast<double>(whole);
        };
        out.all.push_back(r.all / static_cast<double>(r.all_n));
        out.cover.push_back(r.cover / static_cast<double>(r.all_n));
        out.all_idle_share.push_back(share(r.all_idle_n, r.all_n));
        if (r.alone_n > 0) {
          out.alone.push_back(r.alone / static_cast<double>(r.alone_n));
          out.alone_idle_share.push_back(share(r.alone_idle_n, r.alone_n));
        }
        if (r.alone_b2b_n > 0) {
          out.alone_b2b.push_back(r.alone_b2b / static_cast<double>(r.alone_b2b_n));
        }
        if (r.alone_idle_n > 0) {
          out.alone_idle.push_back(r.alone_idle / static_cast<double>(r.alone_idle_n));
        }
        if (r.copying_n > 0) {
          out.copying.push_back(r.copying / static_cast<double>(r.copying_n));
          out.copying_idle_share.push_back(share(r.copying_idle_n, r.copying_n));
        }
      }
    }
  }
  ExeSplit e;
  e.event_s = event;
  for (PhaseTimesOfGroups* v :
       {&e.alone, &e.copying, &e.mean, &e.cover, &e.alone_b2b, &e.alone_idle, &e.alone_idle_share,
        &e.copying_idle_share, &e.mean_idle_share}) {
    v->resize(groups);
  }
  for (size_t g = 0; g < groups; ++g) {
    for (size_t ph = 0; ph < kPhaseCount; ++ph) {
      const Runs& r = per_run[g][ph];
      e.alone[g][ph] = median_of(r.alone);
      e.copying[g][ph] = median_of(r.copying);
      e.mean[g][ph] = median_of(r.all);
      e.cover[g][ph] = median_of(r.cover);
      e.alone_b2b[g][ph] = median_of(r.alone_b2b);
      e.alone_idle[g][ph] = median_of(r.alone_idle);
      e.alone_idle_share[g][ph] = median_of(r.alone_idle_share);
      e.copying_idle_share[g][ph] = median_of(r.copying_idle_share);
      e.mean_idle_share[g][ph] = median_of(r.all_idle_share);
    }
  }
  return e;
}

ExeTimes exe_times(const ModelWeights& weights, const ExeSplit& pipelined,
                   const ExeSplit* sequential, const ExeSplit* under_copies) {
  constexpr double kSolvableCover = 0.25;
  const size_t groups = pipelined.mean.size();
  // Classes: kind, layer part, bytes and phase (the groups of one class run the same kernels).
  using Class = std::tuple<int, int, uint64_t, size_t>;
  auto class_of = [&](size_t g, size_t ph) {
    const WeightGroup& w = weights.groups[g];
    return Class{static_cast<int>(w.kind), static_cast<int>(w.part), w.bytes, ph};
  };
  // What starting on an idle engine adds, per class, from the pass where calls run alone.
  const ExeSplit& lone = sequential != nullptr ? *sequential : pipelined;
  std::map<Class, std::pair<std::vector<double>, std::vector<double>>> starts;  // b2b, idle
  for (size_t g = 0; g < groups && g < weights.groups.size() && g < lone.alone_b2b.size(); ++g) {
    for (size_t ph = 0; ph < kPhaseCount; ++ph) {
      auto& [b2b, idle] = starts[class_of(g, ph)];
      if (lone.alone_b2b[g][ph]) b2b.push_back(*lone.alone_b2b[g][ph]);
      if (lone.alone_idle[g][ph]) idle.push_back(*lone.alone_idle[g][ph]);
    }
  }
  std::map<Class, double> idle_start;
  for (auto& [c, v] : starts) {
    if (!v.first.empty() && !v.second.empty()) {
      idle_start[c] = std::max(0.0, median(v.second) - median(v.first));
    }
  }
  auto extra = [&](size_t g, size_t ph) {
    if (g >= weights.groups.size()) return 0.0;
    const auto it = idle_start.find(class_of(g, ph));
    return it != idle_start.end() ? it->second : 0.0;
  };
  // A mean over calls of which `share` started idle, as if every one had run back to back.
  auto back_to_back = [&](const PhaseTimesOfGroups& means, const PhaseTimesOfGroups& shares,
                          size_t g, size_t ph) -> std::optional<double> {
    if (g >= means.size() || !means[g][ph]) return std::nullopt;
    const double share = g < shares.size() ? shares[g][ph].value_or(0) : 0;
    return std::max(0.0, *means[g][ph] - extra(g, ph) * share);
  };
  ExeTimes e;
  e.alone.resize(groups);
  e.copying.resize(groups);
  e.idle_start.resize(groups);
  for (size_t g = 0; g < groups; ++g) {
    for (size_t ph = 0; ph < kPhaseCount; ++ph) {
      const bool seq = sequential != nullptr && g < sequential->mean.size() &&
                       sequential->mean[g][ph].has_value();
      e.alone[g][ph] = seq ? back_to_back(sequential->mean, sequential->mean_idle_share, g, ph)
                           : back_to_back(pipelined.alone, pipelined.alone_idle_share, g, ph);
      e.copying[g][ph] = back_to_back(pipelined.copying, pipelined.copying_idle_share, g, ph);
      if (!e.copying[g][ph] && under_copies != nullptr) {
        e.copying[g][ph] = back_to_back(under_copies->mean, under_copies->mean_idle_share, g, ph);
      }
      const std::optional<double> mean =
          back_to_back(pipelined.mean, pipelined.mean_idle_share, g, ph);
      const std::optional<double>& cover = pipelined.cover[g][ph];
      if (!e.copying[g][ph] && e.alone[g][ph] && mean && cover && *cover >= kSolvableCover) {
        e.copying[g][ph] = std::max(0.0, *e.alone[g][ph] + (*mean - *e.alone[g][ph]) / *cover);
      }
    }
  }
  // The ratio copying / alone per class and phase, from its groups seen both ways.
  std::map<Class, std::vector<double>> ratios;
  for (size_t g = 0; g < groups && g < weights.groups.size(); ++g) {
    for (size_t ph = 0; ph < kPhaseCount; ++ph) {
      if (e.alone[g][ph] && e.copying[g][ph] && *e.alone[g][ph] > 0) {
        ratios[class_of(g, ph)].push_back(*e.copying[g][ph] / *e.alone[g][ph]);
      }
    }
  }
  std::map<Class, double> ratio;
  for (auto& [c, v] : ratios) ratio[c] = median(std::move(v));
  for (size_t g = 0; g < groups && g < weights.groups.size(); ++g) {
    for (size_t ph = 0; ph < kPhaseCount; ++ph) {
      std::optional<double>& alone = e.alone[g][ph];
      std::optional<double>& copying = e.copying[g][ph];
      const auto it = ratio.find(class_of(g, ph));
      const double r = it != ratio.end() ? it->second : 1.0;
      if (alone && !copying) {
        copying = *alone * r;
      } else if (copying && !alone) {
        alone = *copying / r;
      } else if (!alone && pipelined.mean[g][ph]) {
        // Only part-covered calls: mean = alone * (1 + (r - 1) * cover).
        const double cover = pipelined.cover[g][ph].value_or(0);
        alone =
            *back_to_back(pipelined.mean, pipelined.mean_idle_share, g, ph) / (1 + (r - 1) * cover);
        copying = *alone * r;
      }
      if (alone && idle_start.count(class_of(g, ph)) > 0) e.idle_start[g][ph] = extra(g, ph);
    }
  }
  return e;
}

std::vector<std::optional<double>> pipelined_copy_times(
    const std::vector<StreamTimeline>& timelines, size_t groups) {
  std::vector<std::vector<double>> spans(groups);
  for (const StreamTimeline& t : timelines) {
    for (size_t i = 0; i < t.calls.size() && i < t.copy_of.size(); ++i) {
      const int64_t k = t.copy_of[i];
      const auto g = static_cast<size_t>(t.calls[i].group);
      if (k < 0 || static_cast<size_t>(k) >= t.copies.size() || g >= groups) continue;
      spans[g].push_back(std::max(0.0, t.copies[static_cast<size_t>(k)].seconds()));
    }
  }
  std::vector<std::optional<double>> out(groups);
  for (size_t g = 0; g < groups; ++g) {
    if (!spans[g].empty()) out[g] = median(std::move(spans[g]));
  }
  return out;
}

std::vector<double> pipelined_dma(const std::vector<double>& alone_s,
                                  const std::vector<std::optional<double>>& pipelined_s,
                                  double* ratio) {
  double alone = 0, piped = 0;
  for (size_t g = 0; g < alone_s.size() && g < pipelined_s.size(); ++g) {
    if (pipelined_s[g] && alone_s[g] > 0) {
      alone += alone_s[g];
      piped += *pipelined_s[g];
    }
  }
  const double r = alone > 0 && piped > 0 ? piped / alone : 1.0;
  if (ratio != nullptr) *ratio = r;
  std::vector<double> out(alone_s.size());
  for (size_t g = 0; g < alone_s.size(); ++g) {
    out[g] = g < pipelined_s.size() && pipelined_s[g] ? *pipelined_s[g] : alone_s[g] * r;
  }
  return out;
}

Result<std::vector<StreamTimeline>> timed_runs(Session& session, int runs, int warmup) {
  if (runs < 1) return make_error(ErrorCode::invalid_argument, "profile: runs must be at least 1");
  for (int i = 0; i < warmup; ++i) FERRY_RETURN_IF_ERROR(session.run().status());
  StreamingProvider& streaming = session.streaming_provider();
  std::vector<StreamTimeline> timelines;
  streaming.set_timeline(true);
  for (int r = 0; r < runs; ++r) {
    Result<InferenceResult> run = session.run();
    Result<StreamTimeline> t =
        run.ok() ? streaming.timeline() : Result<StreamTimeline>(run.error());
    if (!t.ok()) {
      streaming.set_timeline(false);
      return t.error();
    }
    timelines.push_back(std::move(t).value());
  }
  streaming.set_timeline(false);
  return timelines;
}

void derive_call_times(CallMeasurements& m, const ModelWeights& weights,
                       const std::vector<StreamTimeline>* alone,
                       const std::vector<StreamTimeline>* under_copies) {
  const size_t groups = weights.groups.size();
  const ExeSplit piped = split_exe_times(m.timelines, groups);
  std::optional<ExeSplit> seq;
  if (alone != nullptr) seq = split_exe_times(*alone, groups);
  std::optional<ExeSplit> copying;
  if (under_copies != nullptr) copying = split_exe_times(*under_copies, groups);
  ExeTimes exe = exe_times(weights, piped, seq ? &*seq : nullptr, copying ? &*copying : nullptr);
  m.exe_s = std::move(exe.alone);
  m.exe_copying_s = std::move(exe.copying);
  m.idle_start_s = std::move(exe.idle_start);
  m.pipelined_dma_s = pipelined_copy_times(m.timelines, groups);
  // Host steps as the pipeline sees them (one launch of the gap is the predictor's own), alone
  // (from the sequential runs when there are some) and with a copy running; a step seen only
  // one way takes that time for both; a step no timeline shows, the host timer's time.
  const std::array<StepGaps, 3> gaps = host_step_gaps(m.timelines, weights);
  std::array<StepGaps, 3> alone_gaps{}, copying_gaps{};
  if (alone != nullptr) alone_gaps = host_step_gaps(*alone, weights);
  if (under_copies != nullptr) copying_gaps = host_step_gaps(*under_copies, weights);
  auto less_launch = [&](double gap) { return std::max(0.0, gap - m.host.launch_s); };
  auto set = [&](HostStep step, double timed, double& out_alone,
                 std::optional<double>& out_copying) {
    const StepGaps& g = gaps[static_cast<size_t>(step)];
    const StepGaps& sg = alone_gaps[static_cast<size_t>(step)];
    const std::optional<double> a = sg.any ? sg.any : g.alone;
    const std::optional<double> c =
        g.copying ? g.copying : copying_gaps[static_cast<size_t>(step)].any;
    out_copying.reset();
    if (!a && !g.any) {
      out_alone = timed;
      return;
    }
    out_alone = less_launch(a.value_or(c.value_or(g.any.value_or(0))));
    out_copying = less_launch(c.value_or(a.value_or(g.any.value_or(0))));
  };
  set(HostStep::sampling, m.timed_sampling_s, m.host.sampling_s, m.host.sampling_copying_s);
  set(HostStep::euler, m.timed_euler_s, m.host.euler_s, m.host.euler_copying_s);
  // Stage boundaries as the pipeline sees them, else as the sequential runs do.
  const std::array<std::optional<double>, kPhaseCount> entry = stage_entry_gaps(m.timelines);
  std::array<std::optional<double>, kPhaseCount> entry_alone{};
  if (alone != nullptr) entry_alone = stage_entry_gaps(*alone);
  for (size_t p = 0; p < entry.size(); ++p) {
    const std::optional<double> gap = entry[p] ? entry[p] : entry_alone[p];
    m.host.stage_entry_s[p].reset();
    if (gap) m.host.stage_entry_s[p] = less_launch(*gap);
  }
  m.event_s = piped.event_s;
  m.host.inputs_s = inputs_upload_time(m.timelines);
  if (!m.host.inputs_s && alone != nullptr) m.host.inputs_s = inputs_upload_time(*alone);
}

Result<CallMeasurements> measure_calls(Session& session, const ModelWeights& weights, int runs,
                                       int warmup) {
  CallMeasurements m;
  m.runs = runs;
  FERRY_ASSIGN_OR_RETURN(m.timelines, timed_runs(session, runs, warmup));
  HostTimer timer(session.backend(), session.provider(), weights);
  for (int r = 0; r < runs; ++r) {
    FERRY_RETURN_IF_ERROR(session.run(&timer).status());
    timer.finish();
  }
  m.host.launch_s = median(timer.launch);
  m.timed_sampling_s = median(std::move(timer.sampling));
  m.timed_euler_s = median(std::move(timer.euler));
  derive_call_times(m, weights, nullptr);
  return m;
}

Profile measured_profile(const ModelWeights& weights, const std::vector<double>& dma_s,
                         const CallMeasurements& calls, const MachineLimits& limits,
                         const std::string& device, const std::string& byte_path,
                         const Workload& workload, double* pipeline_ratio) {
  MachineRates rates;
  rates.device = device;
  rates.byte_path = byte_path;
  rates.peak_flops = limits.gemm_flops;
  rates.memory_bandwidth = limits.copy_bandwidth;
  rates.host = calls.host;
  double link = limits.h2d_bandwidth;
  for (size_t g = 0; g < weights.groups.size() && g < dma_s.size(); ++g) {
    if (dma_s[g] > 0) {
      link = std::max(link, static_cast<double>(weights.groups[g].bytes) / dma_s[g]);
    }
  }
  rates.link_bytes_per_s = std::clamp(link, 1.0, kMaxLinkRate);
  Profile p = profile_skeleton(weights, rates, "measured");
  p.runs = calls.runs;
  p.workload = profile_workload(workload);
  const std::vector<double> dma = pipelined_dma(dma_s, calls.pipelined_dma_s, pipeline_ratio);
  for (size_t g = 0; g < weights.groups.size(); ++g) {
    if (g < dma.size()) p.groups[g].dma_s = dma[g];
    if (g < calls.exe_s.size()) p.groups[g].exe_s = calls.exe_s[g];
    if (g < calls.exe_copying_s.size()) p.groups[g].exe_copying_s = calls.exe_copying_s[g];
    if (g < calls.idle_start_s.size()) {
      for (size_t ph = 0; ph < kPhaseCount; ++ph) {
        if (p.groups[g].exe_s[ph]) p.groups[g].idle_start_s[ph] = calls.idle_start_s[g][ph];
      }
    }
    if (g < calls.exe_mapped_s.size()) {
      for (size_t ph = 0; ph < kPhaseCount; ++ph) {
        if (p.groups[g].exe_s[ph]) p.groups[g].exe_mapped_s[ph] = calls.exe_mapped_s[g][ph];
      }
    }
  }
  return p;
}

std::optional<Plan> map_pass_plan(const ModelWeights& weights, const std::vector<uint8_t>& in_place,
                                  const Plan& base) {
  if (in_place.size() != weights.groups.size() || base.placement.size() != weights.groups.size()) {
    return std::nullopt;
  }
  Plan p;
  p.placement = base.placement;
  bool any = false;
  uint64_t largest = 0;
  for (size_t g = 0; g < weights.groups.size(); ++g) {
    if (in_place[g] && !host_placement_allowed(weights.groups[g])) {
      p.placement[g] = Placement::host;
      any = true;
    } else if (p.placement[g] == Placement::streamed) {
      largest = std::max(largest, weights.groups[g].bytes);
    }
  }
  if (!any) return std::nullopt;
  p.mode = largest > 0 ? StreamMode::sequential : StreamMode::pipelined;
  p.slots = largest > 0 ? 1 : 0;
  p.slot_bytes = largest > 0 ? align_group_bytes(largest) : 0;
  return p;
}

PhaseTimesOfGroups mapped_exe_times(const std::vector<StreamTimeline>& timelines,
                                    const ModelWeights& weights, const Plan& plan) {
  const ExeSplit split = split_exe_times(timelines, weights.groups.size());
  PhaseTimesOfGroups out(weights.groups.size());
  for (size_t g = 0; g < weights.groups.size() && g < plan.placement.size(); ++g) {
    if (plan.placement[g] != Placement::host || host_placement_allowed(weights.groups[g])) continue;
    out[g] = split.mean[g];
  }
  return out;
}

}  // namespace ferry
