#include "measure/peak_sampler.h"

#include <algorithm>

namespace ferry {

PeakSampler::PeakSampler(const Backend& backend, std::chrono::microseconds period)
    : backend_(backend), period_(period) {
  if (backend_.driver_device_bytes().has_value()) thread_ = std::thread([this] { loop(); });
}

PeakSampler::~PeakSampler() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void PeakSampler::loop() {
  while (!stop_.load()) {
    if (const std::optional<uint64_t> v = backend_.driver_device_bytes()) {
      uint64_t prev = peak_.load();
      while (*v > prev && !peak_.compare_exchange_weak(prev, *v)) {
      }
      any_ = true;
      ++samples_;
    }
    std::this_thread::sleep_for(period_);
  }
}

std::optional<uint64_t> PeakSampler::peak() const {
  if (!any_.load()) return std::nullopt;
  return peak_.load();
}

}  // namespace ferry
