#include "backend/measuring_backend.h"

namespace ferry {

namespace {
class NullStream final : public Stream {};
class NullEvent final : public Event {};
}  // namespace

std::unique_ptr<Stream> MeasuringBackend::create_stream() {
  return std::make_unique<NullStream>();
}

std::unique_ptr<Event> MeasuringBackend::create_event() {
  return std::make_unique<NullEvent>();
}

Status MeasuringBackend::begin_capture(Stream&) {
  return make_error(ErrorCode::unsupported, "measure: nothing runs, nothing is recorded");
}

Result<std::unique_ptr<Graph>> MeasuringBackend::end_capture(Stream&) {
  return make_error(ErrorCode::unsupported, "measure: nothing runs, nothing is recorded");
}

Status MeasuringBackend::launch(Stream&, const Graph&) {
  return make_error(ErrorCode::unsupported, "measure: nothing runs");
}

Result<Backend::RawDeviceMemory> MeasuringBackend::device_alloc(size_t bytes) {
  void* p = reinterpret_cast<void*>(next_);
  next_ += (bytes + 255) / 256 * 256 + 256;
  return RawDeviceMemory{p, [](void*) {}};
}

}  // namespace ferry
