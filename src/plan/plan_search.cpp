#include "plan/plan_search.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <map>
#include <thread>
#include <tuple>

#include "plan/knapsack.h"
#include "plan/lent_cache.h"
#include "plan/predictor.h"

namespace ferry {
namespace {

// Van der Corput order of 0..n-1: 0, n/2, n/4, 3n/4, ...; any prefix is spread evenly.
std::vector<size_t> spread_order(size_t n) {
  std::vector<size_t> out;
  std::vector<uint8_t> seen(n, 0);
  for (uint32_t j = 0; out.size() < n && j < (1u << 20); ++j) {
    double x = 0, f = 0.5;
    for (uint32_t b = j; b != 0; b >>= 1, f *= 0.5) x += (b & 1u) ? f : 0;
    const size_t i = std::min(n - 1, static_cast<size_t>(x * static_cast<double>(n)));
    if (!seen[i]) {
      seen[i] = 1;
      out.push_back(i);
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (!seen[i]) out.push_back(i);
  }
  return out;
}

// A move must beat the current plan by more than rounding noise.
double improving_below(double seconds) {
  return seconds - 1e-12 * seconds;
}

}  // namespace

PlanSearch::PlanSearch(const ModelWeights& weights, const Schedule& schedule, uint64_t budget,
                       const PlannerOptions& options)
    : weights_(weights), s_(schedule), budget_(budget), options_(options) {
  benefits_ = residency_benefits(schedule);
  for (size_t g = 0; g < schedule.group_count(); ++g) {
    if (!schedule.host_allowed[g]) candidates_.push_back(g);
  }
  map_ok_ = map_search_candidates(schedule);
  for (size_t g : candidates_) {
    if (map_ok_[g]) map_candidates_.push_back(g);
  }
  order_by_benefit();
  for (size_t g : candidates_) sizes_.push_back(schedule.bytes[g]);
  std::sort(sizes_.begin(), sizes_.end(), std::greater<>());
  sizes_.erase(std::unique(sizes_.begin(), sizes_.end()), sizes_.end());
  if (sizes_.empty() || sizes_.back() != 0) sizes_.push_back(0);  // 0: everything resident
  const int threads =
      options.threads > 0
          ? options.threads
          : static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
  if (threads > 1) pool_ = std::make_unique<ThreadPool>(threads);
  size_index_.assign(schedule.group_count(), 0);
  for (size_t g : candidates_) {
    size_index_[g] = static_cast<size_t>(
        std::find(sizes_.begin(), sizes_.end(), schedule.bytes[g]) - sizes_.begin());
  }
}

std::vector<int> PlanSearch::ring_sizes() const {
  std::vector<int> sizes;
  if (options_.allow_sequential) sizes.push_back(1);
  if (!options_.allow_pipelined) return sizes;
  for (int k = 2; k <= std::min(options_.max_slots, 64); ++k) sizes.push_back(k);
  return sizes;
}

PlanSearch::Ledger PlanSearch::ledger(const SearchState& st) const {
  Ledger l;
  l.streamed_of_size.assign(sizes_.size(), 0);
  for (size_t g : candidates_) {
    if (st.resident[g]) {
      l.resident += s_.bytes[g];
    } else if (!is_mapped(st, g)) {
      ++l.streamed_of_size[size_index_[g]];
    }
  }
  return l;
}

uint64_t PlanSearch::ledger_bytes(const Ledger& l, int slots) const {
  for (size_t i = 0; i < sizes_.size(); ++i) {
    if (l.streamed_of_size[i] > 0 && sizes_[i] > 0) {
      return l.resident + static_cast<uint64_t>(slots) * align_group_bytes(sizes_[i]);
    }
  }
  return l.resident;
}

void PlanSearch::make_resident(Ledger& l, size_t g, bool resident) const {
  const int64_t step = resident ? 1 : -1;
  l.resident = resident ? l.resident + s_.bytes[g] : l.resident - s_.bytes[g];
  l.streamed_of_size[size_index_[g]] -= step;
}

uint64_t PlanSearch::device_bytes(const SearchState& st) const {
  return ledger_bytes(ledger(st), st.slots);
}

Plan PlanSearch::to_plan(const SearchState& st) const {
  Plan p;
  p.placement.assign(s_.group_count(), Placement::host);
  uint64_t largest = 0;
  for (size_t g : candidates_) {
    if (is_mapped(st, g)) {
      p.placement[g] = Placement::host;
      continue;
    }
    p.placement[g] = st.resident[g] ? Placement::resident : Placement::streamed;
    if (!st.resident[g]) largest = std::max(largest, s_.bytes[g]);
  }
  p.mode = st.slots == 1 ? StreamMode::sequential : StreamMode::pipelined;
  p.slots = largest > 0 ? st.slots : 0;
  p.slot_bytes = largest > 0 ? align_group_bytes(largest) : 0;
  return p;
}

double PlanSearch::price(const Plan& plan) const {
  const double without = predict_total_s(s_, plan);
  if (!options_.lent_in_search || options_.lent_bytes == 0) return without;
  const Plan cached = with_lent_cache(plan, s_.calls, s_.bytes, s_.dma_s, options_.lent_bytes);
  if (cached.cached.empty()) return without;
  return std::min(without, predict_total_s(s_, cached));
}

double PlanSearch::cost(const SearchState& st) {
  ++evaluations_;
  return price(to_plan(st));
}

std::vector<double> PlanSearch::costs(const std::vector<SearchState>& states, bool bounded) {
  size_t n = states.size();
  if (bounded) {
    n = std::min<size_t>(
        n, static_cast<size_t>(std::max<int64_t>(options_.max_evaluations - evaluations_, 0)));
  }
  evaluations_ += static_cast<int64_t>(n);
  std::vector<double> out(n);
  // Each prediction is a pure function of its state: the result is the same on any thread count.
  parallel_for(pool_.get(), static_cast<int64_t>(n), 4, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const auto k = static_cast<size_t>(i);
      out[k] = price(to_plan(states[k]));
    }
  });
  return out;
}

