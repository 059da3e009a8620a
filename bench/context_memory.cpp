// What the CUDA runtime itself takes on the device before ferry allocates anything, step by
// step, as the driver counts it (NVML, this process): the context, the per-thread stack
// reservation at the default limit and at ferry's, cuBLASLt's handle. Run once per GPU kind; the
// numbers go into docs/benchmarks.md. Usage: ferry_context_memory [--stack BYTES]
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "backend/cuda/nvml_probe.h"

namespace {

double mib(std::optional<uint64_t> b) {
  return b ? static_cast<double>(*b) / (1024.0 * 1024.0) : -1.0;
}

bool ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  size_t stack = 0;
  bool set_stack = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--stack") == 0 && i + 1 < argc) {
      stack = std::strtoull(argv[++i], nullptr, 10);
      set_stack = true;
    }
  }
  char bus[32] = {};
  if (!ok(cudaDeviceGetPCIBusId(bus, sizeof bus, 0), "bus id")) return 1;
  auto probe = ferry::cuda::NvmlProbe::open(bus);
  if (!probe) {
    std::fprintf(stderr, "NVML not available\n");
    return 1;
  }
  if (!ok(cudaSetDevice(0), "set device") || !ok(cudaFree(nullptr), "context")) return 1;
  size_t limit = 0;
  (void)cudaDeviceGetLimit(&limit, cudaLimitStackSize);
  std::printf("context            %8.1f MiB  (stack limit %zu B, %s)\n",
              mib(probe->process_bytes()), limit, probe->method().c_str());
  if (set_stack) {
    if (!ok(cudaDeviceSetLimit(cudaLimitStackSize, stack), "set stack")) return 1;
    (void)cudaDeviceGetLimit(&limit, cudaLimitStackSize);
    std::printf("stack limit set    %8.1f MiB  (asked %zu B, got %zu B)\n",
                mib(probe->process_bytes()), stack, limit);
  }
  cublasLtHandle_t lt = nullptr;
  if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS) return 1;
  std::printf("+ cuBLASLt handle  %8.1f MiB\n", mib(probe->process_bytes()));
  cublasLtDestroy(lt);
  return 0;
}
