// The CUDA decoder of compressed weight groups; the design is in exponent_decode.cuh and
// docs/compression.md. Same bits as compress::decode_group (group_codec.cpp), checked by
// tests/cuda/exponent_decode_test.cpp.
#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/exponent_decode.cuh"
#include "compress/group_format.h"

namespace ferry::cuda {
// --- kernel begin: tests/cuda/exponent_decode_emu runs from here to "kernel end" on the host ---
namespace {

using namespace ferry::compress;

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr uint32_t kStageBytes = kMaxCodedBytes;  // one rANS segment's exponent part, per warp
constexpr size_t kSmemBytes = size_t{kProbScale} * 4 + size_t{kWarps} * kStageBytes;
constexpr unsigned kFull = 0xffffffffu;
static_assert(kSymbols == kThreads, "one thread per symbol builds the table");
static_assert(kProbScale % kThreads == 0, "table slots split evenly over the threads");

__device__ __forceinline__ void report(DecodeErrorWord* err, DecodeFault f, uint32_t segment) {
  atomicCAS(err, 0ull, (static_cast<DecodeErrorWord>(f) << 32) | segment);
}

// Aligned little-endian loads (the device is little-endian; every caller's address is aligned).
__device__ __forceinline__ uint64_t ld64(const uint8_t* p) {
  return *reinterpret_cast<const uint64_t*>(p);
}
__device__ __forceinline__ uint32_t ld32(const uint8_t* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}
__device__ __forceinline__ uint32_t ld16(const uint8_t* p) {
  return *reinterpret_cast<const uint16_t*>(p);
}

struct Entry {
  uint64_t out_offset;
  uint64_t in_offset;
  uint32_t in_length;
  uint32_t count;
  uint32_t kind;
  uint32_t reserved;  // nonzero when any reserved byte is
};

__device__ __forceinline__ Entry load_entry(const uint8_t* index, uint32_t k) {
  const uint4* e = reinterpret_cast<const uint4*>(index + uint64_t{kEntryBytes} * k);
  const uint4 a = e[0];
  const uint4 b = e[1];
  Entry r;
  r.out_offset = a.x | static_cast<uint64_t>(a.y) << 32;
  r.in_offset = a.z | static_cast<uint64_t>(a.w) << 32;
  r.in_length = b.x;
  r.count = b.y;
  r.kind = b.z & 0xffffu;
  r.reserved = (b.z >> 16) | b.w;
  return r;
}

__device__ __forceinline__ uint64_t out_bytes(const Entry& e) {
  return e.kind == kKindCopy ? uint64_t{e.count} : uint64_t{e.count} * 2;
}

// The entry on its own: kind, reserved bytes, count and in_length for the kind, alignment, the
// payload bytes it reads and the output bytes it writes (overflow-safe).
__device__ bool entry_ok(const Entry& e, uint64_t payload_size, uint64_t decoded) {
  if (e.reserved != 0 || e.count == 0) return false;
  if (e.kind == kKindCopy) {
    if (e.count > kMaxCopyBytes || e.in_length != e.count) return false;
  } else if (e.kind == kKindSplit) {
    if (e.count > kMaxSegmentElements || e.in_length != e.count) return false;
  } else if (e.kind == kKindRans) {
    if (e.count > kMaxSegmentElements || e.in_length < kStateBytes ||
        (e.in_length - kStateBytes) % 2 != 0 || e.in_length > kMaxCodedBytes) {
      return false;
    }
  } else {
    return false;
  }
  if (e.in_offset % 16 != 0) return false;
  const uint64_t in_bytes =
      e.kind == kKindCopy ? uint64_t{e.in_length} : align16(e.in_length) + e.count;
  if (e.in_offset > payload_size || in_bytes > payload_size - e.in_offset) return false;
  if (e.out_offset > decoded || out_bytes(e) > decoded - e.out_offset) return false;
  return true;
}

__device__ __forceinline__ uint32_t byte_of(uint32_t w, int k) {
  return (w >> (8 * k)) & 0xffu;
}

// Joins 8 exponents (e_lo: elements 0-3, e_hi: 4-7) with 8 sign+mantissa bytes into 8 BF16 at
// dst: one 16-byte store when dst is aligned, else byte stores.
__device__ __forceinline__ void write8(uint8_t* dst, uint32_t e_lo, uint32_t e_hi, uint2 sm,
                                       bool aligned) {
  uint32_t w[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const uint32_t ew = k < 2 ? e_lo : e_hi;
    const uint32_t sw = k < 2 ? sm.x : sm.y;
    const int b = 2 * (k % 2);
    const uint32_t v0 =
        bf16_join(static_cast<uint8_t>(byte_of(ew, b)), static_cast<uint8_t>(byte_of(sw, b)));
    const uint32_t v1 = bf16_join(static_cast<uint8_t>(byte_of(ew, b + 1)),
                                  static_cast<uint8_t>(byte_of(sw, b + 1)));
    w[k] = v0 | (v1 << 16);
  }
  if (aligned) {
    *reinterpret_cast<uint4*>(dst) = make_uint4(w[0], w[1], w[2], w[3]);
  } else {
#pragma unroll
    for (int k = 0; k < 16; ++k) dst[k] = static_cast<uint8_t>(w[k / 4] >> (8 * (k % 4)));
  }
}

// One rANS step of every lane of the warp (inactive lanes take no word and keep their state).
// `pos` is warp-uniform: the words the step hands out, in lane order.
__device__ __forceinline__ uint32_t rans_warp_step(uint32_t& x, bool active, const uint32_t* lut,
                                                   const uint16_t* words, uint32_t& pos,
                                                   uint32_t last, unsigned lanes_below) {
  const uint32_t e = lut[x & (kProbScale - 1)];
  const uint32_t y = rans_step(x, e);
  const bool need = active && y < kStateLow;
  const unsigned m = __ballot_sync(kFull, need);
  if (need) {
    const uint32_t idx = pos + static_cast<uint32_t>(__popc(m & lanes_below));
    x = (y << 16) | words[idx < last ? idx : last];  // clamped: a lying stream shows as pos > nw
  } else if (active) {
    x = y;
  }
  pos += static_cast<uint32_t>(__popc(m));
  return e & 0xffu;
}

__device__ void decode_rans(const Entry& e, uint32_t k, const uint8_t* payload, uint8_t* out,
                            const uint32_t* lut, uint8_t* stage, DecodeErrorWord* err) {
  const unsigned lane = threadIdx.x % 32;
  const unsigned lanes_below = (1u << lane) - 1;
  // Stage the exponent part (16-byte loads; align16(in_length) bytes are inside the payload).
  const uint4* src = reinterpret_cast<const uint4*>(payload + e.in_offset);
  const uint32_t n16 = (e.in_length + 15) / 16;
  for (uint32_t i = lane; i < n16; i += 32) reinterpret_cast<uint4*>(stage)[i] = src[i];
  __syncwarp();
  uint32_t x = reinterpret_cast<const uint32_t*>(stage)[lane];
  if (__ballot_sync(kFull, x < kStateLow) != 0) {
    if (lane == 0) report(err, DecodeFault::state, k);
    return;
  }
  const uint16_t* words = reinterpret_cast<const uint16_t*>(stage + kStateBytes);
  const uint32_t nw = (e.in_length - kStateBytes) / 2;
  const uint32_t last = nw > 0 ? nw - 1 : 0;  // nw = 0 reads stage bytes 128-129: in the buffer
  uint32_t pos = 0;
  const uint8_t* sm = payload + e.in_offset + align16(e.in_length);  // 16-byte aligned
  uint8_t* o = out + e.out_offset;
  const bool aligned = reinterpret_cast<uintptr_t>(o) % 16 == 0;
  const uint32_t full = e.count / kChunk;
  uint2 cur = make_uint2(0, 0);
  if (full > 0) cur = *reinterpret_cast<const uint2*>(sm + lane * kPerLane);
  for (uint32_t c = 0; c < full; ++c) {
    uint2 next = make_uint2(0, 0);
    if (c + 1 < full)
      next = *reinterpret_cast<const uint2*>(sm + (c + 1) * kChunk + lane * kPerLane);
    uint32_t e_lo = 0, e_hi = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j)
      e_lo |= rans_warp_step(x, true, lut, words, pos, last, lanes_below) << (8 * j);
#pragma unroll
    for (int j = 0; j < 4; ++j)
      e_hi |= rans_warp_step(x, true, lut, words, pos, last, lanes_below) << (8 * j);
    write8(o + 2 * (c * kChunk + lane * kPerLane), e_lo, e_hi, cur, aligned);
    cur = next;
  }
  if (full * kChunk < e.count) {  // the last, partial chunk: element by element
    const uint32_t base = full * kChunk + lane * kPerLane;
    uint32_t sym[kPerLane];
#pragma unroll
    for (uint32_t j = 0; j < kPerLane; ++j) {
      sym[j] = rans_warp_step(x, base + j < e.count, lut, words, pos, last, lanes_below);
    }
#pragma unroll
    for (uint32_t j = 0; j < kPerLane; ++j) {
      if (base + j < e.count) {
        const uint16_t v = bf16_join(static_cast<uint8_t>(sym[j]), sm[base + j]);
        o[2 * (base + j)] = static_cast<uint8_t>(v);
        o[2 * (base + j) + 1] = static_cast<uint8_t>(v >> 8);
      }
    }
  }
  if (pos != nw) {
    if (lane == 0) report(err, DecodeFault::stream, k);
  } else if (__ballot_sync(kFull, x != kStateLow) != 0) {
    if (lane == 0) report(err, DecodeFault::state, k);
  }
}

__device__ void decode_split(const Entry& e, const uint8_t* payload, uint8_t* out) {
  const unsigned lane = threadIdx.x % 32;
  const uint8_t* exps = payload + e.in_offset;
  const uint8_t* sm = exps + align16(e.in_length);
  uint8_t* o = out + e.out_offset;
  const bool aligned = reinterpret_cast<uintptr_t>(o) % 16 == 0;
  const uint32_t full = e.count / kChunk;
  for (uint32_t c = 0; c < full; ++c) {
    const uint32_t at = c * kChunk + lane * kPerLane;
    const uint2 ex = *reinterpret_cast<const uint2*>(exps + at);
    const uint2 s = *reinterpret_cast<const uint2*>(sm + at);
    write8(o + 2 * at, ex.x, ex.y, s, aligned);
  }
  for (uint32_t i = full * kChunk + lane; i < e.count; i += 32) {
    const uint16_t v = bf16_join(exps[i], sm[i]);
    o[2 * i] = static_cast<uint8_t>(v);
    o[2 * i + 1] = static_cast<uint8_t>(v >> 8);
  }
}

__device__ void decode_copy(const Entry& e, const uint8_t* payload, uint8_t* out) {
  const unsigned lane = threadIdx.x % 32;
  const uint8_t* src = payload + e.in_offset;
  uint8_t* o = out + e.out_offset;
  uint32_t done = 0;
  if (reinterpret_cast<uintptr_t>(o) % 16 == 0) {
    const uint32_t n16 = e.count / 16;
    for (uint32_t i = lane; i < n16; i += 32) {
      reinterpret_cast<uint4*>(o)[i] = reinterpret_cast<const uint4*>(src)[i];
    }
    done = n16 * 16;
  }
  for (uint32_t i = done + lane; i < e.count; i += 32) o[i] = src[i];
}

struct Header {
  const uint8_t* index;
  const uint8_t* payload;
  uint64_t payload_size;
  uint64_t decoded;
  uint32_t count;
  uint32_t fault;  // DecodeFault
};

__device__ void read_header(const uint8_t* c, uint64_t size, uint32_t host_count,
                            uint64_t out_capacity, Header& h) {
  h.fault = static_cast<uint32_t>(DecodeFault::header);
  if (size < kHeaderBytes + kTableBytes) return;
  if (ld32(c + kHeaderMagic) != kMagicWord) return;
  if (ld16(c + kHeaderVersion) != kVersion || ld16(c + kHeaderMode) != kModeCoded) return;
  if (ld32(c + kHeaderProbBits) != kProbBits) return;
  if (ld64(c + kHeaderIndexOffset) != kHeaderBytes + kTableBytes) return;
  if (ld64(c + kHeaderReserved) != 0) return;
  const uint32_t count = ld32(c + kHeaderSegmentCount);
  if (count == 0 || count > (size - (kHeaderBytes + kTableBytes)) / kEntryBytes) return;
  const uint64_t payload = ld64(c + kHeaderPayloadOffset);
  if (payload != align16(kHeaderBytes + kTableBytes + uint64_t{kEntryBytes} * count)) return;
  if (payload > size || ld64(c + kHeaderPayloadSize) != size - payload) return;
  if (count != host_count) {
    h.fault = static_cast<uint32_t>(DecodeFault::segment_count);
    return;
  }
  h.decoded = ld64(c + kHeaderDecodedSize);
  if (h.decoded > out_capacity) {
    h.fault = static_cast<uint32_t>(DecodeFault::capacity);
    return;
  }
  h.index = c + kHeaderBytes + kTableBytes;
  h.payload = c + payload;
  h.payload_size = size - payload;
  h.count = count;
  h.fault = 0;
}

__global__ void __launch_bounds__(kThreads)
    exponent_decode_kernel(const uint8_t* __restrict__ c, uint64_t size, uint32_t host_count,
                           uint8_t* __restrict__ out, uint64_t out_capacity, DecodeErrorWord* err) {
  extern __shared__ __align__(16) uint8_t smem[];
  uint32_t* lut = reinterpret_cast<uint32_t*>(smem);
  __shared__ Header h;
  __shared__ uint32_t s_freq[kSymbols];
  __shared__ uint32_t s_cum[kSymbols];
  __shared__ uint32_t s_warp[kWarps];
  const unsigned t = threadIdx.x;
  const unsigned lane = t % 32;
  const unsigned warp = t / 32;

  if (t == 0) read_header(c, size, host_count, out_capacity, h);
  __syncthreads();
  if (h.fault != 0) {
    if (t == 0 && blockIdx.x == 0) report(err, static_cast<DecodeFault>(h.fault), 0);
    return;
  }

  // The table: frequencies, their exclusive prefix sums, the total.
  const uint32_t f = ld16(c + kHeaderBytes + 2 * t);
  uint32_t incl = f;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const uint32_t v = __shfl_up_sync(kFull, incl, d);
    if (lane >= static_cast<unsigned>(d)) incl += v;
  }
  if (lane == 31) s_warp[warp] = incl;
  for (uint32_t i = t; i < kProbScale; i += kThreads) lut[i] = 0;
  __syncthreads();
  uint32_t before = 0, total = 0;
  for (unsigned w = 0; w < kWarps; ++w) {
    before += w < warp ? s_warp[w] : 0;
    total += s_warp[w];
  }
  if (total != kProbScale) {  // every thread sees the same total: the block leaves together
    if (t == 0 && blockIdx.x == 0) report(err, DecodeFault::table, 0);
    return;
  }
  const uint32_t cum = before + incl - f;
  s_freq[t] = f;
  s_cum[t] = cum;
  if (f > 0) lut[cum] = t + 1;  // a mark where each present symbol's slots begin
  __syncthreads();
  // Slot -> symbol: the last mark at or before the slot (a max-scan; marks grow with slots).
  constexpr uint32_t kSlots = kProbScale / kThreads;
  uint32_t mark[kSlots];
  uint32_t run = 0;
#pragma unroll
  for (uint32_t k = 0; k < kSlots; ++k) {
    run = max(run, lut[t * kSlots + k]);
    mark[k] = run;
  }
  uint32_t scan = run;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const uint32_t v = __shfl_up_sync(kFull, scan, d);
    if (lane >= static_cast<unsigned>(d)) scan = max(scan, v);
  }
  uint32_t carry = __shfl_up_sync(kFull, scan, 1);
  if (lane == 0) carry = 0;
  __syncthreads();  // every mark read before the table is written
  if (lane == 31) s_warp[warp] = scan;
  __syncthreads();
  for (unsigned w = 0; w < warp; ++w) carry = max(carry, s_warp[w]);
