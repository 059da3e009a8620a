// The byte format of one compressed weight group (docs/compression.md has the full table and
// the reasons): constants, the little-endian field offsets, the lane order of the interleaved
// rANS segments and the BF16 split. Header-only and free of the standard library's containers
// so that the CUDA decoder (backend/cuda/exponent_decode.cu) compiles the same definitions.
//
//   header   64 bytes (kHeader*)
//   table    256 x u16 symbol frequencies, summing to 2^kProbBits       (coded groups only)
//   index    segment_count x 32-byte entries (kEntry*), in output order (coded groups only)
//   payload  16-byte aligned; each segment's bytes at its in_offset (a multiple of 16)
//
// A stored group (mode kModeStored) is the header followed by the decoded bytes.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define FERRY_COMPRESS_HD __host__ __device__ __forceinline__
#else
#define FERRY_COMPRESS_HD inline
#endif

namespace ferry::compress {

inline constexpr uint8_t kMagic[4] = {'F', 'R', 'Y', 'Z'};
inline constexpr uint32_t kMagicWord = 0x5a595246u;  // the same 4 bytes as a little-endian u32
inline constexpr uint16_t kVersion = 1;
inline constexpr uint16_t kModeStored = 0;
inline constexpr uint16_t kModeCoded = 1;

// Header fields (byte offsets).
inline constexpr uint32_t kHeaderBytes = 64;
inline constexpr uint32_t kHeaderMagic = 0;           // u8[4]
inline constexpr uint32_t kHeaderVersion = 4;         // u16
inline constexpr uint32_t kHeaderMode = 6;            // u16
inline constexpr uint32_t kHeaderDecodedSize = 8;     // u64
inline constexpr uint32_t kHeaderChecksum = 16;       // u64, group_checksum of the decoded bytes
inline constexpr uint32_t kHeaderSegmentCount = 24;   // u32
inline constexpr uint32_t kHeaderProbBits = 28;       // u32, kProbBits (coded), 0 (stored)
inline constexpr uint32_t kHeaderIndexOffset = 32;    // u64, kHeaderBytes + kTableBytes (coded)
inline constexpr uint32_t kHeaderPayloadOffset = 40;  // u64
inline constexpr uint32_t kHeaderPayloadSize = 48;    // u64, compressed size - payload offset
inline constexpr uint32_t kHeaderReserved = 56;       // u64, 0

// The rANS table: 256 symbols, frequencies in units of 2^-kProbBits.
inline constexpr uint32_t kSymbols = 256;
inline constexpr uint32_t kProbBits = 12;
inline constexpr uint32_t kProbScale = 1u << kProbBits;
inline constexpr uint32_t kTableBytes = kSymbols * 2;

// Index entry fields (byte offsets within a 32-byte entry).
inline constexpr uint32_t kEntryBytes = 32;
inline constexpr uint32_t kEntryOutOffset = 0;  // u64, byte offset in the decoded group
inline constexpr uint32_t kEntryInOffset = 8;   // u64, byte offset in the payload, % 16 == 0
inline constexpr uint32_t kEntryInLength = 16;  // u32, bytes of the copy / of the exponents
inline constexpr uint32_t kEntryCount = 20;     // u32, bytes (copy) or BF16 elements
inline constexpr uint32_t kEntryKind = 24;      // u16
inline constexpr uint32_t kEntryReserved = 26;  // u16 + u32, 0

// Segment kinds.
inline constexpr uint16_t kKindCopy = 0;   // count bytes copied from in_offset (in_length == count)
inline constexpr uint16_t kKindRans = 1;   // BF16: rANS-coded exponents, then the sign+mantissa
inline constexpr uint16_t kKindSplit = 2;  // BF16: exponents stored raw, then sign+mantissa

// Limits every decoder checks.
inline constexpr uint32_t kMaxSegmentElements = 8192;  // BF16 elements per segment
inline constexpr uint32_t kMaxCopyBytes = 65536;       // bytes per copy segment
inline constexpr uint32_t kMaxCodedBytes = 8192;       // in_length of a rANS segment

// rANS: 32 lanes (one warp), 32-bit states in [kStateLow, 2^32), 16-bit renormalization words.
// A rANS segment's exponent part is 32 u32 initial states then the words; in_length is
// 128 + 2 * words. Every state must come back to kStateLow once the segment is decoded.
inline constexpr uint32_t kLanes = 32;
inline constexpr uint32_t kStateLow = 1u << 16;
inline constexpr uint32_t kStateBytes = kLanes * 4;
// Element order: a segment's elements are cut into chunks of kLanes * kPerLane; within a chunk
// lane l owns the kPerLane consecutive elements l * kPerLane + j. Decoding walks chunks, then
// j = 0..kPerLane-1, then the lanes 0..31; the lanes that renormalize at a step take the next
// words of the stream in lane order.
inline constexpr uint32_t kPerLane = 8;
inline constexpr uint32_t kChunk = kLanes * kPerLane;

FERRY_COMPRESS_HD constexpr uint64_t align16(uint64_t x) {
  return (x + 15) & ~uint64_t{15};
}

// A BF16 value split into the byte that is coded (the 8 exponent bits) and the byte stored raw
// (sign in bit 7, the 7 mantissa bits below it), and joined back.
FERRY_COMPRESS_HD constexpr uint8_t bf16_exponent(uint16_t v) {
  return static_cast<uint8_t>((v >> 7) & 0xffu);
}
FERRY_COMPRESS_HD constexpr uint8_t bf16_sign_mantissa(uint16_t v) {
  return static_cast<uint8_t>(((v >> 8) & 0x80u) | (v & 0x7fu));
}
FERRY_COMPRESS_HD constexpr uint16_t bf16_join(uint8_t exponent, uint8_t sign_mantissa) {
  return static_cast<uint16_t>((static_cast<uint32_t>(sign_mantissa & 0x80u) << 8) |
                               (static_cast<uint32_t>(exponent) << 7) | (sign_mantissa & 0x7fu));
}

// One decode-table entry per slot of [0, kProbScale): symbol | (freq - 1) << 8 | (slot - cum)
// << 20. A decode step is: e = table[x & (kProbScale - 1)]; symbol = e & 0xff; x = ((e >> 8 &
// 0xfff) + 1) * (x >> kProbBits) + (e >> 20); if x < kStateLow, x = x << 16 | word.
FERRY_COMPRESS_HD constexpr uint32_t table_entry(uint32_t symbol, uint32_t freq, uint32_t offset) {
  return symbol | ((freq - 1) << 8) | (offset << 20);
}
FERRY_COMPRESS_HD constexpr uint32_t rans_step(uint32_t x, uint32_t entry) {
  return (((entry >> 8) & 0xfffu) + 1) * (x >> kProbBits) + (entry >> 20);
}

}  // namespace ferry::compress
