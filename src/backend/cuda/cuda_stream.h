// The CUDA backend's Stream and Event, and access to their CUDA handles for CUDA-only code
// (graph capture in the executor, tests). CUDA-only header: backend.h users never see it.
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_resources.h"
#include "backend/cuda/exponent_decode_fault.h"

namespace ferry::cuda {

class CudaStream final : public Stream {
 public:
  // workspace: cuBLASLt's; scratch: the ops' (both empty on a copy stream).
  CudaStream(UniqueStream stream, DeviceBuffer workspace, DeviceBuffer scratch, Status init_error)
      : stream_(std::move(stream)),
        workspace_(std::move(workspace)),
        scratch_buffer_(std::move(scratch)),
        scratch_(scratch_buffer_.data(), scratch_buffer_.bytes()),
        error_(std::move(init_error)) {}

  cudaStream_t handle() const { return stream_.get(); }
  void* workspace() const { return workspace_.data(); }
  size_t workspace_bytes() const { return workspace_.bytes(); }
  ScratchStack& scratch() { return scratch_; }

  // Keeps the first error seen on this stream (from enqueue calls that return void); synchronize
  // reports it and clears it.
  void note(Status s) {
    if (!s.ok() && error_.ok()) error_ = std::move(s);
  }
  Status take_error() {
    Status s = std::move(error_);
    error_ = Status();
    return s;
  }
  const Status& error() const { return error_; }

  // Between Backend::begin_capture and end_capture.
  bool capturing() const { return capturing_; }
  void set_capturing(bool on) { capturing_ = on; }

  // Group decodes enqueued since the last synchronize: decode i writes its error word at
  // word(i) (device memory, in chunks of kDecodeWordsPerChunk allocated as the count grows and
  // kept for later decodes) and names group decode_groups()[i]; synchronize reads them back.
  static constexpr size_t kDecodeWordsPerChunk = 512;
  std::vector<DeviceBuffer>& decode_word_chunks() { return decode_words_; }
  std::vector<std::string>& decode_groups() { return decode_groups_; }

 private:
  UniqueStream stream_;
  DeviceBuffer workspace_;
  DeviceBuffer scratch_buffer_;
  ScratchStack scratch_;
  Status error_;
  bool capturing_ = false;
  std::vector<DeviceBuffer> decode_words_;
  std::vector<std::string> decode_groups_;
};

class CudaEvent final : public Event {
 public:
  CudaEvent(UniqueEvent event, Status init_error, bool timing = false)
      : event_(std::move(event)), error_(std::move(init_error)), timing_(timing) {}
  cudaEvent_t handle() const { return event_.get(); }
  const Status& error() const { return error_; }
  bool timing() const { return timing_; }  // created with timing on (elapsed time works)

 private:
  UniqueEvent event_;
  Status error_;
  bool timing_ = false;
};

// The cudaStream_t behind a Stream created by the CUDA backend (nullptr for any other stream).
cudaStream_t stream_handle(Stream& stream);

}  // namespace ferry::cuda