std::optional<SearchState> PlanSearch::start(int slots) const {
  for (uint64_t t : sizes_) {
    SearchState st{std::vector<uint8_t>(s_.group_count(), 0), slots,
                   std::vector<uint8_t>(s_.group_count(), 0)};
    for (size_t g : candidates_) st.resident[g] = s_.bytes[g] > t ? 1 : 0;
    if (fits(st)) {
      fill(st, order_, {});
      return st;
    }
  }
  return std::nullopt;
}

void PlanSearch::fill(SearchState& st, const std::vector<size_t>& order,
                      const std::vector<uint8_t>& excluded) const {
  Ledger l = ledger(st);
  for (size_t g : order) {
    if (st.resident[g] || is_mapped(st, g) || (!excluded.empty() && excluded[g])) continue;
    make_resident(l, g, true);
    if (ledger_bytes(l, st.slots) <= budget_) {
      st.resident[g] = 1;
    } else {
      make_resident(l, g, false);
    }
  }
}

bool PlanSearch::shrink(SearchState& st, const std::vector<size_t>& order,
                        std::vector<uint8_t>& removed, size_t keep) const {
  Ledger l = ledger(st);
  uint64_t bytes = ledger_bytes(l, st.slots);
  for (auto it = order.begin(); it != order.end() && bytes > budget_; ++it) {
    const size_t g = *it;
    if (!st.resident[g] || g == keep) continue;
    make_resident(l, g, false);
    const uint64_t after = ledger_bytes(l, st.slots);
    if (after < bytes) {
      bytes = after;
      st.resident[g] = 0;
      removed[g] = 1;
    } else {
      make_resident(l, g, true);
    }
  }
  return bytes <= budget_;
}

