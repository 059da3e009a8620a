#include "model/qwen3_runner.h"

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
  bool replayable(const Call& call, const WeightGroup& group) const override {
    return TextGeneration::replayable(call, group);
  }

 private:
  TextGeneration& gen_;
};

}  // namespace

Result<InferenceResult> run_qwen3(Backend& backend, const ModelConfig& config,
                                  const ModelWeights& weights, GroupProvider& provider,
                                  const Workload& workload, const InferenceOptions& options) {
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
  auto stream = backend.create_stream();
  TextOnlyHandler handler(gen);
  FERRY_ASSIGN_OR_RETURN(
      PhaseTimes times, execute(backend, *stream, weights, calls, provider, handler, options.exec));
  InferenceResult r;
  take_text_results(gen, r);
  r.times = times;
  return r;
}

}  // namespace ferry
