// A model loaded once for many inferences on real inputs, as a library (the Python module,
// python/, is its first user): the checkpoint mapped, the weights bound, one backend, and a
// session (exec/session.h) opened at the first run and kept while later runs fit it.
//
// A session is sized for one workload: its images and their size, the longest prompt it holds,
// how many tokens it generates at most, its seed and sampling. A run whose inputs fit (the same
// images, a prompt no longer, the same settings) reuses it, buffers and recorded graphs
// included; one that does not closes it and opens another (`sessions_opened` counts them).
// Each run gives the bytes `ferry run` gives on the same inputs and settings.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "api/run_real.h"
#include "api/session_args.h"
#include "backend/backend.h"
#include "core/status.h"
#include "exec/session.h"
#include "format/safetensors.h"
#include "model/config.h"
#include "model/weights.h"
#include "tokenizer/tokenizer.h"

namespace ferry::api {

struct ModelOptions {
  std::string backend;  // "cpu", "cuda"; empty: CUDA when available, else the CPU
  SessionArgs session;  // --vram, --mode, --resident, ... as `ferry run` takes them
  bool graphs = true;   // record replayable calls once and replay them
};

// What `ferry run` sets beside the inputs: sampling, seed, flow steps.
struct RunSettings {
  std::optional<bool> greedy;  // unset: argmax, except Alpamayo-R1 (temperature 0.6, top-p 0.98)
  std::optional<float> temperature;
  std::optional<float> top_p;
  uint64_t seed = 0;
  std::optional<int64_t> flow_steps;  // Alpamayo: unset, the config's
};

struct RunOutput {
  InferenceResult result;
  GeneratedText text;
  bool opened_session = false;  // this run opened a session (the first, or one that did not fit)
  double open_seconds = 0.0;    // the session's opening, when this run opened it
};

class LoadedModel {
 public:
  // Opens `path` (a checkpoint folder), checks it, creates the backend and checks the session
  // options (a bad --vram is an error here, not at the first run). The tokenizer is read when
  // the folder has one; runs need it.
  static Result<std::unique_ptr<LoadedModel>> open(const std::string& path,
                                                   const ModelOptions& options);
  ~LoadedModel();

  // One inference on `parts` (make_real_inputs checks them). Thread-safe: runs take turns.
  Result<RunOutput> run(InputParts parts, const RunSettings& settings);

  const std::string& path() const { return path_; }
  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  // Shared so that what was handed out of the mapping (DLPack exports) keeps it alive.
  const std::shared_ptr<const Checkpoint>& checkpoint() const { return checkpoint_; }
  const std::string& backend_name() const { return backend_name_; }  // "cpu", "cuda"
  const Tokenizer* tokenizer() const { return tokenizer_ ? &*tokenizer_ : nullptr; }
  // The session's plan as `ferry run --json` prints it, and its memory in one line; nullopt
  // before the first run. Waits for a run going on (which may replace the session).
  struct SessionSummary {
    std::string plan_json;
    std::string memory;
  };
  std::optional<SessionSummary> session_summary() const;
  int64_t sessions_opened() const { return sessions_opened_.load(); }

 private:
  LoadedModel() = default;
  Result<bool> ensure_session(const Workload& w);

  std::string path_;
  ModelOptions options_;
  ModelConfig config_;
  ModelWeights weights_;
  std::shared_ptr<const Checkpoint> checkpoint_;
  std::optional<Tokenizer> tokenizer_;
  std::optional<Error> tokenizer_error_;
  std::unique_ptr<Backend> backend_;
  std::string backend_name_;
  SessionOptions session_options_;
  std::unique_ptr<Session> session_;
  Workload held_;  // the workload session_ was opened for
  std::atomic<int64_t> sessions_opened_{0};
  mutable std::mutex mutex_;  // runs take turns; the summary waits for them
};

// Whether a session opened for `held` runs inputs that need `want`: the same images at the same
// size, settings and most generated tokens, and a prompt no longer.
bool session_fits(const Workload& held, const Workload& want);

}  // namespace ferry::api
