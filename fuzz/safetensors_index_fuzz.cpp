// Fuzzes parse_safetensors_index with arbitrary text. Any accepted index must list only shard
// names that stay inside the checkpoint folder.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "format/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto index = ferry::parse_safetensors_index(text, "fuzz");
  if (!index.ok()) {
    if (index.error().message.empty()) std::abort();
    return 0;
  }
  if (index->weight_map.empty()) std::abort();
  for (const auto& [name, shard] : index->weight_map) {
    if (name.empty() || shard.find('/') != std::string_view::npos ||
        shard.find('\\') != std::string_view::npos || shard == ".." ||
        !shard.ends_with(".safetensors"))
      std::abort();
  }
  return 0;
}
