// Placeholder: the CUDA backend lands with issue 4. Reports itself unavailable.
#include "backend/cuda/cuda_backend.h"

namespace ferry {

BackendFactory cuda_backend_factory() {
  BackendFactory f;
  f.available = [] { return false; };
  f.create = []() -> Result<std::unique_ptr<Backend>> {
    return make_error(ErrorCode::unsupported, "cuda backend not built yet");
  };
  return f;
}

}  // namespace ferry
