#include "backend/cuda/cuda_resources.h"

#include <string>

#include "backend/cuda/cuda_check.h"

namespace ferry::cuda {

Error cuda_error(cudaError_t err, const char* stmt, const char* file, int line) {
  std::string where = file;
  const size_t slash = where.find_last_of('/');
  if (slash != std::string::npos) where = where.substr(slash + 1);
  const ErrorCode code =
      err == cudaErrorMemoryAllocation ? ErrorCode::out_of_memory : ErrorCode::backend;
  return make_error(code, std::string(stmt) + " failed: " + cudaGetErrorName(err) + ": " +
                              cudaGetErrorString(err) + " (" + where + ":" + std::to_string(line) +
                              ")");
}

Error cublas_error(cublasStatus_t st, const char* stmt, const char* file, int line) {
  std::string where = file;
  const size_t slash = where.find_last_of('/');
  if (slash != std::string::npos) where = where.substr(slash + 1);
  const ErrorCode code =
      st == CUBLAS_STATUS_ALLOC_FAILED ? ErrorCode::out_of_memory : ErrorCode::backend;
  return make_error(code, std::string(stmt) + " failed: " + cublasLtGetStatusName(st) + ": " +
                              cublasLtGetStatusString(st) + " (" + where + ":" +
                              std::to_string(line) + ")");
}

Status cuda_status(cudaError_t err, const char* stmt, const char* file, int line) {
  if (err == cudaSuccess) return Status();
  return cuda_error(err, stmt, file, line);
}

Status launch_status(const char* what) {
  const cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) return Status();
  return cuda_error(err, what, "kernel launch", 0);
}

Result<UniqueStream> make_stream() {
  cudaStream_t s = nullptr;
  FERRY_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return UniqueStream(s);
}

Result<UniqueEvent> make_event(bool timing) {
  cudaEvent_t e = nullptr;
  FERRY_CUDA_CHECK(
      cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
  return UniqueEvent(e);
}

Result<UniqueLtHandle> make_lt_handle() {
  cublasLtHandle_t h = nullptr;
  FERRY_CUBLAS_CHECK(cublasLtCreate(&h));
  return UniqueLtHandle(h);
}

Result<DeviceMemory> DeviceMemory::allocate(size_t bytes) {
  DeviceMemory m;
  if (bytes == 0) return m;
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, bytes);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // an allocation failure is not sticky; clear it
    return make_error(
        err == cudaErrorMemoryAllocation ? ErrorCode::out_of_memory : ErrorCode::backend,
        "cudaMalloc(" + std::to_string(bytes) + " bytes) failed: " + cudaGetErrorString(err));
  }
  m.p_ = p;
  m.bytes_ = bytes;
  return m;
}

void DeviceMemory::reset() {
  if (p_ != nullptr) (void)cudaFree(p_);
  p_ = nullptr;
  bytes_ = 0;
}

Result<StreamScratch> StreamScratch::allocate(size_t bytes, cudaStream_t stream) {
  StreamScratch s;
  s.stream_ = stream;
  if (bytes == 0) return s;
  void* p = nullptr;
  const cudaError_t err = cudaMallocAsync(&p, bytes, stream);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return make_error(
        err == cudaErrorMemoryAllocation ? ErrorCode::out_of_memory : ErrorCode::backend,
        "cudaMallocAsync(" + std::to_string(bytes) + " bytes) failed: " + cudaGetErrorString(err));
  }
  s.p_ = p;
  return s;
}

Result<StreamScratch> StreamScratch::from_stack(ScratchStack& stack, size_t bytes) {
  StreamScratch s;
  if (bytes == 0) return s;
  FERRY_ASSIGN_OR_RETURN(s.offset_, stack.push(bytes));
  s.stack_ = &stack;
  s.p_ = stack.at(s.offset_);
  return s;
}

void StreamScratch::reset() {
  if (p_ != nullptr) {
    if (stack_ != nullptr) {
      stack_->pop(offset_);
    } else {
      (void)cudaFreeAsync(p_, stream_);
    }
  }
  p_ = nullptr;
  stack_ = nullptr;
}

Result<size_t> ScratchStack::push(size_t bytes) {
  constexpr size_t kAlign = 256;
  const size_t need = (bytes + kAlign - 1) / kAlign * kAlign;
  if (need > capacity_ - top_) {
    return make_error(ErrorCode::internal,
                      "cuda: an op needs " + std::to_string(need) + " bytes of scratch with " +
                          std::to_string(top_) + " in use; the stream has " +
                          std::to_string(capacity_) + " (the scratch reserve is too small)");
  }
  const size_t offset = top_;
  top_ += need;
  if (top_ > high_water_) high_water_ = top_;
  return offset;
}

void ScratchStack::pop(size_t offset) {
  FERRY_CHECK(offset < top_, "scratch blocks must be released in reverse order");
  top_ = offset;
}

}  // namespace ferry::cuda
