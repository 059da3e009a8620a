// How a session's plan is chosen, before any device memory is taken (Session::open, `ferry plan`,
// `run --dry-run`, the sweeps of `plan` and `bench`):
//
//   1. A measure pass over the model runner (MeasuringBackend) gives the device bytes of its own
//      buffers (KV cache, activations); with the runtime's share and the stream workspaces they are
//      the fixed bytes, what a budget holds besides weights.
//   2. A profile times the call sequence: the one given (--profile, `ferry profile` writes it), or
//      estimate_profile() from the cost model with the machine's rates (measured ones when the
//      caller has them, default_machine_rates() otherwise). With it, a Schedule (plan/schedule.h).
//   3. The plan: a plan file, --resident, --resident-count as given; else, under a budget, the
//      planner (plan/planner.h) over the budget left after the fixed bytes; else all resident.
//   4. The memory it needs is checked against the budget; a budget that cannot work is an error
//      naming the smallest one that can (and its breakdown). The predictor prices the plan and
//      the lower bound (plan/lower_bound.h) says what no plan in that budget can beat.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"
#include "exec/streaming_provider.h"
#include "format/safetensors.h"
#include "host/host_tier.h"
#include "model/call_sequence.h"
#include "model/config.h"
#include "model/inference.h"
#include "model/weights.h"
#include "model/workload.h"
#include "plan/lower_bound.h"
#include "plan/plan.h"
#include "plan/planner.h"
#include "plan/predictor.h"
#include "plan/profile.h"
#include "plan/schedule.h"

namespace ferry {

// Where the plan comes from. At most one of plan / resident / resident_count; none of them: the
// planner under a budget, all groups resident without one.
struct PlanRequest {
  std::optional<Plan> plan;                          // a plan file
  std::optional<std::vector<std::string>> resident;  // exactly these groups resident
  std::optional<int> resident_count;  // K text layers by Eq. 8, plus the non-layer groups
  StreamMode mode = StreamMode::pipelined;
  int slots = 2;
  // The planner chooses the mode and ring size (1..4 slots) unless these say the flags fixed them:
  // a fixed mode is kept; fixed slots are the most the planner may use.
  bool mode_given = false;
  bool slots_given = false;
  std::optional<Profile> profile;  // --profile: the times that plan and predict; else estimated
  // --map: these groups read in place from the host tier by their kernels (the map path), on top
  // of whichever plan the rest chose. Needs a tier kernels can read and, for groups of more than
  // one tensor, a packed checkpoint (each group's file range is its layout).
  std::vector<std::string> mapped;
  // Per group: its file range is its layout, so kernels can read it in place (HostTier::
  // in_place_groups; filled by whoever opened the tier: Session::open, planning_context_now).
  // The planner maps a group only where this says so and the profile timed it mapped. Empty:
  // none.
  std::vector<uint8_t> map_candidates;
  // The planner may keep streamed groups in the runner's region while it is idle after prefill
  // (plan/lent_cache.h); false: --no-lent-cache.
  bool lent_cache = true;
  // The planner prices every state of its search with its lent cache (PlannerOptions::
  // lent_in_search): --thorough-search.
  bool thorough_search = false;
  // Compressed forms (issue 24). Per group its compressed bytes (plan/plan.h CompressedSizes;
  // filled by whoever made the model's compressed groups: Session::open). Empty: none, and no
  // plan may hold a compressed group.
  std::vector<uint64_t> compressed_bytes;
  // These groups (names as --resident takes them) run compressed, in the placement the rest of
  // the request gave them (plan/plan.h with_compressed), staged through `staging` buffers.
  std::vector<std::string> compressed;
  int staging = 2;
};

struct SessionOptions {
  std::optional<uint64_t> vram;  // every device byte of the process, the CUDA context included
  bool vram_auto = false;        // --vram auto: the device's free memory less a margin
  // The rates an estimated profile assumes: measured ones (bench measures them first), else
  // default_machine_rates(backend).
  std::optional<MachineRates> rates;
  PlanRequest plan;
  HostPath host_path = HostPath::automatic;
  // How a session registers the mapping: 256 MiB pieces on one thread, beside planning and the
  // resident load. {0, 0}: each shard in one call, all before planning (no overlap).
  RegistrationOptions registration{uint64_t{256} << 20, 1};
  StreamingOptions streaming;
  InferenceOptions inference;
  // Time a sample of the streamed groups' copies once the resident groups are in, and price the
  // plan again with the profile's C_DMA scaled to them (SessionPlan::link_check): for callers
  // that report the prediction against a measurement (`bench`), not every session's start.
  bool link_check = false;
  // Encode every group of the raw checkpoint at open (host/encode_groups.h), so that plans may
  // hold compressed groups (PlanRequest::compressed, a plan file's forms): the development path
  // until compressed checkpoints are read. It costs an encode of the whole model at every open.
  bool compress_at_open = false;
};

// The device memory of a session, added up before anything is allocated.
struct MemoryBudget {
  std::vector<std::pair<std::string, uint64_t>> items;  // in the order they are printed
  uint64_t budget = 0;                                  // --vram; 0: none
  uint64_t total() const;
  uint64_t of(std::string_view item) const;
  // "runtime 0.52 GiB + kv cache 0.45 GiB + ... = 2.31 GiB"
  std::string summary() const;
};

// Device memory the runtime keeps outside the arena beyond what it holds when a session opens:
// kernels loaded lazily on first use, graph instantiations (checked from outside on the GPU).
inline constexpr uint64_t kRuntimeMarginBytes = uint64_t{96} << 20;

// The device's page tables for `registered` bytes of host memory mapped into its address space
// (the registered checkpoint): 8 bytes per 4 KiB page and a quarter more for the upper levels.
// The driver does not count them for the process (NVML per process) but the device's used memory
// grows by them: 49 MiB for Alpamayo-R1's 22.16 GB on the H200 (driver 580), where this gives
// 52 MiB. A budget covers them, so nvidia-smi's view stays inside it too.
uint64_t host_page_table_bytes(uint64_t registered);

// What --vram auto leaves unused of the memory the process could hold: 256 MiB, or 2% of the
// device when that is more (other processes, fragmentation, the driver's own growth).
uint64_t automatic_vram_margin(uint64_t device_total_bytes);
// The budget --vram auto means now: what this process holds plus the device's free memory, less
// automatic_vram_margin. An error on a backend that cannot tell its free memory.
Result<uint64_t> automatic_vram(const Backend& backend);
// options.vram, or automatic_vram when options.vram_auto; nullopt: no budget.
Result<std::optional<uint64_t>> resolve_vram(const Backend& backend, const SessionOptions& options);

// The rates an estimated profile assumes when none were measured. CUDA: a current data-center
// GPU on PCIe Gen5 (50 GB/s link, 700 TFLOP/s BF16, 4 TB/s memory); the CPU backend: 10 GB/s
// copies, 100 GFLOP/s, 20 GB/s. Host steps: 100 us sampling, 50 us Euler, 5 us per launch. Group
// decodes: 0.4 GB/s on the CPU, kAssumedDecodeBytesPerS on a GPU (guesses until measured).
MachineRates default_machine_rates(const Backend& backend);

// Everything a session's plan depends on except the budget: measured and timed once, planned at
// any number of budgets (the sweeps).
struct PlanningContext {
  std::vector<std::pair<std::string, uint64_t>> runner;  // the runner's buffers, by purpose
  uint64_t lent_bytes = 0;     // of those, the region the runner lends after prefill (lent_region)
  uint64_t runtime_bytes = 0;  // the backend's own share (context, libraries) and its margin
  uint64_t stream_bytes = 0;   // the compute stream's workspaces
  uint64_t host_page_tables = 0;  // host_page_table_bytes of the registered tier (a GPU's only)
  bool in_place = true;           // kernels can read the host tier in place (embedding on the host)
  std::vector<uint8_t> map_candidates;  // options.plan.map_candidates (Schedule::map_allowed)
  std::vector<Call> calls;
  Profile profile;    // given (--profile) or estimated
  Schedule schedule;  // the calls timed by `profile`; host placement allowed only when in_place
  PlannerOptions planner;  // from the options' --mode and --slots (what the sweeps use)

