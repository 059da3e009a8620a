#include "api/loaded_model.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "api/open_model.h"

namespace ferry::api {

bool session_fits(const Workload& held, const Workload& want) {
  const SamplingParams& a = held.sampling;
  const SamplingParams& b = want.sampling;
  return held.num_images == want.num_images && held.image_height == want.image_height &&
         held.image_width == want.image_width && held.gen_tokens == want.gen_tokens &&
         held.flow_steps == want.flow_steps && held.seed == want.seed && a.greedy == b.greedy &&
         a.temperature == b.temperature && a.top_p == b.top_p &&
         want.prompt_tokens <= held.prompt_tokens;
}

Result<std::unique_ptr<LoadedModel>> LoadedModel::open(const std::string& path,
                                                       const ModelOptions& options) {
  std::unique_ptr<LoadedModel> m(new LoadedModel());
  m->path_ = path;
  m->options_ = options;
  // The commands' sequence (api/open_model.h): config, weight table, checkpoint, binding.
  FERRY_ASSIGN_OR_RETURN(OpenModel opened, open_model(path));
  m->config_ = std::move(opened.config);
  m->weights_ = std::move(opened.weights);
  m->checkpoint_ = std::make_shared<const Checkpoint>(std::move(opened.checkpoint));
  InferenceOptions inference;
  inference.exec.graphs = options.graphs;
  FERRY_ASSIGN_OR_RETURN(m->session_options_,
                         session_options(options.session, m->weights_, inference));
  FERRY_ASSIGN_OR_RETURN(m->backend_,
                         backend_from_flag(options.backend, options.session.check_streams));
  m->backend_name_ = std::string(m->backend_->name());
  Result<Tokenizer> tok = Tokenizer::load_dir(path);
  if (tok.ok()) {
    m->tokenizer_.emplace(std::move(tok).value());
  } else {
    m->tokenizer_error_ = tok.error();
  }
  return m;
}

LoadedModel::~LoadedModel() = default;

Result<bool> LoadedModel::ensure_session(const Workload& w) {
  if (session_ && session_fits(held_, w)) return false;
  // A session that holds this prompt and the last one, so that prompts of varying lengths do
  // not reopen it each time; exactly `w` where the longer one leaves no room in the context.
  Workload open = w;
  if (session_) {
    Workload longer = w;
    longer.prompt_tokens = std::max(w.prompt_tokens, held_.prompt_tokens);
    if (validate_workload(longer, config_).ok()) open = longer;
  }
  // The old session's device memory goes first: the budget is for one. A backend reserves its
  // budget region once and keeps it, so a budgeted session after another needs a new backend
  // (as `bench --sweep` takes one per budget).
  const bool had = session_ != nullptr;
  session_.reset();
  if (had && backend_->ledger().reserved > 0) {
    // Created before the old one goes, so that a failure leaves a backend in place.
    FERRY_ASSIGN_OR_RETURN(std::unique_ptr<Backend> fresh,
                           backend_from_flag(options_.backend, options_.session.check_streams));
    backend_ = std::move(fresh);
  }
  FERRY_ASSIGN_OR_RETURN(
      session_, Session::open(*backend_, config_, weights_, *checkpoint_, open, session_options_));
  held_ = open;
  ++sessions_opened_;
  return true;
}

std::optional<LoadedModel::SessionSummary> LoadedModel::session_summary() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!session_) return std::nullopt;
  return SessionSummary{plan_summary_json(session_->plan(), weights_, session_->memory()).dump(),
                        session_->memory().summary()};
}

Result<RunOutput> LoadedModel::run(InputParts parts, const RunSettings& settings) {
  if (!tokenizer_) {
    return make_error(tokenizer_error_->code,
                      "real inputs need the model's tokenizer: " + tokenizer_error_->message);
  }
  FERRY_ASSIGN_OR_RETURN(PreparedInputs prepared,
                         make_real_inputs(*tokenizer_, path_, config_, std::move(parts)));
  Workload w = prepared.workload;
  // As `ferry run` sets them on real inputs (cmd_run.cpp: apply_settings).
  if (const AlpamayoConfig* ar = config_.alpamayo()) {
    w.flow_steps = settings.flow_steps.value_or(ar->diffusion.num_inference_steps);
  } else if (settings.flow_steps) {
    return make_error(ErrorCode::invalid_argument,
                      "flow steps: only alpamayo-r1 has an action expert");
  }
  if (settings.flow_steps && (*settings.flow_steps < 1 || *settings.flow_steps > kMaxFlowSteps)) {
    return make_error(ErrorCode::invalid_argument,
                      "flow steps: expected 1 to " + std::to_string(kMaxFlowSteps));
  }
  w.seed = settings.seed;
  const bool sampled = settings.temperature || settings.top_p;
  if (settings.greedy.value_or(false) && sampled) {
    return make_error(ErrorCode::invalid_argument, "greedy decoding takes no temperature or top-p");
  }
  w.sampling.greedy = settings.greedy.value_or(!sampled && config_.alpamayo() == nullptr);
  if (settings.temperature) {
    if (!(*settings.temperature >= 1e-6f && *settings.temperature <= 1e6f)) {
      return make_error(ErrorCode::invalid_argument, "temperature: expected 1e-6 to 1e6");
    }
    w.sampling.temperature = *settings.temperature;
  }
  if (settings.top_p) {
    if (!(*settings.top_p >= 1e-6f && *settings.top_p <= 1.0f)) {
      return make_error(ErrorCode::invalid_argument, "top-p: expected 1e-6 to 1");
    }
    w.sampling.top_p = *settings.top_p;
  }
  FERRY_RETURN_IF_ERROR(validate_workload(w, config_));

  std::lock_guard<std::mutex> lock(mutex_);
  RunOutput out;
  FERRY_ASSIGN_OR_RETURN(out.opened_session, ensure_session(w));
  if (out.opened_session) out.open_seconds = session_->open_seconds();
  const StopRule stop = prepared.inputs.stop;
  FERRY_RETURN_IF_ERROR(session_->set_inputs(std::move(prepared.inputs)));
  FERRY_ASSIGN_OR_RETURN(out.result, name_damage(session_->run(), *checkpoint_));
  FERRY_ASSIGN_OR_RETURN(out.text, generated_text(*tokenizer_, stop, out.result));
  return out;
}

}  // namespace ferry::api
