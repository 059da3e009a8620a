#include <algorithm>
#include <cstdint>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/read_reduce.cuh"

namespace ferry::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;  // 16-byte loads in flight per thread and iteration

__device__ uint64_t fold(uint4 v) {
  return (uint64_t{v.x} | uint64_t{v.y} << 32) ^ (uint64_t{v.z} | uint64_t{v.w} << 32);
}

__device__ uint64_t rotl(uint64_t v, unsigned bits) {
  return bits == 0 ? v : (v << bits) | (v >> (64 - bits));
}

// The fold of backend.h: byte r of the range (r counted from `p`) xor'ed in at bit 8·(r mod 8).
// The range is split into an unaligned head, n16 16-byte words from the first 16-byte aligned
// address, and a tail. Words of the body are folded as aligned 64-bit words and rotated by the
// head's length into place (a rotation distributes over xor); block 0 folds the head and the
// tail bytewise.
__global__ void read_reduce_kernel(const unsigned char* p, size_t head, size_t n16, size_t tail,
                                   unsigned long long* sum) {
  const uint4* words = reinterpret_cast<const uint4*>(p + head);
  const size_t stride = size_t{gridDim.x} * blockDim.x;
  uint64_t acc = 0;
  size_t i = size_t{blockIdx.x} * blockDim.x + threadIdx.x;
  for (; i + (kUnroll - 1) * stride < n16; i += kUnroll * stride) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = words[i + u * stride];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc ^= fold(v[u]);
  }
  for (; i < n16; i += stride) acc ^= fold(words[i]);
  acc = rotl(acc, static_cast<unsigned>(8 * (head % 8)));
  if (blockIdx.x == 0) {
    for (size_t j = threadIdx.x; j < head; j += blockDim.x) acc ^= uint64_t{p[j]} << (8 * (j % 8));
    const size_t t0 = head + n16 * 16;
    for (size_t j = threadIdx.x; j < tail; j += blockDim.x) {
      acc ^= uint64_t{p[t0 + j]} << (8 * ((t0 + j) % 8));
    }
  }
  for (int off = 16; off > 0; off /= 2) acc ^= __shfl_xor_sync(0xffffffffu, acc, off);
  if ((threadIdx.x & 31) == 0 && acc != 0) atomicXor(sum, static_cast<unsigned long long>(acc));
}

}  // namespace

Status launch_read_reduce(const void* src, size_t bytes, void* sum, int sms, cudaStream_t stream) {
  if (bytes == 0) return Status();
  const auto* p = static_cast<const unsigned char*>(src);
  const size_t misalign = reinterpret_cast<uintptr_t>(p) % 16;
  const size_t head = misalign == 0 ? 0 : std::min(bytes, 16 - misalign);
  const size_t n16 = (bytes - head) / 16;
  const size_t tail = bytes - head - n16 * 16;
  const size_t want = (n16 + kThreads * kUnroll - 1) / (kThreads * kUnroll);
  const size_t most = static_cast<size_t>(sms > 0 ? sms : 1) * 8;
  const unsigned blocks = static_cast<unsigned>(std::max<size_t>(1, std::min(want, most)));
  read_reduce_kernel<<<blocks, kThreads, 0, stream>>>(p, head, n16, tail,
                                                      static_cast<unsigned long long*>(sum));
  return launch_status("read_reduce");
}

}  // namespace ferry::cuda
