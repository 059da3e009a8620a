// libFuzzer target: the compressed weight-group decoder (compress/group_codec.h). The input is a
// compressed group: its layout is read and, when it validates and decodes to at most 64 MiB, it
// is decoded; any crash, sanitizer report or out-of-bounds access is a finding. Then the same
// bytes are encoded as a group (its even prefix as one BF16 range after a raw first byte) and
// must decode back to themselves.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "compress/group_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ferry::compress;
  const std::span<const uint8_t> in(data, size);
  auto layout = read_group_layout(in);
  if (layout.ok() && layout->decoded_size <= (uint64_t{64} << 20)) {
    std::vector<uint8_t> out(layout->decoded_size);
    (void)decode_group(*layout, in, out);
  }
  // Round trip of arbitrary bytes (small segments so short inputs make several).
  if (size >= 1) {
    const uint64_t even = (size - 1) & ~uint64_t{1};
    const std::vector<Bf16Range> ranges{{1, even}};
    EncodeOptions o;
    o.segment_elements = 256;
    o.copy_bytes = 64;
    o.max_ratio = 2.0;  // always coded: exercises the coded path on any data
    auto enc = encode_group(in, ranges, o);
    if (!enc.ok()) __builtin_trap();
    std::vector<uint8_t> back(size);
    if (!decode_group(*enc, back).ok() || back != std::vector<uint8_t>(data, data + size)) {
      __builtin_trap();
    }
  }
  return 0;
}
