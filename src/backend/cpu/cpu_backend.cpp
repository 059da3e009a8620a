// Placeholder until the CPU backend lands (issue 3); replaced, not extended.
#include "backend/cpu/cpu_backend.h"

namespace ferry {

std::unique_ptr<Backend> create_cpu_backend(const CpuBackendOptions&) {
  FERRY_CHECK(false, "cpu backend not built yet");
  return nullptr;
}

}  // namespace ferry
