#include "exec/session.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>

#include "core/units.h"
#include "exec/measuring_backend.h"

namespace ferry {

namespace {

// Device bytes of the model runner's own buffers, by purpose, from a measure pass.
Result<std::vector<std::pair<std::string, uint64_t>>> measure_runner(
    Backend& backend, const ModelConfig& config, const ModelWeights& weights,
    const Workload& workload, const InferenceOptions& options) {
  MeasuringBackend measure(backend.compute_stream_bytes());
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<ModelRunner> runner,
                         create_runner(measure, config, weights, workload, options));
  const MemoryLedger l = measure.ledger();
  return l.by_purpose;
}

// Calls per inference of every group.
std::vector<int64_t> call_counts(const ModelWeights& weights, const std::vector<Call>& calls) {
  std::vector<int64_t> n(weights.groups.size(), 0);
  for (const Call& c : calls) ++n[static_cast<size_t>(c.group)];
  return n;
}

// The default rule until the planner decides (plan/planner.h): the embedding on the host where
// kernels can read it there; then, while they fit beside two slots, the groups called most often
// per inference (ties: smaller first, then earlier), text layers at the paper's interleaved
// positions (Eq. 8) among themselves; everything else streamed.
Plan default_plan(const ModelWeights& weights, const std::vector<Call>& calls, uint64_t room,
                  bool in_place, StreamMode mode, int slots) {
  Plan p;
  p.mode = mode;
  p.placement.assign(weights.groups.size(), Placement::streamed);
  for (size_t i = 0; i < weights.groups.size(); ++i) {
    if (in_place && host_placement_allowed(weights.groups[i])) p.placement[i] = Placement::host;
  }
  const std::vector<int64_t> count = call_counts(weights, calls);
  std::vector<size_t> order;
  for (size_t i = 0; i < weights.groups.size(); ++i) {
    if (p.placement[i] == Placement::streamed) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (count[a] != count[b]) return count[a] > count[b];
    return weights.groups[a].bytes < weights.groups[b].bytes;
  });
  const auto slot_cost = [&](const Plan& q) {
    const uint64_t largest = largest_streamed_group(q, weights);
    const int n = largest == 0 ? 0 : (mode == StreamMode::sequential ? 1 : slots);
    return static_cast<uint64_t>(n) *
           ((largest + kGroupAlignment - 1) / kGroupAlignment * kGroupAlignment);
  };
  // Text layers fill in Eq. 8 order: how many fit is decided group by group below, and the
  // k-th one admitted takes the k-th position of the interleaving for the final count.
  uint64_t used = 0;
  int text_layers = 0, text_total = 0;
  for (const WeightGroup& g : weights.groups) text_total += g.kind == GroupKind::decoder_layer;
  for (size_t i : order) {
    const WeightGroup& g = weights.groups[i];
    Plan trial = p;
    trial.placement[i] = Placement::resident;
    if (used + g.bytes + slot_cost(trial) > room) continue;
    if (g.kind == GroupKind::decoder_layer) {
      ++text_layers;
      continue;  // placed below, interleaved
    }
    p.placement[i] = Placement::resident;
    used += g.bytes;
  }
  const std::vector<int> chosen = interleaved_layers(text_layers, text_total);
  for (size_t i = 0; i < weights.groups.size(); ++i) {
    const WeightGroup& g = weights.groups[i];
    if (g.kind == GroupKind::decoder_layer &&
        std::find(chosen.begin(), chosen.end(), g.layer) != chosen.end()) {
      p.placement[i] = Placement::resident;
    }
  }
  const uint64_t largest = largest_streamed_group(p, weights);
  p.slots = largest == 0 ? 0 : (mode == StreamMode::sequential ? 1 : slots);
  p.slot_bytes =
      largest == 0 ? 0 : (largest + kGroupAlignment - 1) / kGroupAlignment * kGroupAlignment;
  return p;
}

// --resident-count K: K text layers at Eq. 8's positions and every group that is not a layer
// (the paper's rule: patch embedding, mergers, LM head, expert projections resident), the
// embedding on the host where it can be.
Result<Plan> counted_plan(const ModelWeights& weights, int k, bool in_place, StreamMode mode,
                          int slots) {
  int text_total = 0;
  for (const WeightGroup& g : weights.groups) text_total += g.kind == GroupKind::decoder_layer;
  const std::vector<int> chosen = interleaved_layers(k, text_total);
  std::vector<std::string> names;
  for (const WeightGroup& g : weights.groups) {
    const bool layer = g.kind == GroupKind::decoder_layer || g.kind == GroupKind::vision_block ||
                       g.kind == GroupKind::expert_layer;
    if (g.kind == GroupKind::embedding) {
      if (!in_place) names.push_back(g.name);
    } else if (!layer) {
      names.push_back(g.name);
    } else if (g.kind == GroupKind::decoder_layer &&
               std::find(chosen.begin(), chosen.end(), g.layer) != chosen.end()) {
      names.push_back(g.name);
    }
  }
  return plan_with_resident(weights, names, mode, slots);
}

