// CUDA graphs for the executor: capture the work a function enqueues on a stream, instantiate it
// once, replay it, and when only pointers or parameters change, update the executable graph in
// place (cudaGraphExecUpdate) instead of instantiating again. CUDA-only header, not part of
// backend.h.
#pragma once

#include <cuda_runtime.h>

#include <functional>

#include "backend/backend.h"
#include "backend/cuda/cuda_resources.h"
#include "core/status.h"

namespace ferry::cuda {

class GraphExec {
 public:
  using Body = std::function<Status()>;

  GraphExec() = default;

  // Captures everything `body` enqueues on `stream` (nothing runs during capture) and
  // instantiates it. An error from `body` or from CUDA ends the capture and is returned.
  static Result<GraphExec> capture(cudaStream_t stream, const Body& body);
  static Result<GraphExec> capture(Stream& stream, const Body& body);

  // Captures `body` again and updates the executable graph in place when CUDA accepts the new
  // graph as an update (same topology; pointers and launch parameters may differ); otherwise
  // instantiates the new graph. updated_in_place() says which happened.
  Status update(cudaStream_t stream, const Body& body);
  Status update(Stream& stream, const Body& body);

  // Enqueues one replay on `stream`.
  Status launch(cudaStream_t stream) const;
  Status launch(Stream& stream) const;

  bool valid() const { return static_cast<bool>(exec_); }
  bool updated_in_place() const { return updated_in_place_; }

 private:
  UniqueGraph graph_;
  UniqueGraphExec exec_;
  bool updated_in_place_ = false;
};

}  // namespace ferry::cuda
