#include "model/alpamayo_runner.h"

#include <algorithm>
#include <optional>
#include <string>

#include "model/action_expert.h"
#include "model/ego_history.h"
#include "model/prompt.h"
#include "model/rope_index.h"
#include "model/text_generation.h"
#include "model/vision_encoder.h"

namespace ferry {

int64_t first_future_offset(const std::vector<int32_t>& prompt, const std::vector<int32_t>& tokens,
                            int32_t future_start) {
  auto it = std::find(tokens.begin(), tokens.end(), future_start);
  const auto n = static_cast<int64_t>(prompt.size());
  if (it == tokens.end()) return n + static_cast<int64_t>(tokens.size());
  return n + static_cast<int64_t>(it - tokens.begin()) + 1;
}

namespace {

// Synchronizes the stream and hashes every byte of the text KV cache.
Result<uint64_t> hash_kv_cache(Stream& stream, TextDecoder& decoder) {
  const KvCache& cache = decoder.cache();
  std::vector<std::byte> host(cache.bytes());
  decoder.backend().copy_to_host(stream, host.data(), cache.data(), host.size());
  FERRY_RETURN_IF_ERROR(decoder.backend().synchronize(stream));
  return fnv1a64(host.data(), host.size());
}

class VisionLanguageHandler : public CallHandler {
 public:
  // The cache rows the expert saw when its layers were recorded into graphs, kept by the
  // runner across runs: its layers bake them into their work.
  struct ExpertRecording {
    int64_t offset = -1;
    int64_t cache_len = -1;
    int64_t rope_delta = 0;
    bool operator==(const ExpertRecording&) const = default;
  };

  VisionLanguageHandler(std::optional<VisionEncoder>& vision, std::span<const uint16_t> pixels,
                        TextGeneration& text, std::optional<ActionExpert>& expert,
                        int32_t future_start, bool hash_cache, GraphCache* graphs,
                        ExpertRecording& recorded)
      : graphs_(graphs),
        recorded_(recorded),
        hash_cache_(hash_cache),
        vision_(vision),
        pixels_(pixels),
        text_(text),
        expert_(expert),
        future_start_(future_start) {}

  // Cache rows [0, offset) the expert sees; fixed when the first expert call arrives (decode is
  // over by then).
  int64_t expert_offset = -1;
  uint64_t kv_hash_before_expert = 0;

  Status run_call(Stream& stream, const Call& call, const WeightGroup& group, void* base) override {
    switch (call.phase) {
      case Phase::vision:
        return run_vision(stream, group, base);
      case Phase::prefill:
      case Phase::decode:
        return text_.run_call(stream, call, group, base);
      case Phase::expert:
        return run_expert(stream, call, group, base);
    }
    return make_error(ErrorCode::internal, "unknown phase");
  }

  // The pixels (bf16) and the vision tables, before the first call: the executor then starts the
  // inference's weight copies after them.
  Status upload_inputs(Stream& stream) override {
    if (!vision_) return {};
    return vision_->upload_pixels(stream, pixels_);
  }

  Status host_step(Stream& stream, const Call& call, const WeightGroup& group) override {
    switch (call.phase) {
      case Phase::prefill:
      case Phase::decode:
        return text_.host_step(stream, call, group);
      case Phase::expert:
        if (group.kind != GroupKind::expert_out) return {};
        if (!expert_) return make_error(ErrorCode::internal, "expert call for a model without one");
        return expert_->finish_step(stream, call.step);
      case Phase::vision:
        return {};
    }
    return {};
  }

  // Decode layers, and the expert's layers: every flow step attends over the same cache prefix
  // with the same rotary positions, and its changing input (the trunk's output) is on the device.
  bool replayable(const Call& call, const WeightGroup& group) const override {
    if (call.phase == Phase::expert) return group.kind == GroupKind::expert_layer;
    return TextGeneration::replayable(call, group);
  }
  bool skip(const Call& call) const override { return call.phase == Phase::decode && text_.done(); }

 private:
  Status run_vision(Stream& stream, const WeightGroup& group, void* base) {
    if (!vision_) return make_error(ErrorCode::internal, "vision call without images");
    switch (group.kind) {
      case GroupKind::vision_patch:
        return vision_->run_patch(stream, group, base);
      case GroupKind::vision_block:
        return vision_->run_block(stream, group.layer, group, base);
      case GroupKind::vision_merger:
        // Deepstack mergers carry their index k; the final merger has none.
        if (group.layer >= 0) return vision_->run_deepstack(stream, group.layer, group, base);
        return vision_->run_merger(stream, group, base);
      default:
        return make_error(ErrorCode::internal, group.name + " is not a vision group");
    }
  }