Result<Plan> explicit_plan(const ModelWeights& weights, const PlanRequest& req, bool in_place) {
  FERRY_ASSIGN_OR_RETURN(Plan p, plan_with_resident(weights, *req.resident, req.mode, req.slots));
  if (!in_place) {
    for (size_t i = 0; i < p.placement.size(); ++i) {
      if (p.placement[i] == Placement::host) {
        return make_error(ErrorCode::unsupported,
                          weights.groups[i].name +
                              " cannot stay on the host here (kernels cannot read the host tier "
                              "in place): name it in --resident");
      }
    }
  }
  return p;
}

MemoryBudget budget_of(const std::vector<std::pair<std::string, uint64_t>>& runner,
                       uint64_t stream_bytes, uint64_t runtime_bytes, const Plan& plan,
                       const ModelWeights& weights, uint64_t vram) {
  MemoryBudget m;
  m.budget = vram;
  if (runtime_bytes > 0) m.items.emplace_back("runtime", runtime_bytes);
  for (const auto& item : runner) m.items.push_back(item);
  if (stream_bytes > 0) m.items.emplace_back("stream workspaces", stream_bytes);
  m.items.emplace_back("resident weights", resident_bytes(plan, weights));
  m.items.emplace_back("slots", static_cast<uint64_t>(plan.slots) * plan.slot_bytes);
  return m;
}

}  // namespace

uint64_t MemoryBudget::total() const {
  uint64_t t = 0;
  for (const auto& [name, bytes] : items) t += bytes;
  return t;
}

uint64_t MemoryBudget::of(std::string_view item) const {
  for (const auto& [name, bytes] : items) {
    if (name == item) return bytes;
  }
  return 0;
}

std::string MemoryBudget::summary() const {
  std::string s;
  for (const auto& [name, bytes] : items) {
    if (bytes == 0) continue;
    s += (s.empty() ? "" : " + ") + name + " " + binary_bytes(bytes);
  }
  return s + " = " + binary_bytes(total());
}

Result<MemoryBudget> smallest_budget(Backend& backend, const ModelConfig& config,
                                     const ModelWeights& weights, const Workload& workload,
                                     const SessionOptions& options, uint64_t runtime_bytes,
                                     bool in_place) {
  FERRY_ASSIGN_OR_RETURN(auto runner,
                         measure_runner(backend, config, weights, workload, options.inference));
  std::vector<std::string> none;
  if (!in_place) {
    for (const WeightGroup& g : weights.groups) {
      if (host_placement_allowed(g)) none.push_back(g.name);
    }
  }
  const StreamMode mode = options.plan.mode;
  FERRY_ASSIGN_OR_RETURN(
      Plan p, plan_with_resident(weights, none, mode, mode == StreamMode::sequential ? 1 : 2));
  return budget_of(runner, backend.compute_stream_bytes(), runtime_bytes, p, weights, 0);
}

