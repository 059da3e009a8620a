// The CUDA decoder of compressed weight groups (compress/group_format.h, docs/compression.md):
// a group's compressed bytes, already on the device, decoded into its BF16 layout (a slot) on a
// stream, bit-identical to compress::decode_group.
//
// kernel   exponent_decode_kernel (exponent_decode.cu): persistent blocks of 8 warps; each block
//          validates the header and builds the 4096-entry decode table in shared memory once,
//          then each warp takes segments in turn (grid-stride), validates the segment's index
//          entry (kind, lengths, payload bounds, output bounds and adjacency to the previous
//          segment), stages a rANS segment's exponent stream into its 8 KiB of shared memory with
//          16-byte loads, and decodes it with one lane state per lane: per step a table lookup,
//          the rANS update and one ballot/popc to hand the renormalizing lanes their words in
//          lane order; every 8 steps each lane joins 8 exponents with 8 sign+mantissa bytes
//          (prefetched one chunk ahead) into one 16-byte store. Copy and split segments are
//          vectorized copies. Anything that does not validate sets the error word and writes
//          nothing out of its segment's checked range: never outside [out, out + decoded_size).
// launcher launch_exponent_decode: grid sizing (occupancy x SMs, at most one warp per segment).
// op       decode_group_async: a group whose layout the host read from the same bytes; stored
//          groups are one device-to-device copy.
//
// CUDA-only header (cuda_runtime.h).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/exponent_decode_fault.h"
#include "compress/group_codec.h"
#include "core/status.h"

namespace ferry::cuda {

// Enqueues the kernel on `stream`: decodes the coded group at `compressed` (device, 16-byte
// aligned, `compressed_size` bytes) into `out` (device, `out_capacity` bytes). `segment_count`
// is the host's reading of the same bytes (the grid is sized by it; the kernel checks it).
// `error` (device) must be zero before the launch. invalid_argument for a misaligned input.
Status launch_exponent_decode(const uint8_t* compressed, uint64_t compressed_size,
                              uint32_t segment_count, uint8_t* out, uint64_t out_capacity,
                              DecodeErrorWord* error, cudaStream_t stream);

// The op: zeroes `error`, then decodes (coded groups: the kernel; stored: a copy) on `stream`.
// `layout` is compress::read_group_layout of the bytes now at `compressed`. The result is known
// once the stream has run: read *error and pass it to decode_error_status.
Status decode_group_async(const compress::GroupLayout& layout, const uint8_t* compressed,
                          uint8_t* out, uint64_t out_capacity, DecodeErrorWord* error,
                          cudaStream_t stream);

// The error word as a Status: ok for 0, else a `format` error naming the fault and segment.
Status decode_error_status(DecodeErrorWord word);

}  // namespace ferry::cuda
