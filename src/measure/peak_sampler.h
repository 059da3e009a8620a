// Samples the device memory the driver counts for this process (Backend::driver_device_bytes) on
// a thread of its own, every `period`, and keeps the peak: the outside check of a budget, blind
// to ferry's own books. On a backend that cannot tell (the CPU), it samples nothing.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <thread>

#include "backend/backend.h"

namespace ferry {

class PeakSampler {
 public:
  explicit PeakSampler(const Backend& backend,
                       std::chrono::microseconds period = std::chrono::microseconds(500));
  ~PeakSampler();
  PeakSampler(const PeakSampler&) = delete;
  PeakSampler& operator=(const PeakSampler&) = delete;

  // The highest reading so far (nullopt: the backend cannot tell), and how many were taken.
  std::optional<uint64_t> peak() const;
  int64_t samples() const { return samples_.load(); }

 private:
  void loop();
  const Backend& backend_;
  std::chrono::microseconds period_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> any_{false};
  std::atomic<uint64_t> peak_{0};
  std::atomic<int64_t> samples_{0};
  std::thread thread_;
};

}  // namespace ferry
