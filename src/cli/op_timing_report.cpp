#include "cli/op_timing_report.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <map>

#include "model/call_sequence.h"

namespace ferry::cli {
namespace {

// How the times were taken; the table prints it with these line breaks, the JSON as one line.
constexpr const char* kMethod =
    "one more run after the timed ones, ungraphed: every op, copy and fill enqueued alone,\n"
    "its stream synchronized, the host wall time of both recorded. Each time includes one\n"
    "launch + synchronize latency (~10 us on CUDA) and nothing overlaps, so the sums exceed\n"
    "what the pipelined timed runs above take.";

std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

constexpr std::array<Phase, kPhaseCount> kPhases = {Phase::vision, Phase::prefill, Phase::decode,
                                                    Phase::expert};

bool by_seconds(const auto& a, const auto& b) {
  return a.seconds > b.seconds;
}

double share(double seconds, const PhaseOpTimes& p) {
  return p.share_base() > 0 ? seconds / p.share_base() : 0.0;
}

}  // namespace

std::vector<PhaseOpTimes> summarize_op_times(const std::vector<OpBucket>& buckets,
                                             const PhaseTimes& times) {
  std::vector<PhaseOpTimes> phases;
  for (Phase ph : kPhases) {
    PhaseOpTimes p;
    p.phase = phase_name(ph);
    p.wall_seconds = times.of(ph);
    phases.push_back(std::move(p));
  }
  for (const OpBucket& b : buckets) {
    auto it = std::find_if(phases.begin(), phases.end(),
                           [&](const PhaseOpTimes& p) { return p.phase == b.phase; });
    if (it == phases.end()) {
      PhaseOpTimes p;
      p.phase = b.phase;
      phases.push_back(std::move(p));
      it = phases.end() - 1;
    }
    it->buckets.push_back(b);
  }
  std::erase_if(phases, [](const PhaseOpTimes& p) { return p.buckets.empty(); });
  for (PhaseOpTimes& p : phases) {
    std::map<std::string, KindTotal> kinds;
    for (const OpBucket& b : p.buckets) {
      p.op_seconds += b.seconds;
      p.ops += b.count;
      KindTotal& k = kinds[b.kind];
      k.kind = b.kind;
      k.count += b.count;
      k.seconds += b.seconds;
    }
    for (auto& [name, k] : kinds) p.kinds.push_back(k);
    std::stable_sort(p.buckets.begin(), p.buckets.end(), by_seconds<OpBucket, OpBucket>);
    std::stable_sort(p.kinds.begin(), p.kinds.end(), by_seconds<KindTotal, KindTotal>);
  }
  return phases;
}

void print_op_times(std::FILE* out, const std::vector<PhaseOpTimes>& phases, size_t top) {
  std::fprintf(out, "\nprofile: %s\nshare: of the stage's wall time in the profiled run.\n",
               kMethod);
  for (const PhaseOpTimes& p : phases) {
    std::fprintf(out, "\n%s: %lld ops, %.2f ms summed", p.phase.c_str(),
                 static_cast<long long>(p.ops), p.op_seconds * 1e3);
    if (p.wall_seconds > 0) {
      std::fprintf(out, " of %.2f ms wall in the profiled run (%.1f%%)", p.wall_seconds * 1e3,
                   100.0 * p.op_seconds / p.wall_seconds);
    }
    if (p.timed_seconds > 0) std::fprintf(out, "; timed median %.2f ms", p.timed_seconds * 1e3);
    std::string line = "  by kind:";
    for (size_t i = 0; i < p.kinds.size(); ++i) {
      const KindTotal& k = p.kinds[i];
      char item[160];
      std::snprintf(item, sizeof item, " %s %.2f ms (%.1f%%)%s", k.kind.c_str(), k.seconds * 1e3,
                    100.0 * share(k.seconds, p), i + 1 < p.kinds.size() ? "," : "");
      if (line.size() + std::strlen(item) > 100) {
        std::fprintf(out, "\n%s", line.c_str());
        line = "          ";
      }
      line += item;
    }
    std::fprintf(out, "\n%s\n  %8s %10s %10s %7s  %s\n", line.c_str(), "count", "total ms",
                 "mean us", "share", "op");
    const size_t shown = std::min(top, p.buckets.size());
    for (size_t i = 0; i < shown; ++i) {
      const OpBucket& b = p.buckets[i];
      std::fprintf(out, "  %8lld %10.3f %10.1f %6.1f%%  %s\n", static_cast<long long>(b.count),
                   b.seconds * 1e3,
                   b.count > 0 ? b.seconds / static_cast<double>(b.count) * 1e6 : 0,
                   100.0 * share(b.seconds, p), b.label().c_str());
    }
    if (shown < p.buckets.size()) {
      double rest = 0;
      int64_t rest_count = 0;
      for (size_t i = shown; i < p.buckets.size(); ++i) {
        rest += p.buckets[i].seconds;
        rest_count += p.buckets[i].count;
      }
      std::fprintf(out, "  %8lld %10.3f %10s %6.1f%%  (%zu more shapes)\n",
                   static_cast<long long>(rest_count), rest * 1e3, "", 100.0 * share(rest, p),
                   p.buckets.size() - shown);
    }
  }
}

nlohmann::json op_times_json(const std::vector<PhaseOpTimes>& phases) {
  nlohmann::json j;
  j["method"] = one_line(kMethod);
  j["phases"] = nlohmann::json::object();
  for (const PhaseOpTimes& p : phases) {
    nlohmann::json& jp = j["phases"][p.phase];
    jp["wall_s"] = p.wall_seconds > 0 ? nlohmann::json(p.wall_seconds) : nlohmann::json();
    jp["timed_s"] = p.timed_seconds > 0 ? nlohmann::json(p.timed_seconds) : nlohmann::json();
    jp["op_s"] = p.op_seconds;
    jp["ops"] = p.ops;
    jp["kinds"] = nlohmann::json::array();
    for (const KindTotal& k : p.kinds) {
      jp["kinds"].push_back({{"kind", k.kind},
                             {"count", k.count},
                             {"total_s", k.seconds},
                             {"share", share(k.seconds, p)}});
    }
    jp["ops_by_time"] = nlohmann::json::array();
    for (const OpBucket& b : p.buckets) {
      nlohmann::json e = {{"op", b.kind},
                          {"shape", b.shape},
                          {"label", b.label()},
                          {"count", b.count},
                          {"total_s", b.seconds},
                          {"mean_us", b.seconds / static_cast<double>(b.count) * 1e6},
                          {"share", share(b.seconds, p)}};
      if (b.bytes > 0) e["bytes"] = b.bytes;
      if (b.min_keys >= 0) e["keys"] = {b.min_keys, b.max_keys};
      jp["ops_by_time"].push_back(std::move(e));
    }
  }
  return j;
}

}  // namespace ferry::cli
