// The planner's search (internal to plan/planner.cpp): the space of plans for one budget, its
// starts, its moves, and the local search with kicks. planner.h describes the method.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "core/thread_pool.h"
#include "model/weights.h"
#include "plan/benefit.h"
#include "plan/plan.h"
#include "plan/planner.h"
#include "plan/schedule.h"

namespace ferry {

// A point of the search: which groups are resident, and the ring (1 slot = sequential mode).
struct SearchState {
  std::vector<uint8_t> resident;  // per group; groups that may stay on the host are never set
  int slots = 2;
  // per group: read in place from the host (the map path); only map candidates, never resident
  // too. Empty: none (every state built from a start has it sized, all zero).
  std::vector<uint8_t> mapped;

  bool operator==(const SearchState&) const = default;
};

class PlanSearch {
 public:
  PlanSearch(const ModelWeights& weights, const Schedule& schedule, uint64_t budget,
             const PlannerOptions& options);

  // Ring sizes tried: 1 (sequential, if allowed), then 2..max_slots (if pipelining is allowed).
  std::vector<int> ring_sizes() const;
  // The fewest large groups resident that make `slots` slots fit, then groups added in benefit
  // order while they fit; nullopt when no number of residents makes the ring fit.
  std::optional<SearchState> start(int slots) const;

  uint64_t device_bytes(const SearchState& st) const;
  bool fits(const SearchState& st) const { return device_bytes(st) <= budget_; }
  Plan to_plan(const SearchState& st) const;
  double cost(const SearchState& st);  // the predicted latency (one evaluation)
  // A plan's predicted latency; with options.lent_in_search, with its lent cache where faster.
  double price(const Plan& plan) const;
  // The predicted latency of each state, computed in parallel on the pool. `bounded`: only the
  // first states the evaluation budget still allows are priced (the result is that long).
  std::vector<double> costs(const std::vector<SearchState>& states, bool bounded);

  // Local search from `cur` (best improving move until none), then kicks: the nearest
  // non-improving neighbours are each searched from, and the best result is kept, until no
  // kick improves. Returns the moves applied; `cur` and `cur_s` end at the best plan found.
  int64_t run(SearchState& cur, double& cur_s);

  int64_t evaluations() const { return evaluations_; }

 private:
  struct Scored {
    SearchState state;
    double seconds;
  };
  // Device bytes of a state, kept up to date one group at a time: resident bytes and how many
  // streamed groups there are of each distinct size (the largest sets the slot size).
  struct Ledger {
    uint64_t resident = 0;
    std::vector<int64_t> streamed_of_size;  // per sizes_ entry
  };
  Ledger ledger(const SearchState& st) const;
  uint64_t ledger_bytes(const Ledger& l, int slots) const;
  void make_resident(Ledger& l, size_t g, bool resident) const;
  // Every move from `cur`, priced; each feasible result goes to `visit(state, seconds)`.
  template <class Visit>
  void neighbors(const SearchState& cur, double cur_s, Visit&& visit);
  // The knapsack re-choices for one ring size; the ones that fit go to `out`.
  // `mapped`: the map state kept; with `map_rest`, instead, every map candidate the knapsack
  // leaves out is mapped (not streamed: it bounds no slot).
  void resolve(const std::vector<double>& saved, int slots, size_t forced,
               const std::vector<size_t>& order, const std::vector<uint8_t>& mapped, bool map_rest,
               std::vector<SearchState>& out) const;
  bool is_mapped(const SearchState& st, size_t g) const {
    return !st.mapped.empty() && st.mapped[g];
  }
  // Best improving move until none; the final round's nearest neighbours go to `near`.
  int64_t improve(SearchState& cur, double& cur_s, std::vector<Scored>* near);
  void fill(SearchState& st, const std::vector<size_t>& order,
            const std::vector<uint8_t>& excluded) const;
  bool shrink(SearchState& st, const std::vector<size_t>& order, std::vector<uint8_t>& removed,
              size_t keep) const;
  void order_by_benefit();
  bool budget_left() const { return evaluations_ < options_.max_evaluations; }

  const ModelWeights& weights_;
  const Schedule& s_;
  uint64_t budget_;
  PlannerOptions options_;
  std::vector<GroupBenefit> benefits_;
  std::vector<size_t> candidates_;      // groups that can be resident or streamed
  std::vector<size_t> map_candidates_;  // candidates the search may also map
  std::vector<uint8_t> map_ok_;         // per group: map_search_candidates
  std::vector<size_t> order_;           // candidates in benefit order
  std::vector<uint64_t> sizes_;         // distinct candidate sizes, largest first, then 0
  std::vector<size_t> size_index_;      // per group: its size's index in sizes_
  std::unique_ptr<ThreadPool> pool_;    // null: one thread
  int64_t evaluations_ = 0;
};

}  // namespace ferry
