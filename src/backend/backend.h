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
#include <vector>

#include "backend/ops.h"
#include "compress/group_codec.h"
#include "core/status.h"

namespace ferry {

class Backend;
class MappedFile;  // format/mapped_file.h

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
  // CUDA: the per-thread stack the context reserves local memory for, as it stands now (the
  // driver grows it when a kernel needs more; see create_cuda_backend). 0 where it means nothing.
  size_t thread_stack_bytes = 0;
};

// Where a backend's device bytes are: live bytes by purpose, the high-water mark, and the one
// region they are carved from when the backend has a reservation.
struct MemoryLedger {
  uint64_t reserved = 0;      // bytes of the region (0: no reservation; each buffer taken alone)
  uint64_t in_use = 0;        // live bytes (rounded to the 256-byte unit)
  uint64_t peak = 0;          // the most in use at once since the backend was made
  uint64_t largest_free = 0;  // with a reservation
  std::vector<std::pair<std::string, uint64_t>> by_purpose;  // live bytes, by label, sorted
};

// Host memory made fast for device copies in place (a read-only checkpoint mapping); the
// registration ends when this is destroyed.
class HostRegistration {
 public:
  virtual ~HostRegistration() = default;
};

// What decides how weight bytes should reach this device (`ferry probe`): the topology and what
// the platform allows. A field the backend cannot know, or that does not apply, stays empty;
// `notes` say why.
struct PlatformFacts {
  std::string device;
  std::optional<bool> integrated;                      // shares memory with the host
  std::optional<bool> pageable_memory_access;          // kernels read plain host memory
  std::optional<bool> pageable_uses_host_page_tables;  // ... through the host's page tables
  std::optional<bool> host_pointer_for_registered;     // registered memory at its host address
  std::optional<bool> host_register_supported;
  std::optional<bool> host_register_read_only_supported;
  std::optional<int> copy_engines;                         // asynchronous copy engines
  std::optional<int> pcie_generation, pcie_width;          // the link as trained now
  std::optional<int> pcie_max_generation, pcie_max_width;  // what it can train to
  std::string pcie_source;                                 // "nvml", "sysfs", ...
  std::vector<std::string> notes;
};

// One registration of host memory tried for real (and undone): what `ferry probe` reports.
struct RegistrationTrial {
  std::string memory;  // "file mapping (read-only, shared)", "anonymous memory"
  std::string flags;   // "default", "read-only"
  bool ok = false;
  std::string how;  // the platform's answer
};

// What a stream is for. Compute streams carry ops (and own their cuBLASLt workspace and op
// scratch); copy streams only move bytes and take no device memory.
enum class StreamRole : uint8_t { compute, copy };

class Backend {
 public:
  Backend();
  virtual ~Backend();
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  virtual std::string_view name() const = 0;  // "cpu", "cuda"
  virtual DeviceInfo info() const = 0;
  // What making this backend took, step by step (CUDA: "driver", "nvml", "context",
  // "properties", "memory pool", "cublaslt"), in seconds; empty where nothing is worth telling.
  virtual std::vector<std::pair<std::string, double>> creation_seconds() const { return {}; }

  // Device memory, 256-byte aligned, labelled with what it is for ("kv cache"; the ledger sums
  // by label). Under a reservation it is carved from the reserved region. Fails with
  // out_of_memory, never aborts. Decorators forward it (and reserve, ledger) to what they wrap.
  virtual Result<DeviceBuffer> allocate(size_t bytes, std::string_view purpose = "other");

  // Takes one region of `bytes` of device memory now; from then on every device byte the backend
  // hands out (allocate, stream workspaces, op scratch) is carved from it, so the region is a
  // hard budget. Fails when memory is already allocated or a region is already reserved.
  virtual Status reserve(uint64_t bytes);
  // Gives the region back (a session that failed to open). Fails while anything carved from it
  // is still held; nothing to do without one.
  Status release_reservation();
  virtual MemoryLedger ledger() const;
  // Device memory this process holds as the driver counts it (context, loaded code, every
  // allocation): the view from outside ferry's own books that a budget is checked against.
  // nullopt when the backend cannot tell (the CPU backend, whose device memory is the heap).
  virtual std::optional<uint64_t> driver_device_bytes() const { return std::nullopt; }
  virtual std::string driver_device_bytes_method() const { return "none"; }
  // Device memory this process could still take now (CUDA: cudaMemGetInfo's free bytes; the CPU:
  // the memory the kernel says is available). What `--vram auto` starts from; nullopt when the
  // backend cannot tell.
  virtual std::optional<uint64_t> device_free_bytes() const { return std::nullopt; }
  // Device bytes each compute stream takes from allocate() when created (workspaces, scratch).
  virtual uint64_t compute_stream_bytes() const { return 0; }

  // Makes `bytes` of host memory at `data` (a read-only file mapping) copyable at full link
  // speed without a second copy, where the platform allows it. `registered` false means copies
  // from it run at the platform's pageable speed; `how` says what happened. Default: nothing to
  // do (host memory is device memory).
  struct HostRegistrationResult {
    std::unique_ptr<HostRegistration> handle;  // unregisters when destroyed (may be null)
    bool registered = false;
    bool readable_in_place = false;  // kernels may read the range at its host addresses
    std::string how;  // "registered read-only", "not needed (cpu)", or why it was refused
  };
  virtual HostRegistrationResult register_host(const void* data, size_t bytes);
  // Whether kernels may read ordinary host memory (pageable, unregistered: a file mapping as it
  // is) at its host address. Default true (host memory is the device's memory); on CUDA, the
  // device's pageable memory access (HMM, a coherent link), which discrete PCIe GPUs lack.
  virtual bool reads_pageable_host_memory() const { return true; }

