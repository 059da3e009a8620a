#include "exec/session_plan.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

#include "backend/measuring_backend.h"
#include "core/thread_pool.h"
#include "core/units.h"
#include "host/encode_groups.h"
#include "model/cost.h"
#include "plan/lent_cache.h"

namespace ferry {

namespace {

// Device bytes of the model runner's own buffers, by purpose, from a measure pass.
struct RunnerBytes {
  std::vector<std::pair<std::string, uint64_t>> by_purpose;
  uint64_t lent = 0;
};

Result<RunnerBytes> measure_runner(Backend& backend, const ModelConfig& config,
                                   const ModelWeights& weights, const Workload& workload,
                                   const InferenceOptions& options) {
  MeasuringBackend measure(backend.compute_stream_bytes());
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<ModelRunner> runner,
                         create_runner(measure, config, weights, workload, options));
  return RunnerBytes{measure.ledger().by_purpose, runner->lent_region().bytes};
}

// --resident-count K: K text layers at Eq. 8's positions and every group that is not a layer
// (the paper's rule: patch embedding, mergers, LM head, expert projections resident), the
// embedding on the host where it can be.
Result<Plan> counted_plan(const ModelWeights& weights, int k, bool in_place, StreamMode mode,
                          int slots) {
  int text_total = 0;
  for (const WeightGroup& g : weights.groups) {
    // A layer is its parts: count each layer once.
    text_total += g.kind == GroupKind::decoder_layer &&
                  (g.part == LayerPart::whole || g.part == LayerPart::attention);
  }
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

// `lent_bytes`: the runner's idle region, which the planner may use unless the request says not.
PlannerOptions planner_options(const PlanRequest& req, uint64_t lent_bytes) {
  PlannerOptions o;
  if (req.lent_cache) o.lent_bytes = lent_bytes;
  o.lent_in_search = req.thorough_search;
  const bool sequential = req.mode == StreamMode::sequential;
  o.allow_sequential = !req.mode_given || sequential;
  o.allow_pipelined = !req.mode_given || !sequential;
  if (req.slots_given) o.max_slots = std::clamp(req.slots, 2, 64);
  return o;
}

Error too_small(uint64_t vram, const MemoryBudget& least) {
  return make_error(ErrorCode::out_of_memory,
                    "--vram " + binary_bytes(vram) +
                        " is too small: the smallest budget for this model and workload is " +
                        binary_bytes(least.total()) + " (" + least.summary() + ")");
}

}  // namespace

int64_t expected_expert_keys(const ModelConfig& config, const Workload& w) {
  return config.alpamayo() != nullptr ? w.prompt_tokens + w.gen_tokens : 0;
}

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

uint64_t automatic_vram_margin(uint64_t device_total_bytes) {
  return std::max(uint64_t{256} << 20, device_total_bytes / 50);
}

Result<uint64_t> automatic_vram(const Backend& backend) {
  const std::optional<uint64_t> free = backend.device_free_bytes();
  if (!free) {
    return make_error(ErrorCode::unsupported,
                      "--vram auto: the " + std::string(backend.name()) +
                          " backend cannot tell how much memory is free; give a size");
  }
  const uint64_t held = backend.driver_device_bytes().value_or(0);
  const uint64_t margin = automatic_vram_margin(backend.info().total_bytes);
  const uint64_t can = held + *free;
  if (can <= margin) {
    return make_error(ErrorCode::out_of_memory,
                      "--vram auto: only " + binary_bytes(*free) + " of device memory is free");
  }
  return can - margin;
}

Result<std::optional<uint64_t>> resolve_vram(const Backend& backend,
                                             const SessionOptions& options) {
  if (!options.vram_auto) return options.vram;
  FERRY_ASSIGN_OR_RETURN(uint64_t v, automatic_vram(backend));
  return std::optional<uint64_t>(v);
}

MachineRates default_machine_rates(const Backend& backend) {
  MachineRates r;
  r.device = backend.info().name;
  r.byte_path = "assumed";
  if (backend.name() == "cpu") {
    r.link_bytes_per_s = 10e9;
    r.peak_flops = 100e9;
    r.memory_bandwidth = 20e9;
    // The reference decoder's wall-clock rate on one thread of the shared 2-core development
    // machine (docs/compression.md, 0.3-0.5 GB/s).
    r.decode_bytes_per_s = 0.4e9;
  } else {
    r.link_bytes_per_s = 50e9;
    r.peak_flops = 700e12;
    r.memory_bandwidth = 4e12;
    r.decode_bytes_per_s = kAssumedDecodeBytesPerS;  // a guess until the decoder is measured
  }
  r.host.sampling_s = 100e-6;
  r.host.euler_s = 50e-6;
  r.host.launch_s = 5e-6;
  return r;
}

uint64_t host_page_table_bytes(uint64_t registered) {
  const uint64_t pages = (registered + 4095) / 4096;
  return pages * 8 + pages * 8 / 4;
}

uint64_t runtime_bytes_now(const Backend& backend) {
  const std::optional<uint64_t> held = backend.driver_device_bytes();
  return held ? *held + kRuntimeMarginBytes : 0;
}

Result<PlanningContext> planning_context_now(Backend& backend, const ModelConfig& config,
                                             const ModelWeights& weights,
                                             const Checkpoint& checkpoint, const Workload& workload,
                                             const SessionOptions& options) {
  bool in_place = false;
  SessionOptions with_candidates = options;
  {
    FERRY_ASSIGN_OR_RETURN(HostTier tier, HostTier::open(backend, checkpoint, options.host_path));
    in_place = tier.readable_in_place();
    with_candidates.plan.map_candidates = tier.in_place_groups(weights);
    if (options.compress_at_open && options.plan.compressed_bytes.empty()) {
      // The sizes a session opened now would plan with: every group encoded, as it would be.
      ThreadPool pool(0);
      FERRY_ASSIGN_OR_RETURN(CompressedGroups encoded, encode_groups(weights, tier, &pool));
      for (size_t g = 0; g < weights.groups.size(); ++g) {
        with_candidates.plan.compressed_bytes.push_back(encoded.compressed_bytes(g));
      }
    }
  }
  return planning_context(backend, config, weights, workload, with_candidates,
                          runtime_bytes_now(backend), in_place);
}

Result<PlanningContext> planning_context_elsewhere(Backend& backend, const ModelConfig& config,
                                                   const ModelWeights& weights,
                                                   const Checkpoint& checkpoint,
                                                   const Workload& workload,
                                                   const SessionOptions& options,
                                                   uint64_t runtime_bytes) {
  SessionOptions with_candidates = options;
  {
    // Pageable: nothing registered, no bounce ring; the tier is opened only to read the layout.
    FERRY_ASSIGN_OR_RETURN(HostTier tier, HostTier::open(backend, checkpoint, HostPath::pageable));
    with_candidates.plan.map_candidates = tier.laid_out_groups(weights);
  }
  return planning_context(backend, config, weights, workload, with_candidates, runtime_bytes,
                          /*in_place=*/true);
}

uint64_t PlanningContext::fixed_bytes() const {
  uint64_t fixed = runtime_bytes + host_page_tables + stream_bytes;
  for (const auto& [name, bytes] : runner) fixed += bytes;
  return fixed;
}

uint64_t PlanningContext::vram_for_weights(uint64_t weight_budget, uint64_t runtime_now) const {
  return fixed_bytes() - runtime_bytes + runtime_now + weight_budget;
}

MemoryBudget PlanningContext::memory(const Plan& plan, const ModelWeights& weights,
                                     uint64_t vram) const {
  MemoryBudget m;
  m.budget = vram;
  if (runtime_bytes > 0) m.items.emplace_back("runtime", runtime_bytes);
  if (host_page_tables > 0) m.items.emplace_back("host page tables", host_page_tables);
  for (const auto& item : runner) m.items.push_back(item);
  if (stream_bytes > 0) m.items.emplace_back("stream workspaces", stream_bytes);
  m.items.emplace_back("resident weights",
                       resident_bytes(plan, weights, schedule.compressed_bytes));
  m.items.emplace_back("slots", static_cast<uint64_t>(plan.slots) * plan.slot_bytes);
  if (plan.staging > 0) {
    m.items.emplace_back("staging", static_cast<uint64_t>(plan.staging) * plan.staging_bytes);
  }
  return m;
}

MemoryBudget PlanningContext::smallest(const ModelWeights& weights, bool allow_sequential) const {
  return memory(smallest_working_plan(weights, schedule, allow_sequential), weights, 0);
}

Result<PlanningContext> planning_context(Backend& backend, const ModelConfig& config,
                                         const ModelWeights& weights, const Workload& workload,
                                         const SessionOptions& options, uint64_t runtime_bytes,
                                         bool in_place) {
  PlanningContext ctx;
  FERRY_ASSIGN_OR_RETURN(RunnerBytes runner,
                         measure_runner(backend, config, weights, workload, options.inference));
  ctx.runner = std::move(runner.by_purpose);
  ctx.lent_bytes = runner.lent;
  ctx.runtime_bytes = runtime_bytes;
  ctx.stream_bytes = backend.compute_stream_bytes();
  ctx.in_place = in_place;
  // Only a device that reports its runtime (a GPU) maps the registered tier with page tables of
  // its own; the CPU backend's host memory is its device memory.
  if (in_place && runtime_bytes > 0)
    ctx.host_page_tables = host_page_table_bytes(weights.total_bytes());
  FERRY_ASSIGN_OR_RETURN(ctx.calls, call_sequence(weights, config, workload));
  if (options.plan.profile) {
    ctx.profile = *options.plan.profile;
  } else {
    const CostContext cost = cost_context(config, workload, workload.prompt_tokens,
                                          expected_expert_keys(config, workload));
    const MachineRates rates = options.rates.value_or(default_machine_rates(backend));
    FERRY_ASSIGN_OR_RETURN(ctx.profile, estimate_profile(config, weights, ctx.calls, cost, rates));
  }
  FERRY_ASSIGN_OR_RETURN(ctx.schedule, make_schedule(weights, ctx.calls, ctx.profile));
  if (!options.plan.compressed_bytes.empty()) {
    FERRY_RETURN_IF_ERROR(set_compressed(ctx.schedule, options.plan.compressed_bytes, ctx.profile));
  }
  // Where kernels cannot read the host tier, every group is resident or streamed.
  if (!in_place) ctx.schedule.host_allowed.assign(ctx.schedule.group_count(), false);
  // The planner maps a group where the profile timed it mapped and its range is its layout.
  ctx.map_candidates = options.plan.map_candidates;
  if (in_place && ctx.map_candidates.size() == weights.groups.size()) {
    for (size_t g = 0; g < weights.groups.size(); ++g) {
      ctx.schedule.map_allowed[g] = ctx.map_candidates[g] && ctx.schedule.map_measured[g];
    }
  }
  ctx.planner = planner_options(options.plan, ctx.lent_bytes);
  return ctx;
}

Result<SessionPlan> choose_plan(const PlanningContext& ctx, const ModelWeights& weights,
                                const SessionOptions& options, std::optional<uint64_t> vram) {
  const PlanRequest& req = options.plan;
  const int given = int(req.plan.has_value()) + int(req.resident.has_value()) +
                    int(req.resident_count.has_value());
  if (given > 1) {
    return make_error(ErrorCode::invalid_argument,
                      "give one of a plan file, --resident and --resident-count");
  }
  const PlannerOptions planner = planner_options(req, ctx.lent_bytes);
  SessionPlan sp;
  sp.vram = vram;
  sp.profile_source = ctx.profile.source;
  sp.host_page_tables = ctx.host_page_tables;
  const uint64_t fixed = ctx.fixed_bytes();
  if (req.plan) {
    sp.plan = *req.plan;
    sp.origin = "plan file";
    FERRY_RETURN_IF_ERROR(validate_plan(sp.plan, weights, ctx.schedule.compressed_bytes));
    FERRY_RETURN_IF_ERROR(check_lent_cache(sp.plan, ctx.calls, ctx.schedule.bytes, ctx.lent_bytes));
    if (!ctx.in_place && host_bytes(sp.plan, weights) > 0) {
      return make_error(ErrorCode::unsupported,
                        "the plan keeps a group on the host, but kernels cannot read the host tier "
                        "in place here");
    }
  } else if (req.resident) {
    sp.origin = "--resident";
    FERRY_ASSIGN_OR_RETURN(sp.plan, explicit_plan(weights, req, ctx.in_place));
  } else if (req.resident_count) {
    sp.origin = "--resident-count";
    FERRY_ASSIGN_OR_RETURN(
        sp.plan, counted_plan(weights, *req.resident_count, ctx.in_place, req.mode, req.slots));
  } else if (vram) {
    sp.origin = "planner";
    const MemoryBudget least = ctx.smallest(weights, planner.allow_sequential);
    if (*vram < least.total()) return too_small(*vram, least);
    Result<PlannerResult> planned = make_plan(weights, ctx.schedule, *vram - fixed, planner);
    if (!planned.ok() && planned.error().code == ErrorCode::out_of_memory) {
      return too_small(*vram, least);
    }
    FERRY_RETURN_IF_ERROR(planned.status());
    sp.plan = std::move(planned->plan);
    sp.evaluations = planned->evaluations;
    sp.start_s = planned->start_s;
  } else {
    sp.origin = "all resident";
    sp.plan = all_resident_plan(weights);
  }
  if (!req.mapped.empty()) {
    if (!ctx.in_place) {
      return make_error(ErrorCode::unsupported,
                        "--map: kernels cannot read the host tier in place here (it needs the "
                        "registered path, or a device that reads pageable memory)");
    }
    FERRY_ASSIGN_OR_RETURN(sp.plan, with_mapped(std::move(sp.plan), weights, req.mapped));
    sp.origin += " + --map";
  }
  if (!req.compressed.empty()) {
    if (ctx.schedule.compressed_bytes.empty()) {
      return make_error(ErrorCode::invalid_argument,
                        "compressed groups were asked for, but the model has no compressed forms "
                        "(encode them at open: --compress-at-open)");
    }
    FERRY_ASSIGN_OR_RETURN(sp.plan, with_compressed(std::move(sp.plan), weights, req.compressed,
                                                    ctx.schedule.compressed_bytes, req.staging));
    sp.origin += " + compressed";
  }
  if (req.resident || req.resident_count) {
    // A plan chosen by hand gets the lent cache as the planner's own would (it costs no device
    // bytes): comparisons against the planner differ in the choice of residents only.
    FERRY_ASSIGN_OR_RETURN(
        sp.plan,
        with_lent_cache_if_faster(weights, ctx.schedule, std::move(sp.plan), planner.lent_bytes));
  }
  sp.memory = ctx.memory(sp.plan, weights, vram.value_or(0));
  if (vram && sp.memory.total() > *vram) {
    const MemoryBudget least = ctx.smallest(weights, planner.allow_sequential);
    if (least.total() > *vram || given == 0) return too_small(*vram, least);
    return make_error(
        ErrorCode::out_of_memory,
        "--vram " + binary_bytes(*vram) + " cannot hold this plan (" + sp.memory.summary() +
            "); the smallest budget for this model and workload is " + binary_bytes(least.total()));
  }
  FERRY_ASSIGN_OR_RETURN(sp.prediction, predict(weights, ctx.schedule, sp.plan));
  const uint64_t weight_room =
      vram ? *vram - std::min(*vram, fixed) : std::max(weights.total_bytes(), uint64_t{1});
  Result<LowerBound> bound =
      latency_lower_bound(ctx.schedule, weight_room, true, planner.lent_bytes);
  if (bound.ok()) sp.bound = *bound;
  return sp;
}

Schedule with_copy_scale(Schedule schedule, double factor) {
  if (!(factor > 0) || !std::isfinite(factor)) return schedule;
  for (double& t : schedule.dma_s) t *= factor;
  schedule.link_bytes_per_s /= factor;
  return schedule;
}

std::vector<size_t> link_check_sample(const ModelWeights& weights, const Plan& plan,
                                      uint64_t target_bytes, size_t max_groups) {
  std::vector<size_t> streamed;
  for (size_t g = 0; g < weights.groups.size() && g < plan.placement.size(); ++g) {
    // Compressed groups are staged from host memory, not copied from the mapping.
    if (plan.placement[g] == Placement::streamed && !decoded_group(plan, g)) streamed.push_back(g);
  }
  uint64_t total = 0;
  for (size_t g : streamed) total += weights.groups[g].bytes;
  // Every k-th group, k chosen so the sample's share of the streamed bytes is about
  // target / total (one group at least, max_groups at most).
  size_t want = streamed.size();
  if (total > target_bytes && total > 0) {
    want = static_cast<size_t>(
        std::ceil(static_cast<double>(streamed.size()) * static_cast<double>(target_bytes) /
                  static_cast<double>(total)));
  }
  want = std::min(want, max_groups);
  if (want == 0 && !streamed.empty() && max_groups > 0) want = 1;
  std::vector<size_t> out;
  for (size_t i = 0; i < want; ++i) {
    out.push_back(streamed[i * streamed.size() / want]);
  }
  return out;
}

Schedule with_copy_rate(Schedule schedule, double bytes_per_s) {
  if (!(bytes_per_s > 0)) return schedule;
  for (size_t g = 0; g < schedule.group_count(); ++g) {
    schedule.dma_s[g] =
        std::max(schedule.dma_s[g], static_cast<double>(schedule.bytes[g]) / bytes_per_s);
  }
  schedule.link_bytes_per_s = std::min(schedule.link_bytes_per_s, bytes_per_s);
  return schedule;
}

Result<SessionPlan> plan_session_full(Backend& backend, const ModelConfig& config,
                                      const ModelWeights& weights, const Workload& workload,
                                      const SessionOptions& options, uint64_t runtime_bytes,
                                      bool in_place) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point t0 = Clock::now();
  FERRY_ASSIGN_OR_RETURN(std::optional<uint64_t> vram, resolve_vram(backend, options));
  FERRY_ASSIGN_OR_RETURN(PlanningContext ctx, planning_context(backend, config, weights, workload,
                                                               options, runtime_bytes, in_place));
  const Clock::time_point t1 = Clock::now();
  FERRY_ASSIGN_OR_RETURN(SessionPlan sp, choose_plan(ctx, weights, options, vram));
  sp.schedule = std::move(ctx.schedule);  // the context ends here: no copy
  sp.context_s = std::chrono::duration<double>(t1 - t0).count();
  sp.choose_s = std::chrono::duration<double>(Clock::now() - t1).count();
  return sp;
}

Result<std::pair<Plan, MemoryBudget>> plan_session(Backend& backend, const ModelConfig& config,
                                                   const ModelWeights& weights,
                                                   const Workload& workload,
                                                   const SessionOptions& options,
                                                   uint64_t runtime_bytes, bool in_place) {
  FERRY_ASSIGN_OR_RETURN(SessionPlan sp, plan_session_full(backend, config, weights, workload,
                                                           options, runtime_bytes, in_place));
  return std::make_pair(std::move(sp.plan), std::move(sp.memory));
}

Result<MemoryBudget> smallest_budget(Backend& backend, const ModelConfig& config,
                                     const ModelWeights& weights, const Workload& workload,
                                     const SessionOptions& options, uint64_t runtime_bytes,
                                     bool in_place) {
  FERRY_ASSIGN_OR_RETURN(PlanningContext ctx, planning_context(backend, config, weights, workload,
                                                               options, runtime_bytes, in_place));
  return ctx.smallest(weights, ctx.planner.allow_sequential);
}

}  // namespace ferry
