// The CUDA backend's entry point. Plain C++: no CUDA header leaks to whoever includes this.
#pragma once

#include "backend/backend.h"

namespace ferry {

BackendFactory cuda_backend_factory();

}  // namespace ferry
