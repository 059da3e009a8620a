// The error word of the CUDA group decoder (exponent_decode.cuh). CUDA-free, so that the host
// emulation of the kernel (tests/cuda/exponent_decode_emu) compiles the same definitions.
#pragma once

#include <cstdint>

namespace ferry::cuda {

// What the kernel found wrong, in the error word's high 32 bits (the low 32: the segment, or 0).
enum class DecodeFault : uint32_t {
  none = 0,
  header = 1,         // magic, version, mode, offsets or sizes of the header
  table = 2,          // the frequency table does not sum to 4096
  capacity = 3,       // decoded_size is larger than the output buffer
  segment_count = 4,  // the device bytes' segment count is not the host layout's
  entry = 5,          // an index entry: kind, reserved, count, in_length, alignment, bounds
  tiling = 6,         // a segment does not start where the previous one ends, or the last
                      // does not end at decoded_size
  stream = 7,         // a rANS stream read past its end, or left words unread
  state = 8,          // a rANS lane state started below 2^16 or did not end at 2^16
};

// The device error word: 0 when the decode was clean, else (fault << 32) | segment of the
// first fault the device recorded.
using DecodeErrorWord = unsigned long long;

}  // namespace ferry::cuda