// For a ring of `slots` and each bound t on the largest streamed group: the groups above t
// resident, `forced` too (unless it is the group count), the others chosen by a knapsack over
// `saved` (the seconds each saves resident), then the room left filled in `order`.
void PlanSearch::resolve(const std::vector<double>& saved, int slots, size_t forced,
                         const std::vector<size_t>& order, const std::vector<uint8_t>& mapped,
                         bool map_rest, std::vector<SearchState>& out) const {
  const size_t n = s_.group_count();
  for (uint64_t t : sizes_) {
    SearchState st{std::vector<uint8_t>(n, 0), slots,
                   map_rest ? std::vector<uint8_t>(n, 0) : mapped};
    uint64_t used = t > 0 ? static_cast<uint64_t>(slots) * align_group_bytes(t) : 0;
    std::vector<KnapsackItem> items;
    std::vector<size_t> item_group;
    for (size_t g : candidates_) {
      if (is_mapped(st, g)) continue;               // the map moves change these, not the knapsack
      if (map_rest && map_ok_[g] && g != forced) {  // resident if chosen, else mapped
        st.mapped[g] = 1;
        if (saved[g] > 0) {
          items.push_back({s_.bytes[g], saved[g]});
          item_group.push_back(g);
        }
        continue;
      }
      if (s_.bytes[g] > t || g == forced) {
        st.resident[g] = 1;
        used += s_.bytes[g];
      } else if (saved[g] > 0) {
        items.push_back({s_.bytes[g], saved[g]});
        item_group.push_back(g);
      }
    }
    if (used > budget_) continue;
    // Coarse units keep the table small; the fill after it uses what the rounding left.
    for (size_t i : solve_knapsack(items, budget_ - used, /*round_up=*/true, 1024).chosen) {
      st.resident[item_group[i]] = 1;
      if (!st.mapped.empty()) st.mapped[item_group[i]] = 0;
    }
    fill(st, order, {});
    if (fits(st)) out.push_back(std::move(st));
  }
}