#pragma unroll
  for (uint32_t k = 0; k < kSlots; ++k) {
    const uint32_t slot = t * kSlots + k;
    const uint32_t sym = max(carry, mark[k]) - 1;  // slot 0 always holds a mark: sum == 4096
    lut[slot] = table_entry(sym, s_freq[sym], slot - s_cum[sym]);
  }
  __syncthreads();

  // Segments, one warp each, in turn.
  uint8_t* stage = smem + size_t{kProbScale} * 4 + size_t{warp} * kStageBytes;
  const uint32_t warps = gridDim.x * kWarps;
  for (uint32_t k = blockIdx.x * kWarps + warp; k < h.count; k += warps) {
    const Entry e = load_entry(h.index, k);
    if (!entry_ok(e, h.payload_size, h.decoded)) {
      if (lane == 0) report(err, DecodeFault::entry, k);
      continue;
    }
    uint64_t start = 0;
    if (k > 0) {
      const Entry p = load_entry(h.index, k - 1);
      start = p.out_offset + out_bytes(p);
    }
    const bool ends_right = k + 1 < h.count || e.out_offset + out_bytes(e) == h.decoded;
    if (e.out_offset != start || !ends_right) {
      if (lane == 0) report(err, DecodeFault::tiling, k);
      continue;
    }
    if (e.kind == kKindRans) {
      decode_rans(e, k, h.payload, out, lut, stage, err);
      __syncwarp();  // the stage is read by every lane before the next segment overwrites it
    } else if (e.kind == kKindSplit) {
      decode_split(e, h.payload, out);
    } else {
      decode_copy(e, h.payload, out);
    }
  }
}

