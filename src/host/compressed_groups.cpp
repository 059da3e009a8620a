#include "host/compressed_groups.h"

#include <algorithm>
#include <string>
#include <utility>

namespace ferry {

Result<CompressedGroups> CompressedGroups::make(const ModelWeights& weights,
                                                std::vector<std::span<const uint8_t>> bytes,
                                                std::shared_ptr<const void> keep) {
  if (bytes.size() != weights.groups.size()) {
    return make_error(ErrorCode::invalid_argument,
                      "compressed groups: " + std::to_string(bytes.size()) +
                          " entries for a model of " + std::to_string(weights.groups.size()) +
                          " groups");
  }
  CompressedGroups out;
  out.entries_.reserve(bytes.size());
  for (size_t g = 0; g < bytes.size(); ++g) {
    Entry entry{bytes[g], {}};
    if (!entry.bytes.empty()) {
      const WeightGroup& group = weights.groups[g];
      auto layout = compress::read_group_layout(entry.bytes);
      if (!layout.ok()) {
        return make_error(ErrorCode::format,
                          "compressed group " + group.name + ": " + layout.error().message);
      }
      if (layout->decoded_size != group.bytes) {
        return make_error(ErrorCode::format, "compressed group " + group.name + ": decodes to " +
                                                 std::to_string(layout->decoded_size) +
                                                 " bytes, its layout has " +
                                                 std::to_string(group.bytes));
      }
      entry.layout = std::move(*layout);
    }
    out.entries_.push_back(std::move(entry));
  }
  out.keep_ = std::move(keep);
  return out;
}

uint64_t CompressedGroups::total_compressed() const {
  uint64_t sum = 0;
  for (const Entry& e : entries_) sum += e.bytes.size();
  return sum;
}

uint64_t CompressedGroups::total_decoded() const {
  uint64_t sum = 0;
  for (const Entry& e : entries_) {
    if (!e.bytes.empty()) sum += e.layout.decoded_size;
  }
  return sum;
}

std::vector<compress::Bf16Range> bf16_ranges(const WeightGroup& group) {
  std::vector<compress::Bf16Range> ranges;
  for (const WeightSpec& spec : group.tensors) {
    if (spec.dtype == DType::bf16 && spec.bytes > 0) ranges.push_back({spec.offset, spec.bytes});
  }
  std::sort(ranges.begin(), ranges.end(),
            [](const compress::Bf16Range& a, const compress::Bf16Range& b) {
              return a.offset < b.offset;
            });
  return ranges;
}

}  // namespace ferry
