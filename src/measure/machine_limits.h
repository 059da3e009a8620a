// The ceilings every benchmark is printed against, measured on the backend in the same run
// (rates differ ~10% between machines of one kind): the BF16 matrix-product peak through the
// backend's own Linear, device-memory bandwidth through a device-to-device copy, and the host
// link's peak through a copy from page-locked memory. Run it before a budget is reserved: its
// buffers are large and temporary.
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "core/status.h"
#include "plan/profile.h"

namespace ferry {

struct MachineLimits {
  double gemm_flops = 0;      // FLOP/s, median over repetitions
  int64_t gemm_size = 0;      // M = N = K of the timed product
  double copy_bandwidth = 0;  // B/s, bytes read + bytes written per second
  uint64_t copy_bytes = 0;    // size of the copied buffer
  double h2d_bandwidth = 0;   // B/s, page-locked host -> device, one copy of h2d_bytes
  uint64_t h2d_bytes = 0;
};

// Sizes follow the backend: 8192³ and 2 GiB on a GPU, small on the CPU so that the probe stays
// well under a second there. Inputs are random (never zeros, which run faster).
// `budget` (0: none): keep the probes' buffers well inside it (smaller copies, a smaller GEMM).
Result<MachineLimits> measure_machine_limits(Backend& backend, Stream& stream, uint64_t budget = 0);

// The rates a session estimates its profile with (exec/session_plan.h default_machine_rates), with
// the measured peaks of `limits` (link, GEMM, device memory) in place of the defaults.
MachineRates measured_machine_rates(const Backend& backend, const MachineLimits& limits);

}  // namespace ferry
