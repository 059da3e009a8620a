// Error tier 1 (core/status.h): FERRY_CUDA_CHECK and FERRY_CUBLAS_CHECK turn a failing CUDA or
// cuBLASLt call into an Error that names the statement, file and line, and return it from the
// enclosing function (which returns Status or Result<T>). CUDA-only header: never include it
// from code that CPU-only builds compile.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include "core/status.h"

namespace ferry::cuda {

// "backend: cudaMemcpyAsync(...) failed: invalid argument (cuda_backend.cpp:42)".
// cudaErrorMemoryAllocation maps to out_of_memory, everything else to backend.
Error cuda_error(cudaError_t err, const char* stmt, const char* file, int line);
Error cublas_error(cublasStatus_t st, const char* stmt, const char* file, int line);

// Status from a CUDA return code: ok on cudaSuccess, else cuda_error(...).
Status cuda_status(cudaError_t err, const char* stmt, const char* file, int line);

// The Status of the last kernel launch on this thread (cudaGetLastError), naming `what`.
Status launch_status(const char* what);

}  // namespace ferry::cuda

#define FERRY_CUDA_CHECK(stmt)                                                      \
  do {                                                                              \
    const cudaError_t ferry_cuda_err_ = (stmt);                                     \
    if (ferry_cuda_err_ != cudaSuccess) {                                           \
      return ::ferry::cuda::cuda_error(ferry_cuda_err_, #stmt, __FILE__, __LINE__); \
    }                                                                               \
  } while (0)

// The Status of one CUDA call, for code that records errors instead of returning them.
#define FERRY_CUDA_STATUS(stmt) ::ferry::cuda::cuda_status((stmt), #stmt, __FILE__, __LINE__)

#define FERRY_CUBLAS_CHECK(stmt)                                                       \
  do {                                                                                 \
    const cublasStatus_t ferry_cublas_st_ = (stmt);                                    \
    if (ferry_cublas_st_ != CUBLAS_STATUS_SUCCESS) {                                   \
      return ::ferry::cuda::cublas_error(ferry_cublas_st_, #stmt, __FILE__, __LINE__); \
    }                                                                                  \
  } while (0)
