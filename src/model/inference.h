// One inference on synthetic inputs, whatever the architecture: what `ferry run` prints and the
// golden tests compare.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"
#include "model/call_handler.h"
#include "model/call_sequence.h"
#include "model/config.h"
#include "model/model_inputs.h"
#include "model/weights.h"
#include "model/workload.h"

namespace ferry {

struct InferenceOptions {
  bool keep_all_logits = false;  // keep every step's logits (f32), not only prefill's and the last
  bool keep_inputs = false;      // keep pixel values (vision models) for --dump-inputs
  bool hash_kv_cache = false;    // Alpamayo: hash the text KV cache before and after the expert
  ExecOptions exec;              // graphs on or off (the output is the same either way)
};

struct InferenceResult {
  std::vector<int32_t> prompt;     // [S] token ids fed at prefill
  std::vector<int32_t> positions;  // [S, 3] rotary positions (t, h, w)
  int64_t rope_delta = 0;
  std::vector<int32_t> tokens;                  // generated tokens, in order
  int64_t decode_steps = 0;                     // forwards after prefill that ran
  std::vector<float> prefill_logits;            // [vocab] f32: the prefill's last-position logits
  std::vector<std::vector<float>> step_logits;  // with keep_all_logits: every decode step's
  uint64_t logits_hash = 0;                     // FNV-1a 64 of the LAST logits' bf16 bytes
  uint64_t prefill_logits_hash = 0;
  // Vision models (with keep_inputs).
  std::vector<float> pixel_values;                  // [patches, patch_values] f32
  std::vector<std::array<int64_t, 3>> image_grids;  // (t, h, w) in patches per image
  int64_t patch_values = 0;                         // columns of pixel_values
  // Alpamayo.
  std::vector<float> actions;  // [64·2] normalized (accel, curvature)
  uint64_t actions_hash = 0;   // FNV-1a 64 of the f32 bytes of `actions`
  std::vector<std::array<float, 3>> trajectory_xyz;
  std::vector<float> trajectory_yaw;
  int64_t expert_offset = 0;  // cache rows visible to the expert
  // With hash_kv_cache: FNV-1a 64 of the whole text KV cache buffer right before the first expert
  // call and after the last one (the expert must leave it bit-for-bit unchanged).
  uint64_t kv_hash_before_expert = 0;
  uint64_t kv_hash_after_expert = 0;
  PhaseTimes times;
};

// The model half of a session: every buffer one workload's inference needs (activations, KV
// cache, page-locked inputs), allocated once by create; run() executes the whole call sequence
// with them, as often as wanted. The buffers stay put between runs, so calls recorded into graphs
// by one run are replayed by the next. Each run repeats the same inference (the workload's
// synthetic inputs and seed, or the real inputs last set) and gives the same bytes.
class ModelRunner {
 public:
  virtual ~ModelRunner() = default;
  // The call sequence every run executes (with real inputs, decode calls after a stop are
  // skipped).
  virtual const std::vector<Call>& calls() const = 0;
  // Real inputs for the runs that follow (model/model_inputs.h); an error when they do not fit
  // the buffers the workload sized, or the model takes no such inputs.
  virtual Status set_inputs(ModelInputs inputs) = 0;
  // One inference on the compute stream `stream`, its calls walked by `walker` (the executor:
  // exec/executor.h), which places each group and keeps recorded calls across runs.
  virtual Result<InferenceResult> run(Stream& stream, CallWalker& walker) = 0;

  // Device memory the runner does not touch from the first call after its last vision or prefill
  // call to the end of each run (plan/lent_cache.h): the provider may keep weights there.
  struct LentRegion {
    void* data = nullptr;
    uint64_t bytes = 0;
  };
  virtual LentRegion lent_region() const { return {}; }
};

// The runner for the config's architecture. `weights` must outlive it.
Result<std::unique_ptr<ModelRunner>> create_runner(Backend& backend, const ModelConfig& config,
                                                   const ModelWeights& weights,
                                                   const Workload& workload,
                                                   const InferenceOptions& options);

}  // namespace ferry
