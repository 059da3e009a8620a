#include "plan/timeline_stats.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "core/stats.h"
#include "plan/schedule.h"

namespace ferry {

namespace {

// How a span sits against the copies: a copy in under kCopyCoverMargin of it, in over 1 minus
// that, or in between.
enum class Cover { alone, copying, part };
Cover cover_of(double share) {
  if (share < kCopyCoverMargin) return Cover::alone;
  return share > 1 - kCopyCoverMargin ? Cover::copying : Cover::part;
}

}  // namespace

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