  Status run_expert(Stream& stream, const Call& call, const WeightGroup& group, void* base) {
    if (!expert_) return make_error(ErrorCode::internal, "expert call for a model without one");
    if (expert_offset < 0) {
      expert_offset = first_future_offset(text_.prompt(), text_.tokens(), future_start_);
      if (hash_cache_) {
        FERRY_ASSIGN_OR_RETURN(kv_hash_before_expert, hash_kv_cache(stream, text_.decoder()));
      }
      // Spec §6.3: positions continue from rope_delta, not from the cache length. Built here,
      // outside the replayable layer calls.
      FERRY_RETURN_IF_ERROR(
          expert_->prepare_rope(stream, expert_offset + text_.positions().rope_delta));
      // Expert layers recorded by an earlier run over other cache rows (real inputs generate a
      // data-dependent number of tokens) must be recorded again.
      const ExpertRecording now{expert_offset, text_.decoder().cache().length(),
                                text_.positions().rope_delta};
      if (graphs_ != nullptr && !(now == recorded_)) graphs_->drop(Phase::expert);
      recorded_ = now;
    }
    switch (group.kind) {
      case GroupKind::expert_in:
        return expert_->run_in(stream, call.step, group, base);
      case GroupKind::expert_layer: {
        const KvCache& cache = text_.decoder().cache();
        ExpertLayerContext ctx;
        ctx.k_cache = cache.k(group.layer);
        ctx.v_cache = cache.v(group.layer);
        ctx.cache_len = cache.length();
        // A generation that ended without feeding its last token (a stop token, or the most
        // tokens allowed) leaves offset = cache length + 1: every cache row is visible.
        ctx.offset = std::min(expert_offset, cache.length());
        ctx.rope_pos0 = expert_offset + text_.positions().rope_delta;
        return expert_->run_layer(stream, group.layer, group, base, ctx);
      }
      case GroupKind::expert_out:
        return expert_->run_out(stream, call.step, group, base);
      default:
        return make_error(ErrorCode::internal, group.name + " is not an expert group");
    }
  }

  GraphCache* graphs_;
  ExpertRecording& recorded_;
  bool hash_cache_;
  std::optional<VisionEncoder>& vision_;
  std::span<const uint16_t> pixels_;  // bf16
  TextGeneration& text_;
  std::optional<ActionExpert>& expert_;
  int32_t future_start_;
};

class VisionLanguageRunner final : public ModelRunner {
 public:
  VisionLanguageRunner(Backend& backend, const ModelConfig& config, const ModelWeights& weights,
                       const Workload& workload, const InferenceOptions& options)
      : backend_(backend),
        config_(config),
        weights_(weights),
        workload_(workload),
        options_(options) {}

  Status init();
  const std::vector<Call>& calls() const override { return calls_; }
  Status set_inputs(ModelInputs inputs) override;
  Result<InferenceResult> run(Stream& stream, CallWalker& walker) override;
  // The shared region: the vision tower is done before prefill, and decode steps of one token
  // do not touch the text decoder's large activations.
  LentRegion lent_region() const override {
    if (!text_ || text_->decoder().idle_after_prefill().bytes == 0) return {};
    return {shared_.data(), shared_.bytes()};
  }

 private:
  // The vision outputs, injected at the prompt's image rows.
  VisualInjection visual_at(std::vector<int32_t> rows) const {
    VisualInjection inj;
    inj.image_embeds = vision_->image_embeds();
    for (int k = 0; k < vision_->num_deepstack(); ++k)
      inj.deepstack.push_back(vision_->deepstack(k));
    inj.rows = std::move(rows);
    return inj;
  }

