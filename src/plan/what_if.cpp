#include "plan/what_if.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/parse_size.h"
#include "plan/plan.h"

namespace ferry {
namespace {

Error bad(const std::string& msg) {
  return make_error(ErrorCode::invalid_argument, "--what-if: " + msg);
}

std::string known_cards() {
  std::string out;
  for (const NamedCard& c : named_cards()) {
    if (c.source_only) continue;
    if (!out.empty()) out += ", ";
    out += c.key;
  }
  return out;
}

// "25GB/s", "900MiB/s": a size per second, with a unit.
Result<double> parse_rate(std::string_view key, std::string_view text) {
  const std::string item = std::string(key) + "=" + std::string(text);
  constexpr std::string_view kPerSecond = "/s";
  if (text.size() <= kPerSecond.size() || !text.ends_with(kPerSecond)) {
    return bad(item + " is not a rate: give bytes per second with a unit, e.g. " +
               std::string(key) + "=25GB/s");
  }
  const std::string_view size = text.substr(0, text.size() - kPerSecond.size());
  if (std::all_of(size.begin(), size.end(),
                  [](char c) { return (c >= '0' && c <= '9') || c == '.'; })) {
    return bad(item + " has no unit: give e.g. " + std::string(key) + "=" + std::string(size) +
               "GB/s");
  }
  const Result<uint64_t> bytes = parse_size(size);
  if (!bytes.ok()) return bad(item + " is not a rate (e.g. 25GB/s, 900MiB/s)");
  const double v = static_cast<double>(*bytes);
  if (v < 1e6 || v > kMaxLinkRate) {
    return bad(item + " is outside 1MB/s to 100TB/s");
  }
  return v;
}

Result<double> parse_tflops(std::string_view text) {
  double v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || ptr != end || text.empty()) {
    return bad("tflops=" + std::string(text) + " is not a number of TFLOP/s (e.g. tflops=97)");
  }
  if (!std::isfinite(v) || v < 0.001 || v * 1e12 > kMaxFlops) {
    return bad("tflops=" + std::string(text) + " is outside 0.001 to 1000000");
  }
  return v * 1e12;
}

std::string gb_per_s(double bytes_per_s) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4g GB/s", bytes_per_s / 1e9);
  return buf;
}

std::string scale_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "x%.3g", s);
  return buf;
}

}  // namespace

Result<WhatIfTarget> parse_what_if(std::string_view spec) {
  if (spec.empty())
    return bad("empty: give a card (" + known_cards() + ") or keys (link=, hbm=, tflops=, vram=)");
  WhatIfTarget t;
  std::array<bool, 4> seen{};  // link, hbm, tflops, vram
  size_t start = 0;
  bool first = true;
  std::string keys_label;
  while (start <= spec.size()) {
    size_t comma = spec.find(',', start);
    if (comma == std::string_view::npos) comma = spec.size();
    const std::string_view item = spec.substr(start, comma - start);
    start = comma + 1;
    if (item.empty()) return bad("an empty item in \"" + std::string(spec) + "\"");
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      const NamedCard* card = find_card(item);
      if (card == nullptr || card->source_only) {
        return bad("unknown card \"" + std::string(item) + "\" (known: " + known_cards() +
                   "; or keys link=, hbm=, tflops=, vram=)");
      }
      if (!first) return bad("the card \"" + std::string(item) + "\" must come first, before keys");
      t.card = card;
      t.figures = MachineFigures{card->link_bytes_per_s, card->memory_bandwidth, card->peak_flops,
                                 card->vram};
      t.integrated = card->integrated;
      first = false;
      continue;
    }
    first = false;
    const std::string_view key = item.substr(0, eq);
    const std::string_view value = item.substr(eq + 1);
    size_t k = 0;
    if (key == "link") {
      k = 0;
    } else if (key == "hbm") {
      k = 1;
    } else if (key == "tflops") {
      k = 2;
    } else if (key == "vram") {
      k = 3;
    } else {
      return bad("unknown key \"" + std::string(key) + "\" (keys: link, hbm, tflops, vram)");
    }
    if (seen[k]) return bad("\"" + std::string(key) + "\" is given twice");
    seen[k] = true;
    if (value.empty()) return bad(std::string(key) + "= has no value");
    switch (k) {
      case 0: {
        FERRY_ASSIGN_OR_RETURN(double v, parse_rate(key, value));
        t.figures.link_bytes_per_s = v;
        break;
      }
      case 1: {
        FERRY_ASSIGN_OR_RETURN(double v, parse_rate(key, value));
        t.figures.memory_bandwidth = v;
        break;
      }
      case 2: {
        FERRY_ASSIGN_OR_RETURN(double v, parse_tflops(value));
        t.figures.peak_flops = v;
        break;
      }
      default: {
        const Result<uint64_t> v = parse_size(value);
        if (!v.ok() || *v == 0) {
          return bad("vram=" + std::string(value) + " is not a size (e.g. vram=16GiB)");
        }
        t.figures.vram = *v;
        break;
      }
    }
    if (!keys_label.empty()) keys_label += ",";
    keys_label += item;
  }
  if (t.card != nullptr) {
    t.label = std::string(t.card->name);
    if (!keys_label.empty()) t.label += " with " + keys_label;
  } else {
    t.label = keys_label;
  }
  return t;
}

