#include "model/qwen3_runner.h"

#include <optional>

#include "model/prompt.h"
#include "model/rope_index.h"
#include "model/text_generation.h"

namespace ferry {

namespace {

class TextOnlyHandler : public CallHandler {
 public:
  explicit TextOnlyHandler(TextGeneration& gen) : gen_(gen) {}
  Status run_call(Stream& stream, const Call& call, const WeightGroup& group, void* base) override {
    return gen_.run_call(stream, call, group, base);
  }
  Status host_step(Stream& stream, const Call& call, const WeightGroup& group) override {
    return gen_.host_step(stream, call, group);
  }
  bool replayable(const Call& call, const WeightGroup& group) const override {
    return TextGeneration::replayable(call, group);
  }
  bool skip(const Call& call) const override { return call.phase == Phase::decode && gen_.done(); }

 private:
  TextGeneration& gen_;
};

class Qwen3Runner final : public ModelRunner {
 public:
  Qwen3Runner(std::vector<Call> calls, TextGeneration gen, ExecOptions exec)
      : calls_(std::move(calls)), gen_(std::move(gen)), exec_(exec) {}

  const std::vector<Call>& calls() const override { return calls_; }

  Status set_inputs(ModelInputs inputs) override {
    if (!inputs.pixel_values.empty() || !inputs.image_grid_thw.empty() || inputs.history) {
      return make_error(ErrorCode::invalid_argument,
                        "inputs: a text model takes no images or ego history");
    }
    const auto n = static_cast<int64_t>(inputs.prompt.size());
    RopePositions positions;
    positions.pos = linear_positions(0, n);
    FERRY_RETURN_IF_ERROR(gen_.set_prompt(std::move(inputs.prompt), std::move(positions)));
    gen_.set_stop(std::move(inputs.stop), std::move(inputs.on_token));
    return {};
  }

  Result<InferenceResult> run(Stream& stream, CallWalker& walker) override {
    gen_.restart();
    TextOnlyHandler handler(gen_);
    FERRY_ASSIGN_OR_RETURN(PhaseTimes times, walker.walk(stream, calls_, handler, exec_));
    InferenceResult r;
    take_text_results(gen_, r);
    r.times = times;
    return r;
  }

  LentRegion lent_region() const override {
    const TextDecoder::LentBytes idle = gen_.decoder().idle_after_prefill();
    return {idle.data, idle.bytes};
  }

 private:
  std::vector<Call> calls_;
  TextGeneration gen_;
  ExecOptions exec_;
};

}  // namespace

Result<std::unique_ptr<ModelRunner>> create_qwen3_runner(Backend& backend,
                                                         const ModelConfig& config,
                                                         const ModelWeights& weights,
                                                         const Workload& workload,
                                                         const InferenceOptions& options) {
  FERRY_ASSIGN_OR_RETURN(std::vector<Call> calls, call_sequence(weights, config, workload));
  const TextConfig& text = config.text();
  std::vector<int32_t> prompt =
      random_text_ids(sub_seed(workload.seed, 1), workload.prompt_tokens, text.vocab_size);
  RopePositions positions;
  positions.pos = linear_positions(0, workload.prompt_tokens);
  GenerationParams params;
  params.gen_tokens = workload.gen_tokens;
  params.decode_steps = decode_steps(config, workload);
  params.sampling = workload.sampling;
  params.seed = sub_seed(workload.seed, 2);
  params.keep_all_logits = options.keep_all_logits;
  FERRY_ASSIGN_OR_RETURN(TextGeneration gen,
                         TextGeneration::create(text, backend, prompt, positions, params));
  return std::unique_ptr<ModelRunner>(
      std::make_unique<Qwen3Runner>(std::move(calls), std::move(gen), options.exec));
}

}  // namespace ferry
