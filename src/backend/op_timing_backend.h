// A Backend decorator that times every op alone: the op timing of `ferry bench --op-profile`.
// (Not plan/profile.h's Profile, the C_DMA/C_EXE per group that `ferry profile` measures.)
//
// OpTimingBackend wraps any backend and forwards every call to it. An op (run), a copy or a fill
// is enqueued on the wrapped backend, the stream is synchronized, and the host wall time of
// enqueue + synchronize is added to a bucket keyed by (phase, kind, shape). This is
// measurement by synchronization: ops run one at a time, nothing overlaps, and each time
// includes one launch and one synchronization (~10 us on CUDA), so the sum over a phase is more
// than what the pipelined run takes. It times ops one by one, ungraphed: a graph would replay
// many ops as one launch and leave nothing to attribute.
//
// The phase is a label set by whoever drives execution (set_phase; OpTimingProvider in
// measure/op_timing_provider.h sets it from each Call). Ops before the first label are "other".
// Buffers, streams and events are the wrapped backend's own objects, passed through unchanged.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "backend/backend.h"
#include "backend/ops.h"
#include "core/status.h"

namespace ferry {

// The kind and shape of one op, as the op timing groups it.
//   linear     "11520x1152 -> 3456 +bias gelu_tanh" (M x K -> N; f32 in/out marked)
//   attention  "S=720 h=16/16 d=72" (+ "causal", "segs=N"); the key rows L are kept apart
//              (keys), since they grow with every decode step and would split the bucket
//   others     the main operand's rows x cols ("1x4096"), plus what changes the kernel
struct OpSignature {
  std::string kind;   // op_name(op)
  std::string shape;  // without the key rows
  int64_t keys = -1;  // attention: key rows over all spans; -1 for other ops
};
OpSignature op_signature(const Op& op);

// Totals for one (phase, kind, shape).
struct OpBucket {
  std::string phase;  // the label set_phase gave, "other" before any
  std::string kind;   // op_name, or copy_to_device / copy_to_host / copy_on_device / fill_zero
  std::string shape;  // OpSignature::shape, or "<bytes> B" for copies and fills
  int64_t count = 0;
  double seconds = 0.0;                  // sum of enqueue + synchronize wall times
  uint64_t bytes = 0;                    // copies and fills: bytes moved, summed over the count
  int64_t min_keys = -1, max_keys = -1;  // attention: the range of key rows seen

  // "linear 11520x1152 -> 3456", "attention S=1 h=32/8 d=128 causal L=3008..3028".
  std::string label() const;
};

class OpTimingBackend final : public Backend {
 public:
  explicit OpTimingBackend(Backend& inner) : inner_(inner) {}

  // Labels every op that follows until the next call.
  void set_phase(std::string_view phase);
  std::string phase() const;
  // The buckets in order of first appearance.
  std::vector<OpBucket> buckets() const;
  void clear();

  std::string_view name() const override { return inner_.name(); }
  DeviceInfo info() const override { return inner_.info(); }
  Result<DeviceBuffer> allocate(size_t bytes, std::string_view purpose = "other") override {
    return inner_.allocate(bytes, purpose);
  }
  Status reserve(uint64_t bytes) override { return inner_.reserve(bytes); }
  MemoryLedger ledger() const override { return inner_.ledger(); }
  std::optional<uint64_t> driver_device_bytes() const override {
    return inner_.driver_device_bytes();
  }
  std::string driver_device_bytes_method() const override {
    return inner_.driver_device_bytes_method();
  }
  uint64_t compute_stream_bytes() const override { return inner_.compute_stream_bytes(); }
  HostRegistrationResult register_host(const void* data, size_t bytes) override {
    return inner_.register_host(data, bytes);
  }
  std::unique_ptr<Stream> create_copy_stream() override { return inner_.create_copy_stream(); }
  Result<HostBuffer> allocate_host(size_t bytes) override { return inner_.allocate_host(bytes); }
  std::unique_ptr<Stream> create_stream() override { return inner_.create_stream(); }
  std::unique_ptr<Event> create_event() override { return inner_.create_event(); }
  std::unique_ptr<Event> create_timing_event() override { return inner_.create_timing_event(); }
  Result<double> elapsed_seconds(Event& start, Event& end) override {
    return inner_.elapsed_seconds(start, end);
  }
  std::optional<uint64_t> device_free_bytes() const override { return inner_.device_free_bytes(); }

