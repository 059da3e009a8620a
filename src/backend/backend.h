// The narrow interface between ferry and a device: allocate, copy asynchronously, run an op,
// record and wait on events, synchronize. Streams are in-order queues; work on different streams
// runs concurrently unless ordered by events. The CPU backend implements streams as worker
// threads, so stream-ordering bugs show up on machines without a GPU.
//
// No CUDA header may be included from here: CPU-only code sees only this file.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "backend/ops.h"
#include "core/status.h"

namespace ferry {

class Backend;

// An in-order queue of device work.
class Stream {
 public:
  virtual ~Stream() = default;
};

// A marker in a stream; waiting on it orders later work after everything before the record.
class Event {
 public:
  virtual ~Event() = default;
};

// Recorded work of one stream (a CUDA graph; a list of closures on the CPU backend), replayed by
// Backend::launch. Owned by the caller; must not outlive its backend.
class Graph {
 public:
  virtual ~Graph() = default;
};

// Memory a backend allocated, owned, move-only, released through that backend. `Kind` says how
// (Kind::release(backend, data, bytes), defined in backend.cpp where Backend is complete).
template <class Kind>
class BackendMemory {
 public:
  BackendMemory() = default;
  BackendMemory(Backend* owner, void* data, size_t bytes)
      : owner_(owner), data_(data), bytes_(bytes) {}
  BackendMemory(BackendMemory&& o) noexcept
      : owner_(std::exchange(o.owner_, nullptr)),
        data_(std::exchange(o.data_, nullptr)),
        bytes_(std::exchange(o.bytes_, 0)) {}
  BackendMemory& operator=(BackendMemory&& o) noexcept {
    if (this != &o) {
      reset();
      owner_ = std::exchange(o.owner_, nullptr);
      data_ = std::exchange(o.data_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  BackendMemory(const BackendMemory&) = delete;
  BackendMemory& operator=(const BackendMemory&) = delete;
  ~BackendMemory() { reset(); }

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  void reset() {
    if (owner_ != nullptr && data_ != nullptr) Kind::release(owner_, data_, bytes_);
    owner_ = nullptr;
    data_ = nullptr;
    bytes_ = 0;
  }

 private:
  Backend* owner_ = nullptr;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

struct DeviceMemoryKind {
  static void release(Backend* backend, void* data, size_t bytes);
};
struct HostMemoryKind {
  static void release(Backend* backend, void* data, size_t bytes);
};

// Device memory, freed through the backend that allocated it.
using DeviceBuffer = BackendMemory<DeviceMemoryKind>;
// Host memory the device copies from (or to) at full link speed: page-locked on CUDA, where a
// copy from ordinary pageable memory is staged through a driver buffer at a fraction of the
// speed. Inputs that are large (pixels) are written straight into one.
using HostBuffer = BackendMemory<HostMemoryKind>;

struct DeviceInfo {
  std::string name;        // "cpu (2 threads)", "NVIDIA H200"
  size_t total_bytes = 0;  // device memory the backend can see
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string_view name() const = 0;  // "cpu", "cuda"
  virtual DeviceInfo info() const = 0;

  // Device memory, 256-byte aligned. Fails with out_of_memory, never aborts.
  virtual Result<DeviceBuffer> allocate(size_t bytes) = 0;

  // Host memory for fast copies (HostBuffer), 256-byte aligned. The default is ordinary memory.
  virtual Result<HostBuffer> allocate_host(size_t bytes);

  virtual std::unique_ptr<Stream> create_stream() = 0;
  virtual std::unique_ptr<Event> create_event() = 0;

  // Asynchronous copies, ordered in `stream`. Host memory must stay valid and unchanged until
  // the copy has completed (an event recorded after it fired, or the stream synchronized).
  virtual void copy_to_device(Stream& stream, void* dst, const void* host_src, size_t bytes) = 0;
  virtual void copy_to_host(Stream& stream, void* host_dst, const void* src, size_t bytes) = 0;
  virtual void copy_on_device(Stream& stream, void* dst, const void* src, size_t bytes) = 0;
  virtual void fill_zero(Stream& stream, void* dst, size_t bytes) = 0;

  // Validates the op (ops.h), then enqueues it. An invalid op is returned as an error and
  // nothing is enqueued.
  virtual Status run(Stream& stream, const Op& op) = 0;

  // Recording. Between begin_capture(stream) and end_capture(stream), the ops, device-to-device
  // copies and fills enqueued on `stream` are recorded instead of run; launch() enqueues the
  // recording on a stream as one unit, as often as wanted. Every pointer, shape and parameter is
  // the one given at capture; device memory is read when a replay runs, so work whose only
  // changing inputs live in device memory replays correctly. Host copies, events and
  // synchronize() on a capturing stream are errors (end_capture reports the first).
  virtual Status begin_capture(Stream& stream) = 0;
  virtual Result<std::unique_ptr<Graph>> end_capture(Stream& stream) = 0;
  virtual Status launch(Stream& stream, const Graph& graph) = 0;

  virtual void record(Event& event, Stream& stream) = 0;
  // Later work on `stream` waits until `event`'s recorded point has completed.
  virtual void wait(Stream& stream, Event& event) = 0;
  // Blocks until everything enqueued on `stream` has completed; reports asynchronous errors.
  virtual Status synchronize(Stream& stream) = 0;
  // Blocks until the event has completed.
  virtual Status synchronize(Event& event) = 0;

 protected:
  friend struct DeviceMemoryKind;
  friend struct HostMemoryKind;
  virtual void free(void* data, size_t bytes) = 0;
  virtual void free_host(void* data, size_t bytes);
};

// Backends by kind. The CPU backend is always there; the CUDA one exists when the binary links
// ferry_cuda and calls register_backend (the CLI's main does, under FERRY_HAVE_CUDA), so that
// ferry_core never depends on CUDA.
enum class BackendKind { cpu, cuda };
std::string_view backend_kind_name(BackendKind kind);
std::optional<BackendKind> parse_backend_kind(std::string_view name);

struct BackendFactory {
  bool (*available)() = nullptr;  // e.g. a CUDA device is present
  Result<std::unique_ptr<Backend>> (*create)() = nullptr;
};
void register_backend(BackendKind kind, BackendFactory factory);
bool backend_available(BackendKind kind);
Result<std::unique_ptr<Backend>> create_backend(BackendKind kind);
// cuda when registered and available, otherwise cpu.
BackendKind default_backend_kind();

}  // namespace ferry
