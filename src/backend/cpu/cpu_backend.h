// The CPU backend: the reference every other backend is diff-tested against.
#pragma once

#include <memory>
#include <optional>

#include "backend/backend.h"

namespace ferry {

struct CpuBackendOptions {
  int threads = 0;  // worker threads for ops; 0 = hardware concurrency
  // Test hook: each enqueued item sleeps a random 0..max_delay_us first (seeded), so stream and
  // event ordering is exercised under random timing. 0 = off.
  int max_delay_us = 0;
  uint64_t delay_seed = 1;
  // Test hook: every copy from the host (copy_to_device, copy_from_mapping) sleeps this long
  // before its bytes move, on top of the random delay, so work that skips its wait for such a copy
  // reliably runs before the bytes land (the checks that a missing wait is caught). 0 = off.
  int host_copy_delay_us = 0;
  // Test hook: register_host refuses, as a platform that cannot register file pages does (the
  // host tier then falls back to its bounce ring).
  bool refuse_host_registration = false;
  // Test hook: what platform_facts() says of `integrated` (a faked device attribute, as an
  // integrated GPU's cudaDevAttrIntegrated gives it). Empty: nothing, as the base says.
  std::optional<bool> integrated = std::nullopt;
};

std::unique_ptr<Backend> create_cpu_backend(const CpuBackendOptions& options = {});

}  // namespace ferry