template <class Visit>
void PlanSearch::neighbors(const SearchState& cur, double cur_s, Visit&& visit) {
  const size_t n = s_.group_count();
  // Every group flipped alone, priced whether or not it fits: what the predictor says each
  // resident saves now (its loss when it streams) and each streamed group would save (its gain
  // when resident). These are the add and drop moves, and they order the compound moves below
  // better than the static benefit can.
  // A mapped group flips to resident. Then each map candidate is mapped (from resident or
  // streamed) or, mapped, streams again.
  auto map_flipped = [&](size_t g) {  // mapped (from resident or streamed), or streamed again
    SearchState st = cur;
    if (st.mapped.empty()) st.mapped.assign(n, 0);
    st.mapped[g] = !is_mapped(cur, g);
    st.resident[g] = 0;
    return st;
  };
  std::vector<SearchState> flips;
  flips.reserve(candidates_.size() + map_candidates_.size());
  for (size_t g : candidates_) {
    flips.push_back(cur);
    SearchState& st = flips.back();
    if (is_mapped(st, g)) st.mapped[g] = 0;
    st.resident[g] = !cur.resident[g];
  }
  for (size_t g : map_candidates_) flips.push_back(map_flipped(g));
  const std::vector<double> flipped = costs(flips, /*bounded=*/false);
  std::vector<double> saved(n, 0), worth(n, 0);
  std::vector<size_t> residents, streamed;
  for (size_t i = 0; i < flips.size(); ++i) {
    const double t = flipped[i];
    if (fits(flips[i])) visit(flips[i], t);
    if (i >= candidates_.size()) continue;
    const size_t g = candidates_[i];
    saved[g] = cur.resident[g] ? t - cur_s : cur_s - t;
    worth[g] = saved[g] / static_cast<double>(std::max<uint64_t>(s_.bytes[g], 1));
    if (is_mapped(cur, g)) continue;  // neither swapped nor evicted: the map moves handle it
    (cur.resident[g] ? residents : streamed).push_back(g);
  }
  // What each map candidate saves resident rather than mapped (the re-choices that map what
  // they leave out weigh it by this): its cost mapped less its cost resident, one of them the
  // current plan's and the other a flip's.
  std::vector<double> saved_vs_mapped = saved;
  for (size_t k = 0; k < map_candidates_.size(); ++k) {
    const size_t g = map_candidates_[k];
    const size_t at = static_cast<size_t>(
        std::lower_bound(candidates_.begin(), candidates_.end(), g) - candidates_.begin());
    const double as_mapped = is_mapped(cur, g) ? cur_s : flipped[candidates_.size() + k];
    const double as_resident = cur.resident[g] ? cur_s : flipped[at];
    saved_vs_mapped[g] = as_mapped - as_resident;
  }
  // The compound moves are built first, in a fixed order, then priced together.
  std::vector<SearchState> moves;
  auto price = [&](SearchState&& st) {
    if (fits(st)) moves.push_back(std::move(st));
  };
  auto by_worth = [&](std::vector<size_t> v, bool ascending) {
    std::stable_sort(v.begin(), v.end(), [&](size_t a, size_t b) {
      return ascending ? worth[a] < worth[b] : worth[a] > worth[b];
    });
    return v;
  };
  const std::vector<size_t> gain_order = by_worth(streamed, false);
  const std::vector<size_t> loss_order = by_worth(residents, true);
  std::vector<size_t> unmapped;
  for (size_t g : candidates_) {
    if (!is_mapped(cur, g)) unmapped.push_back(g);
  }
  const std::vector<size_t> worth_order = by_worth(unmapped, false);
  std::vector<size_t> least_benefit;
  for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
    if (!is_mapped(cur, *it)) least_benefit.push_back(*it);
  }

  // Swap candidates: of each class of interchangeable groups, the first few by worth.
  auto firsts = [&](const std::vector<size_t>& order) {
    std::map<std::tuple<int, int, uint64_t>, int> taken;
    std::vector<size_t> out;
    for (size_t g : order) {
      const WeightGroup& w = weights_.groups[g];
      const auto key =
          std::make_tuple(static_cast<int>(w.kind), static_cast<int>(w.part), s_.bytes[g]);
      if (++taken[key] <= options_.swaps_per_class) out.push_back(g);
    }
    return out;
  };
  const std::vector<size_t> swap_out = firsts(loss_order), swap_in = firsts(gain_order);
  for (size_t r : swap_out) {  // swap, then fill
    for (size_t g : swap_in) {
      SearchState st = cur;
      st.resident[r] = 0;
      st.resident[g] = 1;
      if (!fits(st)) continue;
      std::vector<uint8_t> excluded(n, 0);
      excluded[r] = 1;
      fill(st, gain_order, excluded);
      price(std::move(st));
    }
  }
  for (size_t g : map_candidates_) {  // mapped or unmapped, then the room left filled
    SearchState st = map_flipped(g);
    if (!fits(st)) {
      std::vector<uint8_t> removed(n, 0);
      if (!shrink(st, loss_order, removed, n)) continue;
      fill(st, gain_order, removed);
    } else {
      fill(st, gain_order, {});
    }
    price(std::move(st));
  }
  const std::array<const std::vector<size_t>*, 2> evict_orders = {&loss_order, &least_benefit};
  for (size_t g : streamed) {  // evict to make room, then fill
    for (const std::vector<size_t>* evict_order : evict_orders) {
      SearchState st = cur;
      st.resident[g] = 1;
      std::vector<uint8_t> removed(n, 0);
      if (!shrink(st, *evict_order, removed, g)) continue;
      fill(st, gain_order, removed);
      price(std::move(st));
    }
  }
  // Re-chosen whole by a knapsack over what each group saves now: for every ring size, with
  // each of the streamed groups of most gain per byte forced in, and with each of the
  // residents of least loss per byte forced out. The knapsacks are most of a round's work:
  // they run in parallel, and their states join the moves in this fixed order.
  struct Resolve {
    std::vector<double> saved;
    int slots;
    size_t forced;
    std::vector<size_t> order;
    bool map_rest;
    std::vector<SearchState> states;
  };
  std::vector<Resolve> resolves;
  for (int slots : ring_sizes()) resolves.push_back({saved, slots, n, worth_order, false, {}});
  if (!map_candidates_.empty()) {  // the same with every candidate left out mapped
    for (int slots : ring_sizes()) {
      resolves.push_back({saved_vs_mapped, slots, n, worth_order, true, {}});
    }
  }
  const size_t forced = static_cast<size_t>(std::max(options_.forced_resolves, 0));
  for (size_t i = 0; i < gain_order.size() && i < forced; ++i) {
    resolves.push_back({saved, cur.slots, gain_order[i], worth_order, false, {}});
  }
  for (size_t i = 0; i < loss_order.size() && i < forced; ++i) {
    const size_t r = loss_order[i];
    Resolve x{saved, cur.slots, n, worth_order, false, {}};
    x.saved[r] = 0;
    x.order.erase(std::remove(x.order.begin(), x.order.end(), r), x.order.end());
    resolves.push_back(std::move(x));
  }
  parallel_for(pool_.get(), static_cast<int64_t>(resolves.size()), 1,
               [&](int64_t begin, int64_t end) {
                 for (int64_t i = begin; i < end; ++i) {
                   Resolve& x = resolves[static_cast<size_t>(i)];
                   resolve(x.saved, x.slots, x.forced, x.order, cur.mapped, x.map_rest, x.states);
                 }
               });
  for (Resolve& x : resolves) {
    for (SearchState& st : x.states) moves.push_back(std::move(st));
  }
  const std::vector<double> priced = costs(moves, /*bounded=*/true);
  for (size_t i = 0; i < priced.size(); ++i) visit(moves[i], priced[i]);
}