// --- kernel end ---

// Blocks per SM and SMs of device 0, once per process.
struct GridLimits {
  int blocks_per_sm = 0;
  int sms = 0;
  cudaError_t error = cudaSuccess;
};

const GridLimits& grid_limits() {
  static const GridLimits limits = [] {
    GridLimits g;
    int device = 0;
    g.error = cudaGetDevice(&device);
    if (g.error == cudaSuccess) {
      g.error = cudaDeviceGetAttribute(&g.sms, cudaDevAttrMultiProcessorCount, device);
    }
    if (g.error == cudaSuccess) {
      g.error =
          cudaFuncSetAttribute(exponent_decode_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(kSmemBytes));
    }
    if (g.error == cudaSuccess) {
      g.error = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
          &g.blocks_per_sm, exponent_decode_kernel, kThreads, kSmemBytes);
    }
    if (g.blocks_per_sm < 1) g.blocks_per_sm = 1;
    return g;
  }();
  return limits;
}

}  // namespace

Status launch_exponent_decode(const uint8_t* compressed, uint64_t compressed_size,
                              uint32_t segment_count, uint8_t* out, uint64_t out_capacity,
                              DecodeErrorWord* error, cudaStream_t stream) {
  if (reinterpret_cast<uintptr_t>(compressed) % 16 != 0) {
    return make_error(ErrorCode::invalid_argument,
                      "exponent decode: compressed bytes not 16-byte aligned on the device");
  }
  const GridLimits& g = grid_limits();
  FERRY_CUDA_CHECK(g.error);
  const uint64_t wanted = (uint64_t{segment_count} + kWarps - 1) / kWarps;
  const uint64_t most = static_cast<uint64_t>(g.blocks_per_sm) * static_cast<uint64_t>(g.sms);
  const unsigned blocks = static_cast<unsigned>(wanted < 1 ? 1 : (wanted < most ? wanted : most));
  exponent_decode_kernel<<<blocks, kThreads, kSmemBytes, stream>>>(
      compressed, compressed_size, segment_count, out, out_capacity, error);
  return launch_status("exponent_decode_kernel");
}

