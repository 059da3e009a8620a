// Lossless compression of one weight group (docs/compression.md): the BF16 exponent bytes
// rANS-coded in independently decodable segments of up to 8192 elements (32 interleaved lane
// states each, so a GPU warp decodes one segment), sign+mantissa bytes and everything that is
// not BF16 stored raw, a group that would not shrink below 0.95x stored whole. The encoder and
// this decoder are the reference; backend/cuda/exponent_decode.cuh decodes the same bytes on the
// device. Every length and offset is validated: hostile input gives a `format` error naming what
// is wrong, never a crash or an access out of bounds.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "compress/group_format.h"
#include "core/status.h"

namespace ferry {
class ThreadPool;
}

namespace ferry::compress {

// A byte range of a group holding BF16 elements (little-endian): `bytes` even, ranges sorted,
// not overlapping, inside the group. Everything outside them is stored raw.
struct Bf16Range {
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

struct EncodeOptions {
  uint32_t segment_elements =
      kMaxSegmentElements;      // BF16 elements per segment, 256..8192, % 256 == 0
  uint32_t copy_bytes = 16384;  // raw bytes per copy segment, 1..kMaxCopyBytes
  double max_ratio = 0.95;     // coded only if compressed <= max_ratio * decoded, else stored whole
  ThreadPool* pool = nullptr;  // segments encoded on its threads (null: this thread)
};

// The compressed group: coded, or stored whole when coding would not reach max_ratio (and for
// a group with no BF16 range, or of 0 bytes). invalid_argument for ranges that break the rules.
Result<std::vector<uint8_t>> encode_group(std::span<const uint8_t> bytes,
                                          std::span<const Bf16Range> bf16,
                                          const EncodeOptions& options = {});

enum class SegmentKind : uint16_t { copy = kKindCopy, rans = kKindRans, split = kKindSplit };
const char* segment_kind_name(SegmentKind kind);

struct SegmentInfo {
  SegmentKind kind = SegmentKind::copy;
  uint64_t out_offset = 0;  // in the decoded group
  uint64_t in_offset = 0;   // in the payload
  uint32_t in_length = 0;   // bytes of the copy, or of the exponent part
  uint32_t count = 0;       // bytes (copy) or BF16 elements
  uint64_t out_bytes() const { return kind == SegmentKind::copy ? count : uint64_t{count} * 2; }
  // Payload bytes it reads: in_length, plus 16-byte padding and the sign+mantissa bytes (BF16).
  uint64_t in_bytes() const {
    return kind == SegmentKind::copy ? in_length : align16(in_length) + count;
  }
};

// What a compressed group holds, every field checked against the others and the buffer size.
struct GroupLayout {
  bool coded = false;  // false: stored whole
  uint64_t compressed_size = 0;
  uint64_t decoded_size = 0;
  uint64_t checksum = 0;
  uint64_t payload_offset = 0;
  uint64_t payload_size = 0;
  std::array<uint16_t, kSymbols> freqs{};  // coded only
  std::vector<SegmentInfo> segments;       // coded only, in output order, tiling the output
  uint64_t rans_elements = 0;              // BF16 elements in rans segments
  uint64_t split_elements = 0;             // BF16 elements in split segments
  uint64_t copy_bytes = 0;                 // bytes in copy segments
};

// The decoded size from the header alone (magic, version and mode checked).
Result<uint64_t> decoded_size(std::span<const uint8_t> compressed);

// Header, table and index, validated (not the payload's contents or the checksum).
Result<GroupLayout> read_group_layout(std::span<const uint8_t> compressed);

struct DecodeOptions {
  ThreadPool* pool = nullptr;   // segments and checksum leaves on its threads (null: this thread)
  bool verify_checksum = true;  // false only for benchmarks of the decode alone
};

// Decodes into `out` (exactly decoded_size bytes). On error `out` holds garbage.
Status decode_group(std::span<const uint8_t> compressed, std::span<uint8_t> out,
                    const DecodeOptions& options = {});
// The same with a layout already read from these bytes.
Status decode_group(const GroupLayout& layout, std::span<const uint8_t> compressed,
                    std::span<uint8_t> out, const DecodeOptions& options = {});

}  // namespace ferry::compress
