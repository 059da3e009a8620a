// Fuzzes parse_safetensors with arbitrary file images. Each input is tried twice: as the whole
// file, and behind a correct 8-byte length (so most inputs reach the JSON and the rule checks).
// Any accepted header must describe tensors that lie inside the image.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "format/safetensors.h"

namespace {

void check(std::span<const std::byte> image) {
  auto h = ferry::parse_safetensors(image, "fuzz");
  if (!h.ok()) {
    if (h.error().message.empty()) std::abort();
    return;
  }
  uint64_t end = h->data_start;
  for (const ferry::TensorInfo& t : h->tensors) {
    // Sorted, contiguous, inside the image, and the right size for dtype and shape.
    if (t.begin != end || t.bytes > image.size() - t.begin) std::abort();
    if (static_cast<uint64_t>(t.numel()) * ferry::dtype_size(t.dtype) != t.bytes) std::abort();
    end = t.begin + t.bytes;
  }
  if (end != image.size()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto* bytes = reinterpret_cast<const std::byte*>(data);
  check(std::span<const std::byte>(bytes, size));
  std::vector<std::byte> framed(8 + size);
  for (size_t i = 0; i < 8; ++i)
    framed[i] = static_cast<std::byte>((static_cast<uint64_t>(size) >> (8 * i)) & 0xFF);
  for (size_t i = 0; i < size; ++i) framed[8 + i] = bytes[i];
  check(framed);
  return 0;
}
