#include "exec/session.h"

#include <algorithm>
#include <chrono>

#include "core/stats.h"
#include "core/thread_pool.h"
#include "host/encode_groups.h"
#include "plan/unified_memory.h"

namespace ferry {

Session::~Session() {
  graphs_.clear();
  runner_.reset();
  provider_.reset();
  stream_.reset();
}

namespace {

using Clock = std::chrono::steady_clock;

// Seconds since `last`, which moves to now.
double lap(Clock::time_point& last) {
  const Clock::time_point now = Clock::now();
  const double s = std::chrono::duration<double>(now - last).count();
  last = now;
  return s;
}

// plan/unified_memory.h's choice for this device, tier and the plan flags in `options`.
UnifiedMemoryChoice unified_memory_choice(const Backend& backend, const HostTier& tier,
                                          const ModelWeights& weights,
                                          const SessionOptions& options) {
  const PlanRequest& req = options.plan;
  const std::vector<uint8_t> in_layout = tier.in_place_groups(weights);
  UnifiedMemoryFacts facts;
  facts.integrated = backend.platform_facts().integrated;
  facts.tier_readable_in_place = tier.readable_in_place();
  facts.groups = weights.groups.size();
  facts.groups_in_layout = static_cast<size_t>(
      std::count_if(in_layout.begin(), in_layout.end(), [](uint8_t b) { return b != 0; }));
  facts.placement_given = req.plan || req.resident || req.resident_count || !req.mapped.empty();
  facts.vram = options.vram;
  return choose_unified_memory(facts);
}

}  // namespace

Result<std::unique_ptr<Session>> Session::open(Backend& backend, const ModelConfig& config,
                                               const ModelWeights& weights,
                                               const Checkpoint& checkpoint,
                                               const Workload& workload,
                                               const SessionOptions& options) {
  const Clock::time_point t0 = Clock::now();
  Clock::time_point last = t0;
  FERRY_RETURN_IF_ERROR(checkpoint.check_unchanged());
  // A session that fails to open gives the budget's region back once its buffers are gone
  // (declared before `s`, so destroyed after it), and the backend can open another.
  struct ReleaseOnError {
    Backend& backend;
    bool armed = false;
    ~ReleaseOnError() {
      if (armed) (void)backend.release_reservation();  // the open's own error says enough
    }
  } release{backend};
  std::unique_ptr<Session> s(new Session());
  StartTimes& times = s->start_;
  s->backend_ = &backend;
  s->checkpoint_ = &checkpoint;
  s->weights_ = &weights;
  // The budget's region first, before the host tier's registration thread starts: reserving
  // ~15 GB maps device memory into the process, which waits on every page-pinning call of the
  // registration (they share the process's memory-map lock) and took up to 0.5 s beside it on
  // the H200. Its size assumes the tier will be read in place (the registered path, the usual
  // case), whose page tables stay outside it; a tier that is not gets a plan 0.05 GB smaller.
  const uint64_t runtime = runtime_bytes_now(backend);
  FERRY_ASSIGN_OR_RETURN(const std::optional<uint64_t> vram, resolve_vram(backend, options));
  const uint64_t tables = runtime > 0 ? host_page_table_bytes(weights.total_bytes()) : 0;
  bool reserved = false;
  if (vram && *vram > runtime + tables) {
    // Everything ferry allocates from here on is carved from this one region.
    // The runtime and the registered tier's page tables stay outside it.
    FERRY_RETURN_IF_ERROR(backend.reserve(*vram - runtime - tables));
    reserved = true;
    release.armed = true;
  }
  s->stream_ = backend.create_stream();
  times.reserve_s = lap(last);
  // The host tier: whether kernels can read it in place decides where the embedding goes. Its
  // first piece is registered now, the rest on a thread while the plan is chosen and the
  // resident groups are copied in.
  FERRY_ASSIGN_OR_RETURN(s->tier_, HostTier::open(backend, checkpoint, options.host_path,
                                                  options.streaming.bounce, options.registration));
  times.tier_s = lap(last);
  SessionOptions planning = options;
  planning.vram = vram;
  planning.vram_auto = false;
  if (vram && !s->tier_.readable_in_place()) *planning.vram -= std::min(*vram, tables);
  planning.plan.map_candidates = s->tier_.in_place_groups(weights);
  if (options.compress_at_open) {
    ThreadPool pool(0);
    FERRY_ASSIGN_OR_RETURN(CompressedGroups encoded,
                           encode_groups(weights, s->tier_, &pool, {}, &backend));
    s->compressed_ = std::make_unique<CompressedGroups>(std::move(encoded));
    planning.plan.compressed_bytes.clear();
    for (size_t g = 0; g < weights.groups.size(); ++g) {
      planning.plan.compressed_bytes.push_back(s->compressed_->compressed_bytes(g));
    }
    times.compress_s = lap(last);
  }
  const UnifiedMemoryChoice unified = unified_memory_choice(backend, s->tier_, weights, planning);
  if (unified.map_in_layout) {
    for (size_t g = 0; g < weights.groups.size(); ++g) {
      if (g < planning.plan.map_candidates.size() && planning.plan.map_candidates[g])
        planning.plan.mapped.push_back(weights.groups[g].name);
    }
    // Every group read in place: no weight needs a device byte, so no search under the budget
    // (whose smallest working plan would still count a slot for the largest group).
    if (planning.plan.mapped.size() == weights.groups.size()) {
      planning.plan.resident = std::vector<std::string>{};
    }
  }
  FERRY_ASSIGN_OR_RETURN(s->planned_,
                         plan_session_full(backend, config, weights, workload, planning, runtime,
                                           s->tier_.readable_in_place()));
  if (unified.map_in_layout && planning.plan.resident && !options.plan.resident) {
    s->planned_.origin = "integrated GPU: every group read in place";
  }
  s->planned_.device_note = unified.message;
  times.plan_s = lap(last);
  times.plan_context_s = s->planned_.context_s;
  times.plan_choose_s = s->planned_.choose_s;
  times.plan_evaluations = s->planned_.evaluations;
  if (vram && !reserved) {
    // Too small for the runtime and the page tables: planning has said so already; a plan that
    // passed anyway is refused here rather than run outside the budget.
    return make_error(ErrorCode::out_of_memory, "--vram is too small for the runtime alone");
  }
  auto provider =
      StreamingProvider::create(backend, *s->stream_, weights, s->tier_, s->planned_.plan,
                                options.streaming, s->compressed_.get());
  if (!provider.ok() && s->tier_.registration_failed()) {
    // A piece was refused after others were registered and copied from (create() waited for
    // those copies): release every piece and open as a refusal at once would have, on the path
    // the options fall back to, replanned where kernels can no longer read the host in place.
    const bool in_place = s->tier_.readable_in_place();
    FERRY_RETURN_IF_ERROR(s->tier_.fall_back(backend, options.host_path, options.streaming.bounce));
    if (s->tier_.readable_in_place() != in_place) {
      SessionOptions again = planning;
      again.plan.map_candidates = s->tier_.in_place_groups(weights);
      // An integrated device's in-place reads need the tier read in place: copied instead.
      if (unified.map_in_layout) {
        again.plan.mapped = options.plan.mapped;
        again.plan.resident = options.plan.resident;
      }
      // The region was reserved with the page tables of a tier read in place set apart.
      if (vram) again.vram = *vram - std::min(*vram, tables);
      FERRY_ASSIGN_OR_RETURN(s->planned_,
                             plan_session_full(backend, config, weights, workload, again, runtime,
                                               s->tier_.readable_in_place()));
      s->planned_.device_note = unified_memory_choice(backend, s->tier_, weights, again).message;
    }
    times.fallback_s = lap(last);
    provider = StreamingProvider::create(backend, *s->stream_, weights, s->tier_, s->planned_.plan,
                                         options.streaming, s->compressed_.get());
  }
  FERRY_ASSIGN_OR_RETURN(s->provider_, std::move(provider));
  const double provider_s = lap(last);
  const StreamingStats& st = s->provider_->stats();
  if (!s->tier_.registered() && st.host_probe_bytes > 0 && st.host_probe_seconds > 0) {
    // The plan was priced with the profile's copies; this path's own rate prices it again.
    const double rate = static_cast<double>(st.host_probe_bytes) / st.host_probe_seconds;
    FERRY_ASSIGN_OR_RETURN(
        Prediction on_path,
        predict(weights, with_copy_rate(s->planned_.schedule, rate), s->planned_.plan));
    s->planned_.on_path = SessionPlan::OnPath{rate, on_path};
  }
  const auto check_start = Clock::now();
  if (options.link_check && s->provider_->records_timelines() &&
      s->planned_.schedule.group_count() == weights.groups.size()) {
    FERRY_RETURN_IF_ERROR(s->check_link(weights));
  }
  times.link_check_s = std::chrono::duration<double>(Clock::now() - check_start).count();
  lap(last);  // the runner's time starts after the check
  times.upload_s = st.resident_load_seconds;
  times.upload_wait_s = st.resident_wait_seconds;
  times.upload_bytes = st.resident_bytes;
  times.register_wait_s = st.registration_tail_seconds;
  times.slots_s = std::max(0.0, provider_s - times.upload_s - times.register_wait_s);
  FERRY_ASSIGN_OR_RETURN(s->runner_,
                         create_runner(backend, config, weights, workload, options.inference));
  const ModelRunner::LentRegion lent = s->runner_->lent_region();
  FERRY_RETURN_IF_ERROR(s->provider_->lend(lent.data, lent.bytes));
  times.runner_s = lap(last);
  // The resident groups were copied out of the mapping: a file rewritten in place meanwhile
  // faults nowhere (and the copy engine reads registered pages without faulting at all).
  FERRY_RETURN_IF_ERROR(checkpoint.check_unchanged());
  const RegistrationStats reg = s->tier_.registration();
  times.register_s = s->tier_.register_seconds();
  times.register_calls_s = reg.call_seconds;
  times.register_pieces = static_cast<int64_t>(reg.pieces);
  times.register_threads = reg.threads;
  times.register_bytes = reg.bytes;
  const PageCacheState& cache = s->tier_.page_cache();
  times.files_bytes = cache.file_bytes;
  times.cached_bytes = cache.cached_bytes;
  times.available_bytes = cache.available_bytes.value_or(0);
  times.open_s = std::chrono::duration<double>(Clock::now() - t0).count();
  release.armed = false;
  return s;
}

Status Session::check_link(const ModelWeights& weights) {
  // About a gigabyte in at most 16 groups: ~20 ms a pass on a PCIe Gen5 link.
  constexpr uint64_t kSampleBytes = uint64_t{1} << 30;
  constexpr size_t kSampleGroups = 16;
  constexpr int kPasses = 3;
  const Schedule& schedule = planned_.schedule;
  const std::vector<size_t> sample =
      link_check_sample(weights, planned_.plan, kSampleBytes, kSampleGroups);
  double profile_s = 0;
  uint64_t bytes = 0;
  for (size_t g : sample) {
    profile_s += schedule.dma_s[g];
    bytes += weights.groups[g].bytes;
  }
  if (sample.empty() || !(profile_s > 0)) return {};
  FERRY_ASSIGN_OR_RETURN(std::vector<std::vector<double>> passes,
                         provider_->time_copies(*stream_, sample, kPasses));
  std::vector<double> factors;
  for (const std::vector<double>& pass : passes) {
    double measured = 0;
    for (double t : pass) measured += t;
    if (measured > 0) factors.push_back(measured / profile_s);
  }
  if (factors.empty()) return {};
  SessionPlan::LinkCheck check;
  check.factor = upper_median(factors);
  check.bytes = bytes;
  check.groups = sample.size();
  check.passes = static_cast<int>(factors.size());
  FERRY_ASSIGN_OR_RETURN(check.prediction,
                         predict(weights, with_copy_scale(schedule, check.factor), planned_.plan));
  planned_.link_check = std::move(check);
  return {};
}

Result<InferenceResult> Session::run(GroupProvider* through) {
  Executor executor(*backend_, *weights_, through != nullptr ? *through : *provider_, &graphs_);
  FERRY_ASSIGN_OR_RETURN(InferenceResult r, runner_->run(*stream_, executor));
  // Streamed groups were read from the mapping during the run: trust them only if the files
  // are still the ones opened.
  FERRY_RETURN_IF_ERROR(checkpoint_->check_unchanged());
  return r;
}

}  // namespace ferry
