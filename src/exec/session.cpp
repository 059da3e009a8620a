#include "exec/session.h"

#include <chrono>

namespace ferry {

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
  const uint64_t runtime = runtime_bytes_now(backend);
  FERRY_ASSIGN_OR_RETURN(s->planned_, plan_session_full(backend, config, weights, workload, options,
                                                        runtime, s->tier_.readable_in_place()));
  if (const std::optional<uint64_t> vram = s->planned_.vram) {
    // Everything ferry allocates from here on is carved from this one region.
    // The runtime and the registered tier's page tables stay outside it.
    FERRY_RETURN_IF_ERROR(backend.reserve(*vram - runtime - s->planned_.host_page_tables));
  }
  s->stream_ = backend.create_stream();
  FERRY_ASSIGN_OR_RETURN(s->provider_,
                         StreamingProvider::create(backend, *s->stream_, weights, s->tier_,
                                                   s->planned_.plan, options.streaming));
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