  // Every device byte but the weights': runtime, runner buffers, workspaces.
  uint64_t fixed_bytes() const;
  // The budget that leaves `weight_budget` for weights to a session whose runtime share is
  // `runtime_now` (runtime_bytes_now when it opens; the runtime grows in a process as sessions
  // load kernels, so a sweep's later sessions need more than fixed_bytes() for the same share).
  uint64_t vram_for_weights(uint64_t weight_budget, uint64_t runtime_now) const;
  // The breakdown of a plan's memory under `vram` (0: no budget).
  MemoryBudget memory(const Plan& plan, const ModelWeights& weights, uint64_t vram) const;
  // The smallest budget in which some plan works (sequential mode allowed or not), with its
  // breakdown.
  MemoryBudget smallest(const ModelWeights& weights, bool allow_sequential) const;
};

// Cache rows the expert attends, before a run has told: the prompt and the generated tokens (0
// for a model without an action expert). What an estimated profile's costs assume.
int64_t expected_expert_keys(const ModelConfig& config, const Workload& w);

// What the backend holds now plus kRuntimeMarginBytes (0 when it cannot tell: the CPU).
uint64_t runtime_bytes_now(const Backend& backend);

// `runtime_bytes`: what the backend holds already plus kRuntimeMarginBytes (0 on the CPU);
// `in_place`: whether kernels can read host memory in place (HostTier::readable_in_place).
Result<PlanningContext> planning_context(Backend& backend, const ModelConfig& config,
                                         const ModelWeights& weights, const Workload& workload,
                                         const SessionOptions& options, uint64_t runtime_bytes,
                                         bool in_place);

// The context a session opened now would plan in: runtime_bytes_now, and whether the host tier
// the options ask for can be read in place (a tier is opened to learn it, then closed).
Result<PlanningContext> planning_context_now(Backend& backend, const ModelConfig& config,
                                             const ModelWeights& weights,
                                             const Checkpoint& checkpoint, const Workload& workload,
                                             const SessionOptions& options);

// The context for a GPU on another machine (ferry plan --runtime): its runtime and stream
// workspaces take `runtime_bytes`, and it registers the checkpoint, so its kernels read the host
// tier in place (page tables set apart) and may map every group laid out as on the device. This
// machine's own tier plays no part (options.host_path is not read): auto takes the storage path
// here when the checkpoint does not fit in this machine's memory, and a plan priced on that tier
// keeps nothing on the host.
Result<PlanningContext> planning_context_elsewhere(Backend& backend, const ModelConfig& config,
                                                   const ModelWeights& weights,
                                                   const Checkpoint& checkpoint,
                                                   const Workload& workload,
                                                   const SessionOptions& options,
                                                   uint64_t runtime_bytes);

// A session's plan and what is known of it before it runs.
struct SessionPlan {
  Plan plan;
  MemoryBudget memory;
  std::string origin;               // "plan file", "--resident", "--resident-count", "planner",
                                    // "all resident"
  std::optional<uint64_t> vram;     // the budget, --vram auto resolved
  Prediction prediction;            // the predictor's account of `plan` under the profile
  std::optional<LowerBound> bound;  // T_lb for the weights' share of the budget (none without one)
  std::string profile_source;       // "measured" or "estimated"
  int64_t evaluations = 0;          // the planner's predictor runs (0 when it did not plan)
  double start_s = 0;               // the planner's best start, before its search
  uint64_t host_page_tables = 0;    // device bytes outside the arena for the registered tier
  // plan_session_full's two steps, seconds: the planning context (measure pass, call sequence,
  // profile, schedule) and the choice (the planner's search, the budget check, the prediction).
  double context_s = 0;
  double choose_s = 0;
  Schedule schedule;  // what `prediction` priced (plan_session_full fills it; choose_plan not)
  // Off the registered path (bounce, pageable, storage) copies run at that path's rate, not the
  // profile's link: the plan priced again with every C_DMA at least bytes / the rate the session
  // measured through the path (Session::open fills it; the plan itself was chosen with the
  // profile's copies).
  struct OnPath {
    double bytes_per_s = 0;
    Prediction prediction;
  };
  std::optional<OnPath> on_path;
  // The link as the session found it (Session::open, a plan that streams, any path but the
  // bounce ring's): a sample of the streamed groups copied back to back into the slots, against
  // the profile's C_DMA of the same groups. The host link's rate moves between processes (on the
  // H200 by up to 2-4% between machines and processes) and a profile is measured in one;
  // `prediction` is the plan priced with every C_DMA scaled by `factor` (the plan itself is the
  // profile's).
  struct LinkCheck {
    double factor = 1;      // median over passes of Σ measured / Σ profile C_DMA of the sample
    uint64_t bytes = 0;     // the sample's bytes (one pass)
    size_t groups = 0;      // the sample's groups
    int passes = 0;         // timed passes
    Prediction prediction;  // the plan with C_DMA × factor
  };
  std::optional<LinkCheck> link_check;
  // On an integrated GPU, what the session did with the weights and what --vram means there
  // (plan/unified_memory.h; Session::open fills it); empty on a discrete device.
  std::string device_note;
};

// `schedule` with every C_DMA times `factor` (and the link's rate over it).
Schedule with_copy_scale(Schedule schedule, double factor);

// The groups a link check times: raw streamed groups (compressed ones are staged from host
// memory, not copied from the mapping) spread evenly over the plan's streamed list (in
// model order), at most `max_groups`, until their bytes reach `target_bytes`.
std::vector<size_t> link_check_sample(const ModelWeights& weights, const Plan& plan,
                                      uint64_t target_bytes, size_t max_groups);

// `schedule` with every C_DMA at least bytes / `bytes_per_s`: copies through a host path slower
// than the profile's link.
Schedule with_copy_rate(Schedule schedule, double bytes_per_s);

// Chooses the plan under `vram` (options.vram resolved: see resolve_vram), checks the budget,
// prices it. The plan flags and the planner's mode and slot bounds come from `options`.
Result<SessionPlan> choose_plan(const PlanningContext& ctx, const ModelWeights& weights,
                                const SessionOptions& options, std::optional<uint64_t> vram);

// planning_context then choose_plan, --vram auto resolved.
Result<SessionPlan> plan_session_full(Backend& backend, const ModelConfig& config,
                                      const ModelWeights& weights, const Workload& workload,
                                      const SessionOptions& options, uint64_t runtime_bytes,
                                      bool in_place);

// The plan and the memory it needs, without taking any device memory: what --dry-run prints.
Result<std::pair<Plan, MemoryBudget>> plan_session(Backend& backend, const ModelConfig& config,
                                                   const ModelWeights& weights,
                                                   const Workload& workload,
                                                   const SessionOptions& options,
                                                   uint64_t runtime_bytes, bool in_place);

// The smallest budget at which the model and workload run, with its breakdown.
Result<MemoryBudget> smallest_budget(Backend& backend, const ModelConfig& config,
                                     const ModelWeights& weights, const Workload& workload,
                                     const SessionOptions& options, uint64_t runtime_bytes,
                                     bool in_place);

}  // namespace ferry