Result<std::pair<Plan, MemoryBudget>> plan_session(Backend& backend, const ModelConfig& config,
                                                   const ModelWeights& weights,
                                                   const Workload& workload,
                                                   const SessionOptions& options,
                                                   uint64_t runtime_bytes, bool in_place) {
  FERRY_ASSIGN_OR_RETURN(auto runner,
                         measure_runner(backend, config, weights, workload, options.inference));
  const uint64_t stream_bytes = backend.compute_stream_bytes();
  uint64_t fixed = runtime_bytes + stream_bytes;
  for (const auto& [name, bytes] : runner) fixed += bytes;
  const PlanRequest& req = options.plan;
  const int given = int(req.plan.has_value()) + int(req.resident.has_value()) +
                    int(req.resident_count.has_value());
  if (given > 1) {
    return make_error(ErrorCode::invalid_argument,
                      "give one of a plan file, --resident and --resident-count");
  }
  Plan plan;
  if (req.plan) {
    plan = *req.plan;
    FERRY_RETURN_IF_ERROR(validate_plan(plan, weights));
    if (!in_place && host_bytes(plan, weights) > 0) {
      return make_error(ErrorCode::unsupported,
                        "the plan keeps a group on the host, but kernels cannot read the host tier "
                        "in place here");
    }
  } else if (req.resident) {
    FERRY_ASSIGN_OR_RETURN(plan, explicit_plan(weights, req, in_place));
  } else if (req.resident_count) {
    FERRY_ASSIGN_OR_RETURN(
        plan, counted_plan(weights, *req.resident_count, in_place, req.mode, req.slots));
  } else if (options.vram) {
    FERRY_ASSIGN_OR_RETURN(std::vector<Call> calls, call_sequence(weights, config, workload));
    const uint64_t room = *options.vram > fixed ? *options.vram - fixed : 0;
    plan = default_plan(weights, calls, room, in_place, req.mode, req.slots);
  } else {
    plan = all_resident_plan(weights);
  }
  MemoryBudget m =
      budget_of(runner, stream_bytes, runtime_bytes, plan, weights, options.vram.value_or(0));
  if (options.vram && m.total() > *options.vram) {
    FERRY_ASSIGN_OR_RETURN(MemoryBudget least, smallest_budget(backend, config, weights, workload,
                                                               options, runtime_bytes, in_place));
    const bool plan_given = req.plan || req.resident || req.resident_count;
    if (least.total() > *options.vram || !plan_given) {
      return make_error(ErrorCode::out_of_memory, "--vram " + binary_bytes(*options.vram) +
                                                      " is too small: the smallest budget for " +
                                                      "this model and workload is " +
                                                      binary_bytes(least.total()) + " (" +
                                                      least.summary() + ")");
    }
    return make_error(ErrorCode::out_of_memory,
                      "--vram " + binary_bytes(*options.vram) + " cannot hold this plan (" +
                          m.summary() + "); the smallest budget for this model and workload is " +
                          binary_bytes(least.total()) + ", with every group streamed");
  }
  return std::make_pair(std::move(plan), std::move(m));
}

Session::~Session() {
  graphs_.clear();
  runner_.reset();
  provider_.reset();
  stream_.reset();
}

Result<std::unique_ptr<Session>> Session::open(Backend& backend, const ModelConfig& config,
                                               const ModelWeights& weights,
                                               const Checkpoint& checkpoint,
                                               const Workload& workload,
                                               const SessionOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  FERRY_RETURN_IF_ERROR(checkpoint.check_unchanged());
  std::unique_ptr<Session> s(new Session());
  s->backend_ = &backend;
  s->checkpoint_ = &checkpoint;
  // The host tier first: whether kernels can read it in place decides where the embedding goes.
  FERRY_ASSIGN_OR_RETURN(
      s->tier_, HostTier::open(backend, checkpoint, options.host_path, options.streaming.bounce));
  const std::optional<uint64_t> held = backend.driver_device_bytes();
  const uint64_t runtime = held ? *held + kRuntimeMarginBytes : 0;
  FERRY_ASSIGN_OR_RETURN(auto planned, plan_session(backend, config, weights, workload, options,
                                                    runtime, s->tier_.readable_in_place()));
  s->plan_ = std::move(planned.first);
  s->memory_ = std::move(planned.second);
  if (options.vram) {
    // Everything ferry allocates from here on is carved from this one region.
    FERRY_RETURN_IF_ERROR(backend.reserve(*options.vram - runtime));
  }
  s->stream_ = backend.create_stream();
  FERRY_ASSIGN_OR_RETURN(
      s->provider_, StreamingProvider::create(backend, *s->stream_, weights, s->tier_, s->plan_,
                                              options.streaming));
  FERRY_ASSIGN_OR_RETURN(s->runner_,
                         create_runner(backend, config, weights, workload, options.inference));
  // The resident groups were copied out of the mapping: a file rewritten in place meanwhile
  // faults nowhere (and the copy engine reads registered pages without faulting at all).
  FERRY_RETURN_IF_ERROR(checkpoint.check_unchanged());
  s->open_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return s;
}

Result<InferenceResult> Session::run(GroupProvider* through) {
  FERRY_ASSIGN_OR_RETURN(
      InferenceResult r,
      runner_->run(*stream_, through != nullptr ? *through : *provider_, &graphs_));
  // Streamed groups were read from the mapping during the run: trust them only if the files
  // are still the ones opened.
  FERRY_RETURN_IF_ERROR(checkpoint_->check_unchanged());
  return r;
}

}  // namespace ferry
