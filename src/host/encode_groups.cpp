#include "host/encode_groups.h"

#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "format/fault_guard.h"

namespace ferry {

namespace {

// The buffers' bytes moved into one buffer of `backend`'s host memory, each at a multiple of
// 256 bytes; each vector is freed once copied.
Result<CompressedGroups> into_host_buffer(const ModelWeights& weights,
                                          std::vector<std::vector<uint8_t>> buffers,
                                          Backend& backend) {
  constexpr uint64_t kAlign = 256;
  std::vector<uint64_t> offsets;
  uint64_t total = 0;
  for (const auto& b : buffers) {
    offsets.push_back(total);
    total += (b.size() + kAlign - 1) / kAlign * kAlign;
  }
  FERRY_ASSIGN_OR_RETURN(HostBuffer host, backend.allocate_host(total));
  auto keep = std::make_shared<HostBuffer>(std::move(host));
  auto* base = static_cast<uint8_t*>(keep->data());
  std::vector<std::span<const uint8_t>> spans;
  for (size_t g = 0; g < buffers.size(); ++g) {
    if (!buffers[g].empty()) std::memcpy(base + offsets[g], buffers[g].data(), buffers[g].size());
    spans.emplace_back(base + offsets[g], buffers[g].size());
    std::vector<uint8_t>().swap(buffers[g]);
  }
  return CompressedGroups::make(weights, std::move(spans), std::move(keep));
}

}  // namespace

Result<CompressedGroups> encode_groups(const ModelWeights& weights, const HostTier& tier,
                                       ThreadPool* pool, compress::EncodeOptions options,
                                       Backend* page_locked) {
  options.pool = pool;
  auto buffers = std::make_shared<std::vector<std::vector<uint8_t>>>();
  buffers->reserve(weights.groups.size());
  std::vector<uint8_t> layout;
  for (const WeightGroup& group : weights.groups) {
    auto fail = [&](const Error& e) {
      return make_error(e.code, "encoding group " + group.name + ": " + e.message);
    };
    auto copies = tier.copies(group);
    if (!copies.ok()) return fail(copies.error());
    // The padding between tensors is zero unless a merged copy brings the file's gap bytes, as
    // it does into a slot: the decoded group is the layout a raw copy would give.
    layout.assign(group.bytes, 0);
    for (const HostCopy& c : *copies) {
      if (c.dst_offset > layout.size() || c.bytes > layout.size() - c.dst_offset) {
        return fail(make_error(ErrorCode::internal, "a copy lands outside the group's layout"));
      }
      const Status st = guarded_copy(layout.data() + c.dst_offset, c.src, c.bytes, *c.file);
      if (!st.ok()) return fail(st.error());
    }
    auto encoded = compress::encode_group(layout, bf16_ranges(group), options);
    if (!encoded.ok()) return fail(encoded.error());
    buffers->push_back(std::move(*encoded));
  }
  if (page_locked != nullptr) return into_host_buffer(weights, std::move(*buffers), *page_locked);
  std::vector<std::span<const uint8_t>> spans(buffers->begin(), buffers->end());
  return CompressedGroups::make(weights, std::move(spans), std::move(buffers));
}

}  // namespace ferry
