// Device limits, read once per device; the shared-memory cap; per-device opt-ins.
#include "backend/cuda/device_limits.cuh"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>

#include "backend/cuda/cuda_check.h"

#ifndef FERRY_CUDA_ARCHS
#define FERRY_CUDA_ARCHS "?"
#endif

namespace ferry::cuda {
namespace {

// Launched never: cudaFuncGetAttributes on it says whether this binary has code for a device.
__global__ void device_probe_kernel() {}

int read_cap_env() {
  const char* v = std::getenv("FERRY_MAX_SHARED_BYTES");
  if (v == nullptr || *v == '\0') return 0;
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0' || n < 0 || n > (1L << 30)) {
    std::fprintf(stderr, "ferry: FERRY_MAX_SHARED_BYTES=%s is not a byte count; ignored\n", v);
    return 0;
  }
  return static_cast<int>(n);
}

std::atomic<int>& cap_storage() {
  static std::atomic<int> cap{read_cap_env()};
  return cap;
}

int attr(cudaDeviceAttr a, int device, cudaError_t& err) {
  int v = 0;
  const cudaError_t e = cudaDeviceGetAttribute(&v, a, device);
  if (e != cudaSuccess && err == cudaSuccess) err = e;
  return v;
}

std::string kib(int64_t bytes) {
  if (bytes % (1 << 20) == 0 && bytes >= (1 << 20)) return std::to_string(bytes >> 20) + " MiB";
  if (bytes % 1024 == 0) return std::to_string(bytes / 1024) + " KiB";
  return std::to_string(bytes) + " B";
}

}  // namespace

std::string DeviceLimits::describe() const {
  return name + " (sm_" + std::to_string(cc_major) + std::to_string(cc_minor) + ", " +
         std::to_string(sm_count) + " SMs, " + std::to_string(max_threads_per_sm) +
         " threads/SM, " + kib(l2_bytes) + " L2, " + kib(shared_per_block_optin) + " shared/block)";
}

Result<const DeviceLimits*> device_limits(int device) {
  static std::mutex mutex;
  static std::map<int, std::unique_ptr<DeviceLimits>> table;
  const std::lock_guard<std::mutex> lock(mutex);
  if (auto it = table.find(device); it != table.end()) return it->second.get();
  auto d = std::make_unique<DeviceLimits>();
  d->device = device;
  cudaError_t err = cudaSuccess;
  d->cc_major = attr(cudaDevAttrComputeCapabilityMajor, device, err);
  d->cc_minor = attr(cudaDevAttrComputeCapabilityMinor, device, err);
  d->sm_count = attr(cudaDevAttrMultiProcessorCount, device, err);
  d->max_threads_per_sm = attr(cudaDevAttrMaxThreadsPerMultiProcessor, device, err);
  d->l2_bytes = attr(cudaDevAttrL2CacheSize, device, err);
  d->shared_per_block_optin = attr(cudaDevAttrMaxSharedMemoryPerBlockOptin, device, err);
  d->shared_per_sm = attr(cudaDevAttrMaxSharedMemoryPerMultiprocessor, device, err);
  cudaDeviceProp prop{};
  if (err == cudaSuccess) err = cudaGetDeviceProperties(&prop, device);  // for its name
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return cuda_error(err, "reading the attributes of the CUDA device", __FILE__, __LINE__);
  }
  d->name = prop.name;
  const DeviceLimits* out = d.get();
  table.emplace(device, std::move(d));
  return out;
}

Result<const DeviceLimits*> current_device_limits() {
  int device = 0;
  FERRY_CUDA_CHECK(cudaGetDevice(&device));
  return device_limits(device);
}

Result<const DeviceLimits*> limits_for(const DeviceLimits* given) {
  if (given != nullptr) return given;
  return current_device_limits();
}

Status check_device_supported(const DeviceLimits& d) {
  const std::string cc = std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor);
  if (d.cc_major < kMinComputeMajor) {
    return make_error(ErrorCode::unsupported,
                      "cuda: " + d.name + " (compute capability " + cc +
                          ") is too old for ferry, which needs compute capability 8.0 or newer "
                          "(Ampere, Ada, Hopper, Blackwell: bf16 tensor-core mma and cp.async)");
  }
  int previous = 0;
  const bool switch_device = cudaGetDevice(&previous) == cudaSuccess && previous != d.device;
  if (switch_device && cudaSetDevice(d.device) != cudaSuccess) (void)cudaGetLastError();
  cudaFuncAttributes fa{};
  const cudaError_t e = cudaFuncGetAttributes(&fa, device_probe_kernel);
  if (switch_device) (void)cudaSetDevice(previous);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return make_error(ErrorCode::unsupported,
                      "cuda: this ferry was built for CUDA architectures " FERRY_CUDA_ARCHS
                      ", none of which runs on " +
                          d.name + " (compute capability " + cc +
                          "); rebuild with -DCMAKE_CUDA_ARCHITECTURES=native (or " +
                          std::to_string(d.cc_major) + std::to_string(d.cc_minor) + ")");
  }
  return Status();
}

int shared_memory_cap() {
  return cap_storage().load(std::memory_order_relaxed);
}

void set_shared_memory_cap(int bytes) {
  cap_storage().store(bytes < 0 ? 0 : bytes, std::memory_order_relaxed);
}

int shared_bytes_allowed(const DeviceLimits& d) {
  const int cap = shared_memory_cap();
  return cap > 0 ? std::min(cap, d.shared_per_block_optin) : d.shared_per_block_optin;
}

Status opt_in_shared(const DeviceLimits& d, const void* func, int bytes, const char* what) {
  const std::lock_guard<std::mutex> lock(d.opt_in_mutex);
  for (const auto& [f, b] : d.opted_in) {
    if (f == func && b >= bytes) return Status();
  }
  if (bytes > d.shared_per_block_optin) {
    return make_error(ErrorCode::unsupported,
                      std::string(what) + ": needs " + std::to_string(bytes) +
                          " bytes of shared memory per block, " + d.name + " allows " +
                          std::to_string(d.shared_per_block_optin));
  }
  int previous = 0;
  const bool switch_device = cudaGetDevice(&previous) == cudaSuccess && previous != d.device;
  if (switch_device) FERRY_CUDA_CHECK(cudaSetDevice(d.device));
  const cudaError_t e =
      cudaFuncSetAttribute(func, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (switch_device) (void)cudaSetDevice(previous);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return make_error(ErrorCode::backend, std::string(what) + ": shared memory opt-in (" +
                                              std::to_string(bytes) + " bytes on " + d.name +
                                              "): " + cudaGetErrorString(e));
  }
  for (auto& [f, b] : d.opted_in) {
    if (f == func) {
      b = bytes;
      return Status();
    }
  }
  d.opted_in.emplace_back(func, bytes);
  return Status();
}

}  // namespace ferry::cuda
