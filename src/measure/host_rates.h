// What the host engine (host/host_gemv.h) can read, measured: the host's DRAM read rate with the
// engine's workers (pinned as the engine pins them), the engine's batch-1 GEMV rate over the same
// bytes, and, where the backend has a link, the GEMV rate while copies keep the link busy (both
// read DRAM: measured, never assumed additive) with the link's rate meanwhile. Issue 26 item 4's
// inputs; `ferry probe` prints them.
#pragma once

#include <cstdint>
#include <optional>

#include "backend/backend.h"
#include "backend/gemv_order.h"
#include "core/status.h"

namespace ferry {

struct HostRates {
  int threads = 0;
  GemvIsa isa = GemvIsa::scalar;
  bool pinned = false;
  uint64_t bytes = 0;         // the buffer read (w of the GEMV), never cached between passes
  int64_t gemv_k = 0;         // row length of the GEMV
  double read_bandwidth = 0;  // B/s, median of the passes
  double gemv_bandwidth = 0;  // B/s of w, median of the passes
  // With copies from page-locked memory to the device running (nullopt: the backend has no
  // link, or the copies could not start).
  std::optional<double> gemv_beside_copies;  // B/s of w
  std::optional<double> link_beside_gemv;    // B/s the copies moved meanwhile
};

// `threads` 0: the engine's default. `bytes` 0: 1 GiB (64 MiB on the CPU backend, which has no
// link and must stay quick in tests). `backend` may be null (no copies). Median of `passes`.
Result<HostRates> measure_host_rates(Backend* backend, int threads = 0, uint64_t bytes = 0,
                                     int passes = 5);

}  // namespace ferry
