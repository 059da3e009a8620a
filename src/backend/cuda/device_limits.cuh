// What a device lets a kernel use, read once per device the process touches: compute
// capability, SMs, threads per SM, L2, and the dynamic shared memory a block may opt in to.
// Launchers choose their shared-memory variants from these (never from a constant for the H200)
// and opt in per device. CUDA-only header.
//
// FERRY_MAX_SHARED_BYTES (a developer switch, e.g. 101376 = the 99 KB of an sm_86/89/120 card)
// caps the dynamic shared memory ferry asks for per block, so the small-device variants run on
// a Hopper and can be diff-tested there. Only choices that keep the summation order follow it:
// the output bytes do not change (docs/cuda.md, "Devices").
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace ferry::cuda {

// The oldest compute capability ferry's kernels build for: bf16 mma.sync, cp.async, ldmatrix.
inline constexpr int kMinComputeMajor = 8;

struct DeviceLimits {
  int device = 0;
  std::string name;
  int cc_major = 0;
  int cc_minor = 0;
  int sm_count = 0;
  int max_threads_per_sm = 0;
  int64_t l2_bytes = 0;
  int shared_per_block_optin = 0;  // cudaDevAttrMaxSharedMemoryPerBlockOptin
  int shared_per_sm = 0;           // cudaDevAttrMaxSharedMemoryPerMultiprocessor

  // "NVIDIA H200 (sm_90, 132 SMs, 2048 threads/SM, 60 MiB L2, 227 KiB shared/block)".
  std::string describe() const;

  // Kernels already opted in on this device, with the bytes they were given.
  mutable std::mutex opt_in_mutex;
  mutable std::vector<std::pair<const void*, int>> opted_in;
};

// The limits of `device`, read at the first call for it and kept for the process (thread-safe;
// the pointer stays valid). An error when the runtime cannot read them.
Result<const DeviceLimits*> device_limits(int device);
// The same for the calling thread's current device (cudaGetDevice).
Result<const DeviceLimits*> current_device_limits();

// ok when ferry runs on the device: compute capability >= 8.0, and this binary holds code the
// device can run (SASS for it or PTX it can JIT-compile). Else a one-line unsupported error
// naming the card and what ferry needs.
Status check_device_supported(const DeviceLimits& d);

// The cap on dynamic shared memory per block: FERRY_MAX_SHARED_BYTES when set (read once), or
// what set_shared_memory_cap last set; 0 = none.
int shared_memory_cap();
// Tests: replace the cap for the whole process (0 = none). Set it only while no op is enqueued.
void set_shared_memory_cap(int bytes);

// Dynamic shared memory a block may ask for on `d`: the device's opt-in limit, capped.
int shared_bytes_allowed(const DeviceLimits& d);

// Lets kernel `func` launch with `bytes` of dynamic shared memory on device d.device
// (cudaFuncSetAttribute, done once per kernel, device and size). `what` names it in errors.
Status opt_in_shared(const DeviceLimits& d, const void* func, int bytes, const char* what);

// The limits an op launcher uses: the context's device when it names one, else the current one.
Result<const DeviceLimits*> limits_for(const DeviceLimits* given);

}  // namespace ferry::cuda
