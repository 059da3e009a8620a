#include "measure/background_copies.h"

#include <array>
#include <cstring>

namespace ferry {

Result<std::unique_ptr<BackgroundCopies>> BackgroundCopies::start(Backend& backend,
                                                                  uint64_t bytes) {
  if (bytes == 0) return make_error(ErrorCode::invalid_argument, "background copies: 0 bytes");
  FERRY_ASSIGN_OR_RETURN(DeviceBuffer device, backend.allocate(bytes, "background copies"));
  FERRY_ASSIGN_OR_RETURN(HostBuffer host, backend.allocate_host(bytes));
  std::memset(host.data(), 0, bytes);
  std::unique_ptr<BackgroundCopies> b(
      new BackgroundCopies(backend, std::move(device), std::move(host), bytes));
  b->thread_ = std::thread([p = b.get()] { p->loop(); });
  return b;
}

BackgroundCopies::BackgroundCopies(Backend& backend, DeviceBuffer device, HostBuffer host,
                                   uint64_t bytes)
    : backend_(backend),
      device_(std::move(device)),
      host_(std::move(host)),
      bytes_(bytes),
      stream_(backend.create_copy_stream()) {}

BackgroundCopies::~BackgroundCopies() {
  stop();
}

void BackgroundCopies::loop() {
  // Two copies in flight: while one runs the next is queued behind it, so the link never idles
  // between them; the host waits on the older one before it queues a third.
  std::array<std::unique_ptr<Event>, 2> done = {backend_.create_event(), backend_.create_event()};
  int64_t k = 0;
  while (!stopping_.load(std::memory_order_relaxed)) {
    Event& slot = *done[static_cast<size_t>(k % 2)];
    if (k >= 2 && !backend_.synchronize(slot).ok()) break;
    backend_.copy_to_device(*stream_, device_.data(), host_.data(), bytes_);
    backend_.record(slot, *stream_);
    copies_.fetch_add(1, std::memory_order_relaxed);
    ++k;
  }
  (void)backend_.synchronize(*stream_);
}

int64_t BackgroundCopies::stop() {
  stopping_.store(true);
  if (thread_.joinable()) thread_.join();
  return copies_.load();
}

}  // namespace ferry
