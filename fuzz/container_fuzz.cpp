// Fuzzes the compressed checkpoint's container parser (model/compressed_checkpoint.h) with
// arbitrary safetensors images: the header, the table in its metadata, and every group's bytes
// as open_container checks them; groups that pass are decoded (small ones) and a decode that
// succeeds must give the table's size. Any accepted table must keep its promises: pieces inside
// their groups and tiling their tensors.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "compress/group_codec.h"
#include "format/safetensors.h"
#include "model/compressed_checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> image(reinterpret_cast<const std::byte*>(data), size);
  auto h = ferry::parse_safetensors(image, "fuzz");
  if (!h.ok() || !ferry::is_compressed_container(*h)) return 0;
  auto t = ferry::parse_container(*h, "fuzz");
  if (!t.ok()) {
    if (t.error().message.empty()) std::abort();
    return 0;
  }
  for (const ferry::ContainerTensor& c : t->tensors) {
    uint64_t at = 0;
    for (const ferry::TensorPiece& p : c.pieces) {
      if (p.group >= t->groups.size() || p.source != at) std::abort();
      const uint64_t group = t->groups[p.group].decoded_bytes;
      if (p.bytes > group || p.offset > group - p.bytes) std::abort();
      at += p.bytes;
    }
    if (!c.stored && at != c.bytes) std::abort();
    if (c.stored && c.info == nullptr) std::abort();
  }
  for (size_t g = 0; g < t->groups.size(); ++g) {
    const ferry::TensorInfo* info = t->groups[g].info;
    if (info == nullptr || info->begin > size || info->bytes > size - info->begin) std::abort();
    const std::span<const uint8_t> bytes(data + info->begin, info->bytes);
    if (!ferry::check_group_bytes(*t, g, bytes).ok()) continue;
    if (t->groups[g].decoded_bytes > (uint64_t{1} << 20)) continue;
    std::vector<uint8_t> out(t->groups[g].decoded_bytes);
    (void)ferry::compress::decode_group(bytes, out);
  }
  return 0;
}
