#include "plan/lent_cache.h"

#include <algorithm>
#include <array>
#include <string>

#include "plan/knapsack.h"

namespace ferry {

namespace {

bool ranges_overlap(uint64_t a0, uint64_t a1, uint64_t b0, uint64_t b1) {
  return a0 < b1 && b0 < a1;
}

uint64_t entry_end(const CacheEntry& e, std::span<const uint64_t> group_bytes) {
  return e.offset + group_bytes[static_cast<size_t>(e.group)];
}

// Fills `o` (reusing its storage: the predictor builds one per prediction). `check` set: the
// errors copy_order promises, and `o` is left part-built on one; null: the plan is trusted.
void build(CopyOrder& o, const Plan& plan, std::span<const Call> calls,
           std::span<const uint64_t> group_bytes, Status* check) {
  const size_t n = calls.size();
  o.kind.assign(n, CopyKind::none);
  o.item.assign(n, -1);
  o.entry.assign(n, -1);
  o.slot.assign(n, -1);
  o.decode.assign(n, -1);
  o.items.clear();
  o.decodes.clear();
  o.window = lent_window_start(calls);
  const size_t entries = plan.cached.size();
  // Per group, its entry (-1: none); not needed, and not made, without entries.
  std::vector<int32_t> entry_of(entries > 0 ? group_bytes.size() : 0, -1);
  auto entry_of_group = [&](size_t g) { return entries > 0 ? entry_of[g] : -1; };
  for (size_t e = 0; e < entries; ++e) {
    const auto g = static_cast<size_t>(plan.cached[e].group);
    if (g < entry_of.size()) entry_of[g] = static_cast<int32_t>(e);
  }
  o.entry_first.assign(entries, -1);
  o.entry_last.assign(entries, -1);
  for (size_t i = o.window; i < n && entries > 0; ++i) {
    const int32_t e = entry_of_group(static_cast<size_t>(calls[i].group));
    if (e < 0) continue;
    if (o.entry_first[static_cast<size_t>(e)] < 0) {
      o.entry_first[static_cast<size_t>(e)] = static_cast<int32_t>(i);
    }
    o.entry_last[static_cast<size_t>(e)] = static_cast<int32_t>(i);
  }
  auto bytes_overlap = [&](size_t a, size_t b) {
    const CacheEntry& ea = plan.cached[a];
    const CacheEntry& eb = plan.cached[b];
    return ranges_overlap(ea.offset, entry_end(ea, group_bytes), eb.offset,
                          entry_end(eb, group_bytes));
  };
  if (check != nullptr) {
    for (size_t a = 0; a < entries; ++a) {
      if (o.entry_first[a] < 0) {
        *check = make_error(ErrorCode::invalid_argument,
                            "plan: group #" + std::to_string(plan.cached[a].group) +
                                " is cached in the lent region but has no call after the last "
                                "vision or prefill call");
        return;
      }
      for (size_t b = a + 1; b < entries; ++b) {
        const bool at_once =
            o.entry_first[a] <= o.entry_last[b] && o.entry_first[b] <= o.entry_last[a];
        if (at_once && bytes_overlap(a, b)) {
          *check = make_error(ErrorCode::invalid_argument,
                              "plan: groups #" + std::to_string(plan.cached[a].group) + " and #" +
                                  std::to_string(plan.cached[b].group) +
                                  " share lent bytes while both are in use");
          return;
        }
      }
    }
  }
  // The last `slots` ring copies' calls, by ring index mod slots (validate_plan: at most 64).
  constexpr size_t kMaxSlots = 64;
  const size_t slots =
      plan.mode == StreamMode::sequential
          ? 1
          : std::clamp<size_t>(static_cast<size_t>(std::max(plan.slots, 1)), 1, kMaxSlots);
  std::array<uint32_t, kMaxSlots> ring_calls{};
  size_t ring = 0;  // ring calls so far
  const size_t staging =
      plan.mode == StreamMode::sequential
          ? 1
          : std::clamp<size_t>(static_cast<size_t>(std::max(plan.staging, 1)), 1, kMaxSlots);
  std::array<int32_t, kMaxSlots> staging_decodes{};  // per buffer: its last user's decode
  staging_decodes.fill(-1);
  size_t staged = 0;  // staged copies so far
  // The next ring slot for call i, and the slot's previous user (-1: none this run).
  auto take_slot = [&](size_t i, int32_t& slot, int32_t& after) {
    const size_t k = ring % slots;
    slot = static_cast<int32_t>(k);
    after = ring >= slots ? static_cast<int32_t>(ring_calls[k]) : -1;
    ring_calls[k] = static_cast<uint32_t>(i);
    ++ring;
    o.slot[i] = slot;
  };
  for (size_t i = 0; i < n; ++i) {
    const auto g = static_cast<size_t>(calls[i].group);
    if (g < plan.placement.size() && decoded_group(plan, g) &&
        plan.placement[g] != Placement::host) {
      DecodeItem d;
      d.call = static_cast<uint32_t>(i);
      take_slot(i, d.slot, d.after);
      o.decode[i] = static_cast<int32_t>(o.decodes.size());
      if (plan.placement[g] == Placement::streamed) {
        o.kind[i] = CopyKind::staged;
        CopyItem copy;
        copy.call = static_cast<uint32_t>(i);
        const size_t b = staged++ % staging;
        copy.staging = static_cast<int32_t>(b);
        copy.after_decode = staging_decodes[b];
        staging_decodes[b] = o.decode[i];
        d.copy = static_cast<int32_t>(o.items.size());
        d.staging = copy.staging;
        o.item[i] = d.copy;
        o.items.push_back(copy);
      } else {
        o.kind[i] = CopyKind::decode;
      }
      o.decodes.push_back(d);
      continue;
    }
    if (plan.placement[g] != Placement::streamed) continue;
    CopyItem item;
    item.call = static_cast<uint32_t>(i);
    const int32_t e = i >= o.window ? entry_of_group(g) : -1;
    if (e >= 0) {
      const auto eu = static_cast<size_t>(e);
      o.entry[i] = e;
      if (o.entry_first[eu] != static_cast<int32_t>(i)) {
        o.kind[i] = CopyKind::hit;
        continue;
      }
      o.kind[i] = CopyKind::fill;
      item.entry = e;
      item.after = static_cast<int32_t>(o.window) - 1;
      for (size_t other = 0; other < entries; ++other) {
        if (o.entry_last[other] >= 0 && o.entry_last[other] < o.entry_first[eu] &&
            bytes_overlap(eu, other)) {
          item.after = std::max(item.after, o.entry_last[other]);
        }
      }
    } else {
      o.kind[i] = CopyKind::ring;
      take_slot(i, item.slot, item.after);  // after: the slot's previous user
    }
    o.item[i] = static_cast<int32_t>(o.items.size());
    o.items.push_back(item);
  }
}

}  // namespace

size_t lent_window_start(std::span<const Call> calls) {
  size_t start = 0;
  for (size_t i = 0; i < calls.size(); ++i) {
    if (calls[i].phase == Phase::vision || calls[i].phase == Phase::prefill) start = i + 1;
  }
  return start;
}

uint64_t lent_bytes_needed(const Plan& plan, std::span<const uint64_t> group_bytes) {
  uint64_t need = 0;
  for (const CacheEntry& e : plan.cached) {
    if (static_cast<size_t>(e.group) < group_bytes.size()) {
      need = std::max(need, entry_end(e, group_bytes));
    }
  }
  return need;
}

Result<CopyOrder> copy_order(const Plan& plan, std::span<const Call> calls,
                             std::span<const uint64_t> group_bytes) {
  if (plan.placement.size() != group_bytes.size()) {
    return make_error(ErrorCode::invalid_argument, "plan: placements and groups differ in count");
  }
  for (const Call& c : calls) {
    if (c.group < 0 || static_cast<size_t>(c.group) >= group_bytes.size()) {
      return make_error(ErrorCode::invalid_argument, "plan: a call names no group");
    }
  }
  for (const CacheEntry& e : plan.cached) {
    if (e.group < 0 || static_cast<size_t>(e.group) >= group_bytes.size()) {
      return make_error(ErrorCode::invalid_argument, "plan: a cache entry names no group");
    }
  }
  Status check;
  CopyOrder o;
  build(o, plan, calls, group_bytes, &check);
  FERRY_RETURN_IF_ERROR(check);
  return o;
}

void copy_order_into(CopyOrder& out, const Plan& plan, std::span<const Call> calls,
                     std::span<const uint64_t> group_bytes) {
  build(out, plan, calls, group_bytes, nullptr);
}

Status check_lent_cache(const Plan& plan, std::span<const Call> calls,
                        std::span<const uint64_t> group_bytes, uint64_t lent_bytes) {
  FERRY_RETURN_IF_ERROR(copy_order(plan, calls, group_bytes).status());
  const uint64_t need = lent_bytes_needed(plan, group_bytes);
  if (need > lent_bytes) {
    return make_error(ErrorCode::invalid_argument, "plan: its lent cache needs " +
                                                       std::to_string(need) +
                                                       " bytes of the runner's idle region; " +
                                                       std::to_string(lent_bytes) + " are lent");
  }
  return {};
}

Plan with_lent_cache(Plan plan, std::span<const Call> calls, std::span<const uint64_t> group_bytes,
                     std::span<const double> dma_s, uint64_t lent_bytes) {
  plan.cached.clear();
  const size_t groups = group_bytes.size();
  if (lent_bytes == 0 || plan.placement.size() != groups || dma_s.size() != groups) return plan;
  const size_t window = lent_window_start(calls);
  std::vector<int64_t> uses(groups, 0);
  std::vector<int32_t> first(groups, -1), last(groups, -1);
  for (size_t i = window; i < calls.size(); ++i) {
    const auto g = static_cast<size_t>(calls[i].group);
    if (g >= groups) return plan;
    ++uses[g];
    if (first[g] < 0) first[g] = static_cast<int32_t>(i);
    last[g] = static_cast<int32_t>(i);
  }
  std::vector<size_t> candidates;
  for (size_t g = 0; g < groups; ++g) {
    if (plan.placement[g] == Placement::streamed && !decoded_group(plan, g) && uses[g] >= 2 &&
        group_bytes[g] > 0 && align_group_bytes(group_bytes[g]) <= lent_bytes) {
      candidates.push_back(g);
    }
  }
  // Waves: runs of candidates (by first call) whose lifetimes all overlap one another, so all
  // of them are in use at once (decode's text parts; then the expert's layers). Each wave's
  // entries are chosen by a knapsack over the whole region (the link time they spare), then
  // placed largest first at the lowest offset free of every entry placed so far whose lifetime
  // overlaps.
  std::stable_sort(candidates.begin(), candidates.end(),
                   [&](size_t a, size_t b) { return first[a] < first[b]; });
  struct Placed {
    uint64_t begin, end;
    int32_t first, last;
  };
  std::vector<Placed> placed;
  std::vector<std::pair<uint64_t, uint64_t>> busy;
  auto place = [&](size_t g) {
    const uint64_t size = align_group_bytes(group_bytes[g]);
    busy.clear();
    for (const Placed& p : placed) {
      if (p.first <= last[g] && first[g] <= p.last) busy.emplace_back(p.begin, p.end);
    }
    std::sort(busy.begin(), busy.end());
    uint64_t offset = 0;
    for (const auto& [b, e] : busy) {
      if (offset + size <= b) break;
      offset = std::max(offset, e);
    }
    if (offset + size > lent_bytes) return;
    placed.push_back({offset, offset + size, first[g], last[g]});
    plan.cached.push_back({static_cast<int>(g), offset});
  };
  size_t begin = 0;
  while (begin < candidates.size()) {
    size_t end = begin + 1;
    int32_t min_last = last[candidates[begin]];
    while (end < candidates.size() && first[candidates[end]] <= min_last) {
      min_last = std::min(min_last, last[candidates[end]]);
      ++end;
    }
    std::vector<KnapsackItem> items;
    for (size_t k = begin; k < end; ++k) {
      const size_t g = candidates[k];
      items.push_back(
          {align_group_bytes(group_bytes[g]), static_cast<double>(uses[g] - 1) * dma_s[g]});
    }
    const KnapsackResult chosen = solve_knapsack(items, lent_bytes, /*round_up=*/true);
    std::vector<size_t> wave;
    for (size_t c : chosen.chosen) wave.push_back(candidates[begin + c]);
    std::stable_sort(wave.begin(), wave.end(),
                     [&](size_t a, size_t b) { return group_bytes[a] > group_bytes[b]; });
    for (size_t g : wave) place(g);
    begin = end;
  }
  std::sort(plan.cached.begin(), plan.cached.end(),
            [](const CacheEntry& a, const CacheEntry& b) { return a.group < b.group; });
  return plan;
}

}  // namespace ferry
