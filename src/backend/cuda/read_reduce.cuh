// The probe kernel of `ferry probe`: read every byte of a range (device memory, or host memory
// registered so the device reads it in place) and fold it into one 64-bit xor, so that the read
// cannot be optimized away. Its rate is the rate kernels reach reading memory where it lies.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "core/status.h"

namespace ferry::cuda {

// sum: 8 bytes of device memory, xor-accumulated. `sms`: the device's multiprocessors (sizes the
// grid so that enough reads are in flight to cover a PCIe round trip).
Status launch_read_reduce(const void* src, size_t bytes, void* sum, int sms, cudaStream_t stream);

}  // namespace ferry::cuda