Result<Repricing> reprice_profile(const Profile& measured, const ModelWeights& weights,
                                  const std::vector<Call>& calls,
                                  const std::vector<CallCost>& costs, const WhatIfTarget& target) {
  FERRY_RETURN_IF_ERROR(check_profile(measured, weights, calls));
  if (costs.size() != calls.size()) {
    return make_error(ErrorCode::internal, "what-if: one cost per call expected");
  }
  Repricing r;
  r.target = target;
  // The source's figures: published where the table knows its device (like against like),
  // measured otherwise.
  const NamedCard* source = find_card(measured.device);
  const std::string& own = measured.source;  // "measured" or "estimated"
  r.link = {measured.link_bytes_per_s,
            target.figures.link_bytes_per_s.value_or(measured.link_bytes_per_s), own};
  if (source != nullptr) {
    r.memory = {source->memory_bandwidth, 0, "published"};
    r.compute = {source->peak_flops, 0, "published"};
  } else {
    r.memory = {measured.memory_bandwidth, 0, own};
    r.compute = {measured.peak_flops, 0, own};
  }
  r.memory.to = target.figures.memory_bandwidth.value_or(r.memory.from);
  r.compute.to = target.figures.peak_flops.value_or(r.compute.from);
  if (target.figures.memory_bandwidth && !(r.memory.from > 0)) {
    return bad(
        "the profile has no memory bandwidth to scale from (compute.memory_bandwidth_bytes_per_s "
        "is 0)");
  }
  if (target.figures.peak_flops && !(r.compute.from > 0)) {
    return bad("the profile has no compute peak to scale from (compute.peak_flops is 0)");
  }
  if (!(r.link.from > 0)) return bad("the profile has no link rate to scale from");
  r.copy_scale = r.link.from / r.link.to;

  // Per (group, phase): Σ target floor and Σ source floor over its calls.
  const size_t groups = weights.groups.size();
  std::vector<std::array<double, kPhaseCount>> to_sum(groups), from_sum(groups);
  const bool scale_memory = r.memory.from > 0;
  const bool scale_compute = r.compute.from > 0;
  auto floor_s = [&](const CallCost& c, double flops, double bw) {
    const double t_flops = scale_compute ? c.flops / flops : 0.0;
    const double t_bytes = scale_memory ? c.bytes() / bw : 0.0;
    return std::max(t_flops, t_bytes);
  };
  for (size_t i = 0; i < calls.size(); ++i) {
    const size_t g = static_cast<size_t>(calls[i].group);
    const size_t ph = phase_index(calls[i].phase);
    if (host_placement_allowed(weights.groups[g])) {
      ++r.link_bound_calls;
      continue;
    }
    const CallCost& c = costs[i];
    const double to = floor_s(c, r.compute.to, r.memory.to);
    to_sum[g][ph] += to;
    from_sum[g][ph] += floor_s(c, r.compute.from, r.memory.from);
    const bool memory_bound =
        scale_memory && (!scale_compute || c.bytes() / r.memory.to >= c.flops / r.compute.to);
    ++(memory_bound ? r.memory_bound_calls : r.compute_bound_calls);
  }

  Profile& p = r.profile;
  p = measured;
  p.device = target.label + " (projected from " +
             (measured.device.empty() ? "an unnamed device" : measured.device) + ")";
  if (p.device.size() > kMaxProfileString) p.device.resize(kMaxProfileString);
  p.link_bytes_per_s = r.link.to;
  p.memory_bandwidth = r.memory.to;
  p.peak_flops = r.compute.to;
  if (p.host.inputs_s) *p.host.inputs_s *= r.copy_scale;

  double measured_total = 0, repriced_total = 0;
  bool any = false;
  std::vector<std::array<int64_t, kPhaseCount>> calls_of(groups);
  for (const Call& c : calls) ++calls_of[static_cast<size_t>(c.group)][phase_index(c.phase)];
  for (size_t g = 0; g < groups; ++g) {
    GroupProfile& gp = p.groups[g];
    gp.dma_s *= r.copy_scale;
    const bool gathers = host_placement_allowed(weights.groups[g]);
    for (size_t ph = 0; ph < kPhaseCount; ++ph) {
      if (!gp.exe_s[ph]) continue;
      double s = 1;
      if (gathers) {
        s = r.copy_scale;
      } else if (from_sum[g][ph] > 0) {
        s = to_sum[g][ph] / from_sum[g][ph];
      }
      if (calls_of[g][ph] > 0) {
        const double n = static_cast<double>(calls_of[g][ph]);
        measured_total += *gp.exe_s[ph] * n;
        repriced_total += *gp.exe_s[ph] * s * n;
        if (!gathers) {
          r.exe_scale_min = any ? std::min(r.exe_scale_min, s) : s;
          r.exe_scale_max = any ? std::max(r.exe_scale_max, s) : s;
          any = true;
        }
      }
      *gp.exe_s[ph] *= s;
      if (gp.exe_copying_s[ph]) *gp.exe_copying_s[ph] *= s;
      if (gp.exe_mapped_s[ph]) {
        gp.exe_mapped_s[ph] = std::max(*gp.exe_mapped_s[ph] * r.copy_scale, *gp.exe_s[ph]);
      }
      // Every re-priced time stays inside what a profile may hold.
      for (auto* t : {&gp.exe_s[ph], &gp.exe_copying_s[ph], &gp.exe_mapped_s[ph]}) {
        if (*t && **t > kMaxProfileSeconds) {
          return bad("group " + gp.name + " would take more than an hour per call on the target");
        }
      }
    }
    if (gp.dma_s > kMaxProfileSeconds) {
      return bad("copying group " + gp.name + " would take more than an hour on the target");
    }
  }
  r.exe_scale_total = measured_total > 0 ? repriced_total / measured_total : 1.0;
  return r;
}

std::string describe_repricing(const Repricing& r) {
  char compute[160];
  std::snprintf(compute, sizeof compute, "tensor %.4g TFLOP/s %s -> %.4g", r.compute.from / 1e12,
                r.compute.from_what.c_str(), r.compute.to / 1e12);
  return "projection for " + r.target.label + ": copies " + scale_text(r.copy_scale) + " (link " +
         gb_per_s(r.link.from) + " " + r.link.from_what + " -> " + gb_per_s(r.link.to) +
         "); compute " + scale_text(r.exe_scale_total) + " overall, " +
         scale_text(r.exe_scale_min) + " to " + scale_text(r.exe_scale_max) +
         " per group (memory " + gb_per_s(r.memory.from) + " " + r.memory.from_what + " -> " +
         gb_per_s(r.memory.to) + ", " + std::to_string(r.memory_bound_calls) +
         " calls memory-bound; " + compute + ", " + std::to_string(r.compute_bound_calls) +
         " compute-bound; " + std::to_string(r.link_bound_calls) +
         " row gathers scaled with the link); host steps as measured";
}

}  // namespace ferry