  // The facts above. Default: a backend whose device memory is host memory.
  virtual PlatformFacts platform_facts() const;
  // Registers [data, data + bytes) (a read-only file mapping) with each flag set the platform
  // has, unregistering at once, and the same for anonymous memory: which registrations work
  // here. Default: none to try.
  virtual std::vector<RegistrationTrial> try_host_registration(const void* data, size_t bytes);
  // Enqueues a kernel that reads every byte of [src, src + bytes) (device memory, or host memory
  // the device reads in place) and xors into the 8 bytes of device memory at `sum` the fold of
  // the range: the xor of its little-endian 64-bit words counted from `src`, the last one
  // zero-padded (the same value on every backend, whatever the alignment). For probes: the rate
  // at which kernels read memory where it lies. Default: unsupported.
  virtual Status read_reduce(Stream& stream, const void* src, size_t bytes, void* sum);

  // Host memory for fast copies (HostBuffer), 256-byte aligned. The default is ordinary memory.
  virtual Result<HostBuffer> allocate_host(size_t bytes);

  virtual std::unique_ptr<Stream> create_stream() = 0;
  // A stream for copies only (no workspace or scratch). Default: an ordinary stream.
  virtual std::unique_ptr<Stream> create_copy_stream() { return create_stream(); }
  virtual std::unique_ptr<Event> create_event() = 0;
  // An event that also notes when its recorded point completes, for elapsed_seconds (CUDA: an
  // event with timing on, which costs a timestamp per record; the CPU: a steady_clock reading
  // taken on the stream's thread). It orders work like any event. Default: a plain event, which
  // elapsed_seconds then refuses.
  virtual std::unique_ptr<Event> create_timing_event() { return create_event(); }
  // Seconds from the completion of `start`'s last record to that of `end`'s (negative when `end`
  // completed first). Both must be timing events of this backend whose last record has completed
  // (synchronize on them first); otherwise an error, never a guess.
  virtual Result<double> elapsed_seconds(Event& start, Event& end);

  // Asynchronous copies, ordered in `stream`. Host memory must stay valid and unchanged until
  // the copy has completed (an event recorded after it fired, or the stream synchronized).
  virtual void copy_to_device(Stream& stream, void* dst, const void* host_src, size_t bytes) = 0;
  virtual void copy_to_host(Stream& stream, void* host_dst, const void* src, size_t bytes) = 0;
  // copy_to_device from a read-only file mapping. Where the backend's own threads read the
  // mapping (the CPU backend), a file that shrinks under the copy is an error on the stream that
  // names the file, not a signal. Elsewhere the same as copy_to_device: a DMA engine reading
  // registered pages takes no fault, and MappedFile::check_unchanged() is the check there.
  virtual void copy_from_mapping(Stream& stream, void* dst, const void* src, size_t bytes,
                                 const MappedFile& file) {
    (void)file;
    copy_to_device(stream, dst, src, bytes);
  }
  virtual void copy_on_device(Stream& stream, void* dst, const void* src, size_t bytes) = 0;
  virtual void fill_zero(Stream& stream, void* dst, size_t bytes) = 0;
  // Every byte set to `value` (0xff poisons bf16 and f32 data with NaN). Default: fill_zero for
  // 0, and a no-op otherwise for backends that cannot (none of ferry's).
  virtual void fill_byte(Stream& stream, void* dst, uint8_t value, size_t bytes) {
    if (value == 0) fill_zero(stream, dst, bytes);
  }

  // Validates the op (ops.h), then enqueues it. An invalid op is returned as an error and
  // nothing is enqueued.
  virtual Status run(Stream& stream, const Op& op) = 0;

  // Decodes one compressed weight group (compress/group_codec.h, docs/compression.md) into its
  // raw layout, enqueued on `stream`. `compressed` holds layout.compressed_size bytes that the
  // device reads (device memory, or host memory on a backend whose device memory is host memory:
  // the CPU), 16-byte aligned; `layout` is compress::read_group_layout of those same bytes;
  // `out` is device memory of at least `out_capacity` >= layout.decoded_size bytes. The layout
  // and both buffers must stay valid (the compressed bytes unchanged) until the decode has
  // completed. Bytes that do not decode (a damaged
  // payload, a checksum that fails) are an error on the stream, reported by its next
  // synchronize(stream) as a `format` error naming `name` (the group); `out` then holds garbage.
  // Refused (invalid_argument, nothing enqueued) for arguments that break these rules and on a
  // capturing stream: a recording would replay decodes whose errors nothing checks.
  // Default: unsupported.
  virtual Status decode_group(Stream& stream, const compress::GroupLayout& layout,
                              const void* compressed, void* out, size_t out_capacity,
                              std::string_view name);

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
  // Returns a buffer allocate() handed out (to the region, or to the device).
  virtual void free(void* data, size_t bytes);
  virtual void free_host(void* data, size_t bytes);

  // The device itself: `bytes` (256-byte aligned) and the plain function that returns them (so
  // the region can be returned after the derived backend is gone). Only allocate() and reserve()
  // call it; everything else goes through allocate().
  struct RawDeviceMemory {
    void* data = nullptr;
    void (*release)(void*) = nullptr;
  };
  virtual Result<RawDeviceMemory> device_alloc(size_t bytes) = 0;

 private:
  struct MemoryState;
  std::unique_ptr<MemoryState> memory_;
};

// The rules of Backend::decode_group's arguments that every backend checks alike (capacity,
// null pointers, alignment): invalid_argument naming the group, or ok.
Status check_decode_arguments(const compress::GroupLayout& layout, const void* compressed,
                              const void* out, size_t out_capacity, std::string_view name);

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