int64_t PlanSearch::improve(SearchState& cur, double& cur_s, std::vector<Scored>* near) {
  int64_t applied = 0;
  const size_t keep = static_cast<size_t>(std::max(options_.kicks, 0));
  while (budget_left()) {
    std::optional<Scored> best;
    if (near != nullptr) near->clear();
    neighbors(cur, cur_s, [&](const SearchState& st, double t) {
      if (t < improving_below(best ? best->seconds : cur_s)) best = Scored{st, t};
      if (near == nullptr || keep == 0 || st == cur) return;
      if (near->size() == keep && t >= near->back().seconds) return;
      for (const Scored& x : *near) {
        if (x.state == st) return;
      }
      near->push_back(Scored{st, t});
      std::stable_sort(near->begin(), near->end(),
                       [](const Scored& a, const Scored& b) { return a.seconds < b.seconds; });
      if (near->size() > keep) near->pop_back();
    });
    if (!best) break;
    cur = std::move(best->state);
    cur_s = best->seconds;
    ++applied;
  }
  return applied;
}

int64_t PlanSearch::run(SearchState& cur, double& cur_s) {
  std::vector<Scored> near;
  int64_t applied = improve(cur, cur_s, &near);
  bool kicked = true;
  while (kicked && budget_left()) {
    kicked = false;
    for (const Scored& kick : std::vector<Scored>(near)) {
      SearchState st = kick.state;
      double t = kick.seconds;
      std::vector<Scored> next;
      const int64_t moves = improve(st, t, &next);
      if (t < improving_below(cur_s)) {
        cur = std::move(st);
        cur_s = t;
        near = std::move(next);
        applied += moves + 1;
        kicked = true;
        break;
      }
    }
  }
  return applied;
}

void PlanSearch::order_by_benefit() {
  order_ = candidates_;
  std::stable_sort(order_.begin(), order_.end(), [&](size_t a, size_t b) {
    return benefits_[a].per_byte > benefits_[b].per_byte;
  });
  // A run of equal benefit, kind and size goes in spread order, so that any prefix of it
  // interleaves with the rest of its module (Eq. 8's idea).
  auto same = [&](size_t a, size_t b) {
    const double x = benefits_[a].per_byte, y = benefits_[b].per_byte;
    return weights_.groups[a].kind == weights_.groups[b].kind && s_.bytes[a] == s_.bytes[b] &&
           std::abs(x - y) <= 1e-12 * std::max(std::abs(x), std::abs(y));
  };
  for (size_t i = 0; i < order_.size();) {
    size_t j = i + 1;
    while (j < order_.size() && same(order_[i], order_[j])) ++j;
    if (j - i > 2) {
      std::vector<size_t> run(order_.begin() + static_cast<std::ptrdiff_t>(i),
                              order_.begin() + static_cast<std::ptrdiff_t>(j));
      std::sort(run.begin(), run.end());
      const std::vector<size_t> spread = spread_order(run.size());
      for (size_t k = 0; k < run.size(); ++k) order_[i + k] = run[spread[k]];
    }
    i = j;
  }
}

}  // namespace ferry