  void copy_to_device(Stream& stream, void* dst, const void* host_src, size_t bytes) override;
  void copy_to_host(Stream& stream, void* host_dst, const void* src, size_t bytes) override;
  void copy_from_mapping(Stream& stream, void* dst, const void* src, size_t bytes,
                         const MappedFile& file) override {
    inner_.copy_from_mapping(stream, dst, src, bytes, file);
  }
  void copy_on_device(Stream& stream, void* dst, const void* src, size_t bytes) override;
  void fill_zero(Stream& stream, void* dst, size_t bytes) override;
  void fill_byte(Stream& stream, void* dst, uint8_t value, size_t bytes) override {
    inner_.fill_byte(stream, dst, value, bytes);
  }
  // Enqueues the op on the wrapped backend, synchronizes `stream` and records the time. An op
  // the wrapped backend rejects is returned as its error and not recorded.
  Status run(Stream& stream, const Op& op) override;
  // Forwarded untimed: a decode is the executor's work between ops, not an op of a model.
  Status decode_group(Stream& stream, const compress::GroupLayout& layout, const void* compressed,
                      void* out, size_t out_capacity, std::string_view name) override {
    return inner_.decode_group(stream, layout, compressed, out, out_capacity, name);
  }

  // Each op is timed alone, so there is nothing to record: graphs are refused (run ungraphed).
  Status begin_capture(Stream& /*stream*/) override {
    return make_error(ErrorCode::unsupported, "op timing times ops one by one: run without graphs");
  }
  Result<std::unique_ptr<Graph>> end_capture(Stream& /*stream*/) override {
    return make_error(ErrorCode::unsupported, "op timing times ops one by one: run without graphs");
  }
  Status launch(Stream& /*stream*/, const Graph& /*graph*/) override {
    return make_error(ErrorCode::unsupported, "op timing times ops one by one: run without graphs");
  }

  void record(Event& event, Stream& stream) override { inner_.record(event, stream); }
  void wait(Stream& stream, Event& event) override { inner_.wait(stream, event); }
  // Also reports the first error a synchronization after a copy or fill met (those calls return
  // nothing), so that it is not lost.
  Status synchronize(Stream& stream) override;
  Status synchronize(Event& event) override { return inner_.synchronize(event); }

 protected:
  // Never reached: every buffer comes from inner_.allocate and is freed by the wrapped backend.
  // Should one arrive anyway, it goes back to the wrapped backend through DeviceBuffer.
  void free(void* data, size_t bytes) override { DeviceBuffer(&inner_, data, bytes).reset(); }
  Result<RawDeviceMemory> device_alloc(size_t /*bytes*/) override {
    return make_error(ErrorCode::internal, "op timing backend: memory comes from the wrapped one");
  }

 private:
  using Key = std::tuple<std::string, std::string, std::string>;  // phase, kind, shape
  // Synchronizes `stream` after a copy or fill and records its time; keeps the first error.
  template <class Enqueue>
  void time_transfer(Stream& stream, std::string_view kind, size_t bytes, Enqueue&& enqueue);
  void add(std::string_view kind, std::string shape, double seconds, uint64_t bytes, int64_t keys);

  Backend& inner_;
  mutable std::mutex mu_;
  std::string phase_ = "other";
  std::vector<OpBucket> buckets_;
  std::map<Key, size_t> index_;  // into buckets_
  Status deferred_;              // the first failed synchronization after a copy or fill
};

}  // namespace ferry
