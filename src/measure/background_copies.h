// Copies that keep the link busy while something else is measured: the profiler times every call
// of an all-resident plan with these running, since a copy crossing the link slows the kernels
// beside it (measure/profiler.h) and such a plan has no copies of its own to show by how much.
//
// A thread enqueues host-to-device copies of one page-locked host buffer into one device buffer
// on a copy stream of its own, two in flight, until stop() or destruction (RAII: the thread is
// joined and the stream drained before the buffers go). The copies' bytes are never read.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>

#include "backend/backend.h"
#include "core/status.h"

namespace ferry {

class BackgroundCopies {
 public:
  // Allocates the two buffers (the device one under the backend's reservation, if any) and
  // starts copying. Fails (out_of_memory) when `bytes` does not fit.
  static Result<std::unique_ptr<BackgroundCopies>> start(Backend& backend, uint64_t bytes);
  ~BackgroundCopies();
  BackgroundCopies(const BackgroundCopies&) = delete;
  BackgroundCopies& operator=(const BackgroundCopies&) = delete;

  // Stops enqueuing and waits for the copies in flight; returns how many copies ran.
  int64_t stop();
  uint64_t bytes() const { return bytes_; }

 private:
  BackgroundCopies(Backend& backend, DeviceBuffer device, HostBuffer host, uint64_t bytes);
  void loop();

  Backend& backend_;
  DeviceBuffer device_;
  HostBuffer host_;
  uint64_t bytes_;
  std::unique_ptr<Stream> stream_;
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> copies_{0};
  std::thread thread_;
};

}  // namespace ferry
