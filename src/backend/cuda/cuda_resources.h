// RAII owners of CUDA resources: stream, event, device memory, cuBLASLt handle. Move-only; each
// releases its resource exactly once. Creation returns Result so that a failing driver call is an
// error value, never an abort. CUDA-only header.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "core/status.h"

namespace ferry::cuda {

// Holds one handle; `Traits::destroy` releases it. Move-only.
template <class Traits>
class UniqueHandle {
 public:
  using handle_type = typename Traits::handle_type;
  UniqueHandle() = default;
  explicit UniqueHandle(handle_type h) : h_(h) {}
  UniqueHandle(UniqueHandle&& o) noexcept : h_(std::exchange(o.h_, handle_type{})) {}
  UniqueHandle& operator=(UniqueHandle&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, handle_type{});
    }
    return *this;
  }
  UniqueHandle(const UniqueHandle&) = delete;
  UniqueHandle& operator=(const UniqueHandle&) = delete;
  ~UniqueHandle() { reset(); }

  handle_type get() const { return h_; }
  explicit operator bool() const { return h_ != handle_type{}; }
  void reset() {
    if (h_ != handle_type{}) Traits::destroy(h_);
    h_ = handle_type{};
  }

 private:
  handle_type h_{};
};

struct StreamTraits {
  using handle_type = cudaStream_t;
  static void destroy(cudaStream_t s) { (void)cudaStreamDestroy(s); }
};
struct EventTraits {
  using handle_type = cudaEvent_t;
  static void destroy(cudaEvent_t e) { (void)cudaEventDestroy(e); }
};
struct LtTraits {
  using handle_type = cublasLtHandle_t;
  static void destroy(cublasLtHandle_t h) { (void)cublasLtDestroy(h); }
};
struct GraphTraits {
  using handle_type = cudaGraph_t;
  static void destroy(cudaGraph_t g) { (void)cudaGraphDestroy(g); }
};
struct GraphExecTraits {
  using handle_type = cudaGraphExec_t;
  static void destroy(cudaGraphExec_t g) { (void)cudaGraphExecDestroy(g); }
};

using UniqueStream = UniqueHandle<StreamTraits>;
using UniqueEvent = UniqueHandle<EventTraits>;
using UniqueLtHandle = UniqueHandle<LtTraits>;
using UniqueGraph = UniqueHandle<GraphTraits>;
using UniqueGraphExec = UniqueHandle<GraphExecTraits>;

// A non-blocking stream (does not synchronize with the legacy default stream).
Result<UniqueStream> make_stream();
// An event; timing off by default (cheaper record/wait).
Result<UniqueEvent> make_event(bool timing = false);
Result<UniqueLtHandle> make_lt_handle();

// cudaMalloc'd device memory (256-byte aligned), freed with cudaFree.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  static Result<DeviceMemory> allocate(size_t bytes);
  DeviceMemory(DeviceMemory&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceMemory& operator=(DeviceMemory&& o) noexcept {
    if (this != &o) {
      reset();
      p_ = std::exchange(o.p_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  ~DeviceMemory() { reset(); }

  void* get() const { return p_; }
  size_t bytes() const { return bytes_; }
  void reset();

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

// Op scratch of one compute stream: a stack over a buffer the stream owns (carved from the
// backend's device budget). Ops on one stream run in order, so a block released once its op is
// enqueued can serve the next op, and a recorded graph keeps pointing at the same bytes.
class ScratchStack {
 public:
  ScratchStack() = default;
  ScratchStack(void* base, size_t bytes) : base_(static_cast<char*>(base)), capacity_(bytes) {}

  // The offset of a block of `bytes` on top, or an error naming both sizes when it does not fit.
  Result<size_t> push(size_t bytes);
  // Releases the top block (blocks are released in the reverse order of push).
  void pop(size_t offset);
  void* at(size_t offset) const { return base_ + offset; }
  size_t capacity() const { return capacity_; }
  size_t high_water() const { return high_water_; }

 private:
  char* base_ = nullptr;
  size_t capacity_ = 0;
  size_t top_ = 0;
  size_t high_water_ = 0;
};

// Scratch for one op: a block of the stream's ScratchStack when the op runs through the backend,
// else (tests and benches that launch kernels on a bare stream) stream-ordered memory from the
// device's default pool, freed in stream order. Released when it goes out of scope.
class StreamScratch {
 public:
  StreamScratch() = default;
  static Result<StreamScratch> allocate(size_t bytes, cudaStream_t stream);
  static Result<StreamScratch> from_stack(ScratchStack& stack, size_t bytes);
  StreamScratch(StreamScratch&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)),
        stream_(o.stream_),
        stack_(std::exchange(o.stack_, nullptr)),
        offset_(o.offset_) {}
  StreamScratch& operator=(StreamScratch&& o) noexcept {
    if (this != &o) {
      reset();
      p_ = std::exchange(o.p_, nullptr);
      stream_ = o.stream_;
      stack_ = std::exchange(o.stack_, nullptr);
      offset_ = o.offset_;
    }
    return *this;
  }
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;
  ~StreamScratch() { reset(); }

  void* get() const { return p_; }
  void reset();

 private:
  void* p_ = nullptr;
  cudaStream_t stream_ = nullptr;
  ScratchStack* stack_ = nullptr;
  size_t offset_ = 0;
};

}  // namespace ferry::cuda