  Backend& backend_;
  const ModelConfig config_;
  const ModelWeights& weights_;
  const Workload workload_;
  const InferenceOptions options_;
  std::vector<Call> calls_;
  SharedRegion shared_;  // declared before its users: destroyed after them
  std::optional<VisionEncoder> vision_;
  // The inputs' pixel_values rounded to bf16, page-locked on CUDA: the upload runs at the link's
  // speed.
  HostBuffer pixel_buffer_;
  std::span<uint16_t> pixels_bf16_;
  std::vector<float> pixels_;  // the f32 pixel_values as given, kept only for keep_inputs
  std::vector<std::array<int64_t, 3>> grids_;
  EgoHistory history_;
  std::optional<TextGeneration> text_;
  std::optional<ActionExpert> expert_;
  VisionLanguageHandler::ExpertRecording expert_recording_;
};

Status VisionLanguageRunner::init() {
  const Qwen3VLConfig* vlm = config_.vlm();
  if (vlm == nullptr) return make_error(ErrorCode::internal, "not a vision-language model");
  const AlpamayoConfig* alpamayo = config_.alpamayo();
  FERRY_ASSIGN_OR_RETURN(calls_, call_sequence(weights_, config_, workload_));

  // Vision geometry (the buffers come once the prompt's length is known, below).
  std::vector<ImageGeometry> geoms(static_cast<size_t>(workload_.num_images),
                                   ImageGeometry{workload_.image_height, workload_.image_width});
  std::vector<int64_t> tokens_per_image;
  uint64_t vision_work = 0, vision_outputs = 0;
  if (workload_.num_images > 0) {
    FERRY_ASSIGN_OR_RETURN(VisionEncoder shape, VisionEncoder::describe(vlm->vision, geoms));
    tokens_per_image = shape.tokens_per_image();
    grids_ = shape.merged_grids();
    vision_work = shape.work_bytes();
    vision_outputs = shape.output_bytes();
  }

  // Prompt and rotary positions.
  Prompt prompt;
  if (alpamayo != nullptr) {
    history_ = synthetic_history(sub_seed(workload_.seed, 4));
    const auto hist_ids = history_tokens(history_);
    FERRY_ASSIGN_OR_RETURN(prompt,
                           alpamayo_prompt(sub_seed(workload_.seed, 1), workload_.prompt_tokens,
                                           tokens_per_image, hist_ids, *alpamayo));
  } else {
    FERRY_ASSIGN_OR_RETURN(prompt,
                           qwen3_vl_prompt(sub_seed(workload_.seed, 1), workload_.prompt_tokens,
                                           tokens_per_image, *vlm));
  }
  FERRY_ASSIGN_OR_RETURN(RopePositions positions,
                         rope_index(prompt.ids, static_cast<int32_t>(vlm->image_token_id), grids_));

  // The vision tower's working buffers and the text decoder's activations take turns in one
  // region (model/shared_region.h): a budget holds the larger, not both. The vision outputs,
  // which prefill reads beside the text activations, sit at its tail, so that the whole region
  // is idle after prefill (lent_region).
  const uint64_t text_work =
      TextDecoder::activation_bytes(vlm->text, static_cast<int64_t>(prompt.ids.size()));
  FERRY_ASSIGN_OR_RETURN(
      shared_, SharedRegion::allocate(backend_, std::max(vision_work, text_work) + vision_outputs,
                                      "vision | text activations"));
  if (workload_.num_images > 0) {
    FERRY_ASSIGN_OR_RETURN(
        VisionEncoder enc,
        VisionEncoder::create(vlm->vision, backend_, geoms, &shared_, /*outputs_at_tail=*/true));
    const int64_t count = pixel_value_count(geoms, vlm->vision);
    FERRY_ASSIGN_OR_RETURN(pixel_buffer_,
                           backend_.allocate_host(static_cast<size_t>(count) * sizeof(uint16_t)));
    pixels_bf16_ = std::span<uint16_t>(static_cast<uint16_t*>(pixel_buffer_.data()),
                                       static_cast<size_t>(count));
    std::vector<float> pixels(static_cast<size_t>(count));
    synthetic_pixel_values_into(sub_seed(workload_.seed, 3), geoms, vlm->vision, pixels);
    round_pixels_bf16(pixels, pixels_bf16_);
    if (options_.keep_inputs) pixels_ = std::move(pixels);
    vision_.emplace(std::move(enc));
  }

  GenerationParams params;
  params.gen_tokens = workload_.gen_tokens;
  params.decode_steps = decode_steps(config_, workload_);
  params.sampling = workload_.sampling;
  params.seed = sub_seed(workload_.seed, 2);
  params.keep_all_logits = options_.keep_all_logits;
  if (alpamayo != nullptr) {
    // ExpertLogitsProcessor masks every <i*> trajectory id (spec §5.1, §7.9).
    params.mask = LogitsMask{alpamayo->traj_token_start_idx,
                             alpamayo->traj_token_start_idx + alpamayo->traj_vocab_size};
    params.final_token = static_cast<int32_t>(alpamayo->traj_future_start_token_id);
  }
  FERRY_ASSIGN_OR_RETURN(
      TextGeneration text,
      TextGeneration::create(vlm->text, backend_, prompt.ids, positions, params, &shared_));
  text_.emplace(std::move(text));
  if (vision_) text_->set_visual(visual_at(prompt.image_rows));
  if (alpamayo != nullptr) {
    AlpamayoConfig ac = *alpamayo;
    ac.diffusion.num_inference_steps = workload_.flow_steps;
    FERRY_ASSIGN_OR_RETURN(ActionExpert e, ActionExpert::create(ac, backend_));
    expert_.emplace(std::move(e));
  }
  return {};
}

Status VisionLanguageRunner::set_inputs(ModelInputs in) {
  const Qwen3VLConfig* vlm = config_.vlm();
  const bool alpamayo = config_.alpamayo() != nullptr;
  const int64_t merge = vlm->vision.spatial_merge_size;
  std::vector<std::array<int64_t, 3>> expected;
  for (const auto& g : grids_) expected.push_back({g[0], g[1] * merge, g[2] * merge});
  auto describe = [](const std::vector<std::array<int64_t, 3>>& grids) {
    if (grids.empty()) return std::string("no images");
    return std::to_string(grids.size()) + " images of " + std::to_string(grids[0][1]) + "x" +
           std::to_string(grids[0][2]) + " patches";
  };
  if (in.image_grid_thw != expected) {
    return make_error(ErrorCode::invalid_argument, "inputs: " + describe(in.image_grid_thw) +
                                                       ", but this session holds " +
                                                       describe(expected));
  }
  if (in.pixel_values.size() != pixels_bf16_.size()) {
    return make_error(ErrorCode::invalid_argument,
                      "inputs: " + std::to_string(in.pixel_values.size()) +
                          " pixel values, the images take " + std::to_string(pixels_bf16_.size()));
  }
  if (alpamayo != in.history.has_value()) {
    return make_error(ErrorCode::invalid_argument, alpamayo
                                                       ? "inputs: Alpamayo-R1 needs the ego history"
                                                       : "inputs: this model takes no ego history");
  }
  const auto image_id = static_cast<int32_t>(vlm->image_token_id);
  FERRY_ASSIGN_OR_RETURN(RopePositions positions, rope_index(in.prompt, image_id, grids_));
  std::vector<int32_t> rows;
  for (size_t i = 0; i < in.prompt.size(); ++i) {
    if (in.prompt[i] == image_id) rows.push_back(static_cast<int32_t>(i));
  }
  FERRY_RETURN_IF_ERROR(text_->set_prompt(std::move(in.prompt), std::move(positions)));
  round_pixels_bf16(in.pixel_values, pixels_bf16_);
  if (options_.keep_inputs) pixels_ = std::move(in.pixel_values);
  if (in.history) history_ = *in.history;
  if (vision_) text_->set_visual(visual_at(std::move(rows)));
  text_->set_stop(std::move(in.stop), std::move(in.on_token));
  return {};
}

Result<InferenceResult> VisionLanguageRunner::run(Stream& stream, CallWalker& walker) {
  const Qwen3VLConfig* vlm = config_.vlm();
  const AlpamayoConfig* alpamayo = config_.alpamayo();
  text_->restart();
  if (expert_) expert_->begin(sub_seed(workload_.seed, 5));
  const auto future_start =
      static_cast<int32_t>(alpamayo != nullptr ? alpamayo->traj_future_start_token_id : -1);
  VisionLanguageHandler handler(vision_, pixels_bf16_, *text_, expert_, future_start,
                                options_.hash_kv_cache, walker.graphs(), expert_recording_);
  FERRY_ASSIGN_OR_RETURN(PhaseTimes times, walker.walk(stream, calls_, handler, options_.exec));

  InferenceResult r;
  take_text_results(*text_, r);
  r.times = times;
  if (options_.keep_inputs && vision_) {
    r.pixel_values.assign(pixels_.begin(), pixels_.end());
    r.patch_values = vlm->vision.patch_values();
    for (const auto& g : grids_) {
      r.image_grids.push_back(
          {g[0], g[1] * vlm->vision.spatial_merge_size, g[2] * vlm->vision.spatial_merge_size});
    }
  }
  if (expert_) {
    const auto acts = expert_->actions();
    r.actions.assign(acts.begin(), acts.end());
    r.actions_hash = fnv1a64(r.actions.data(), r.actions.size() * sizeof(float));
    r.expert_offset = handler.expert_offset;
    if (options_.hash_kv_cache) {
      r.kv_hash_before_expert = handler.kv_hash_before_expert;
      FERRY_ASSIGN_OR_RETURN(r.kv_hash_after_expert, hash_kv_cache(stream, text_->decoder()));
    }
    const Trajectory traj = unicycle_decode(acts, history_, alpamayo->action_space);
    r.trajectory_xyz = traj.xyz;
    r.trajectory_yaw = traj.yaw;
  }
  return r;
}

}  // namespace

Result<std::unique_ptr<ModelRunner>> create_vision_language_runner(
    Backend& backend, const ModelConfig& config, const ModelWeights& weights,
    const Workload& workload, const InferenceOptions& options) {
  auto runner = std::make_unique<VisionLanguageRunner>(backend, config, weights, workload, options);
  FERRY_RETURN_IF_ERROR(runner->init());
  return std::unique_ptr<ModelRunner>(std::move(runner));
}

}  // namespace ferry