Status decode_group_async(const compress::GroupLayout& layout, const uint8_t* compressed,
                          uint8_t* out, uint64_t out_capacity, DecodeErrorWord* error,
                          cudaStream_t stream) {
  if (out_capacity < layout.decoded_size) {
    return make_error(ErrorCode::invalid_argument,
                      "exponent decode: output of " + std::to_string(out_capacity) +
                          " bytes for a group of " + std::to_string(layout.decoded_size));
  }
  FERRY_CUDA_CHECK(cudaMemsetAsync(error, 0, sizeof(DecodeErrorWord), stream));
  if (!layout.coded) {
    if (layout.decoded_size > 0) {
      FERRY_CUDA_CHECK(cudaMemcpyAsync(out, compressed + layout.payload_offset, layout.decoded_size,
                                       cudaMemcpyDeviceToDevice, stream));
    }
    return Status();
  }
  return launch_exponent_decode(compressed, layout.compressed_size,
                                static_cast<uint32_t>(layout.segments.size()), out, out_capacity,
                                error, stream);
}

Status decode_error_status(DecodeErrorWord word) {
  if (word == 0) return Status();
  const uint32_t fault = static_cast<uint32_t>(word >> 32);
  const uint32_t segment = static_cast<uint32_t>(word);
  const std::string seg = " (segment " + std::to_string(segment) + ")";
  std::string what;
  switch (static_cast<DecodeFault>(fault)) {
    case DecodeFault::header:
      what = "the header's magic, version, mode, offsets or sizes do not hold";
      break;
    case DecodeFault::table:
      what = "the frequency table does not sum to 4096";
      break;
    case DecodeFault::capacity:
      what = "the decoded size is larger than the output buffer";
      break;
    case DecodeFault::segment_count:
      what = "the segment count on the device is not the host layout's";
      break;
    case DecodeFault::entry:
      what = "an index entry's kind, lengths, alignment or bounds do not hold" + seg;
      break;
    case DecodeFault::tiling:
      what = "a segment does not start where the previous one ends" + seg;
      break;
    case DecodeFault::stream:
      what = "a rANS stream ends early or has words left unread" + seg;
      break;
    case DecodeFault::state:
      what = "a rANS lane state is out of range at the start or end" + seg;
      break;
    default:
      what = "unknown fault " + std::to_string(fault) + seg;
      break;
  }
  return make_error(ErrorCode::format, "compressed group on the device: " + what);
}

}  // namespace ferry::cuda
