#include "plan/stream_timeline.h"

#include <algorithm>

#include "plan/profile.h"

namespace ferry {

namespace {

double clamp0(double v) {
  return v > 0 ? v : 0;
}

// Time of [a, b) covered by `busy` (sorted by start, not overlapping), from index `from` on.
double covered(const std::vector<Span>& busy, double a, double b) {
  const auto first = std::lower_bound(busy.begin(), busy.end(), a,
                                      [](const Span& s, double t) { return s.end <= t; });
  double sum = 0;
  for (auto it = first; it != busy.end() && it->start < b; ++it) {
    sum += clamp0(std::min(b, it->end) - std::max(a, it->start));
  }
  return sum;
}

}  // namespace

std::vector<Span> copies_in_order(const StreamTimeline& t) {
  std::vector<Span> out;
  for (const Span& c : t.copies) {
    if (c.end > c.start) out.push_back(c);
  }
  std::sort(out.begin(), out.end(), [](const Span& a, const Span& b) { return a.start < b.start; });
  return out;
}

double copy_time_within(const std::vector<Span>& in_order, double a, double b) {
  return b > a ? covered(in_order, a, b) : 0.0;
}

TimelineSummary summarize_timeline(const StreamTimeline& t) {
  TimelineSummary s;
  // The compute spans in time order, merged where they touch (they never overlap on one stream,
  // but a measurement may put two ends a rounding apart).
  std::vector<Span> busy;
  for (const Span& c : t.compute) {
    if (c.end <= c.start) continue;
    if (!busy.empty() && c.start <= busy.back().end) {
      busy.back().end = std::max(busy.back().end, c.end);
    } else {
      busy.push_back(c);
    }
  }
  std::sort(busy.begin(), busy.end(),
            [](const Span& a, const Span& b) { return a.start < b.start; });
  for (size_t i = 0; i < t.compute.size(); ++i) {
    const Span& c = t.compute[i];
    const double d = clamp0(c.seconds());
    s.compute_busy_s += d;
    s.span_s = std::max(s.span_s, c.end);
    const size_t ph = phase_index(t.calls[i].phase);
    s.phases[ph].compute_s += d;
    const int64_t k = i < t.copy_of.size() ? t.copy_of[i] : -1;
    if (k < 0 || static_cast<size_t>(k) >= t.copies.size()) continue;
    const Span& copy = t.copies[static_cast<size_t>(k)];
    const double cd = clamp0(copy.seconds());
    const double hidden = covered(busy, copy.start, copy.end);
    const uint64_t bytes =
        static_cast<size_t>(k) < t.copy_bytes.size() ? t.copy_bytes[static_cast<size_t>(k)] : 0;
    s.copy_busy_s += cd;
    s.hidden_copy_s += hidden;
    s.link_bytes += bytes;
    s.span_s = std::max(s.span_s, copy.end);
    PhaseStreamStats& p = s.phases[ph];
    p.copy_busy_s += cd;
    p.hidden_copy_s += hidden;
    p.link_bytes += bytes;
    ++p.copies;
    // The compute engine idles before this call while its copy is still running.
    const double prev_end = i > 0 ? t.compute[i - 1].end : 0.0;
    s.stall_s += clamp0(std::min(c.start, copy.end) - prev_end);
  }
  s.hidden_fraction = s.copy_busy_s > 0 ? s.hidden_copy_s / s.copy_busy_s : 1.0;
  return s;
}

}  // namespace ferry
