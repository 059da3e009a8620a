// A backend that only counts: allocate() hands out addresses that are never dereferenced and
// books the bytes by purpose; every copy, fill, op and event is accepted and does nothing. A
// model runner built on it reports, before anything real is allocated, exactly the device memory
// it will take (the measure pass of a memory plan: the same code that allocates, not a second
// formula that could drift from it).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "backend/backend.h"

namespace ferry {

class MeasuringBackend final : public Backend {
 public:
  // `stream_bytes`: what each compute stream of the real backend takes (its workspaces).
  explicit MeasuringBackend(uint64_t stream_bytes = 0) : stream_bytes_(stream_bytes) {}

  std::string_view name() const override { return "measure"; }
  DeviceInfo info() const override { return DeviceInfo{"measure", 0}; }
  uint64_t compute_stream_bytes() const override { return stream_bytes_; }

  std::unique_ptr<Stream> create_stream() override;
  std::unique_ptr<Event> create_event() override;
  void copy_to_device(Stream&, void*, const void*, size_t) override {}
  void copy_to_host(Stream&, void*, const void*, size_t) override {}
  void copy_on_device(Stream&, void*, const void*, size_t) override {}
  void fill_zero(Stream&, void*, size_t) override {}
  Status run(Stream&, const Op&) override { return {}; }
  Status decode_group(Stream&, const compress::GroupLayout&, const void*, void*, size_t,
                      std::string_view) override {
    return {};
  }
  Status begin_capture(Stream&) override;
  Result<std::unique_ptr<Graph>> end_capture(Stream&) override;
  Status launch(Stream&, const Graph&) override;
  void record(Event&, Stream&) override {}
  void wait(Stream&, Event&) override {}
  Status synchronize(Stream&) override { return {}; }
  Status synchronize(Event&) override { return {}; }

 protected:
  Result<RawDeviceMemory> device_alloc(size_t bytes) override;

 private:
  uint64_t stream_bytes_ = 0;
  uintptr_t next_ = uintptr_t{1} << 40;  // fake addresses, 256-byte aligned, never reused
};

}  // namespace ferry
