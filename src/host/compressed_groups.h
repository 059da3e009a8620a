// The compressed bytes of a model's weight groups, in host memory (issue 24, docs/compression.md):
// where the plan's compressed groups (plan/plan.h, Form::compressed) get their bytes. Two makers
// fill it: a compressed checkpoint (`ferry pack --compress`: each group one U8 tensor of the
// container, read in place from its mapping) and groups encoded at open from a raw checkpoint.
// Either way every entry is validated here (compress::read_group_layout, and its decoded size
// against the group's layout), so the executor and the planner trust what they read. Immutable
// once made: any thread may read it; the spans stay valid while it lives.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "compress/group_codec.h"
#include "core/status.h"
#include "model/weights.h"

namespace ferry {

class CompressedGroups {
 public:
  CompressedGroups() = default;

  // One span per group of `weights`, in its order; an empty span is a group with no compressed
  // form (it can only run raw). `keep` owns what the spans point into (a mapped file, buffers).
  // A `format` error naming the group for bytes that do not parse, or that decode to a size
  // other than the group's layout (WeightGroup::bytes).
  static Result<CompressedGroups> make(const ModelWeights& weights,
                                       std::vector<std::span<const uint8_t>> bytes,
                                       std::shared_ptr<const void> keep);

  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  // Whether group g has a compressed form.
  bool has(size_t g) const { return g < entries_.size() && !entries_[g].bytes.empty(); }
  std::span<const uint8_t> bytes(size_t g) const { return entries_.at(g).bytes; }
  const compress::GroupLayout& layout(size_t g) const { return entries_.at(g).layout; }
  // Compressed size of group g (0 where it has none).
  uint64_t compressed_bytes(size_t g) const { return has(g) ? entries_[g].bytes.size() : 0; }
  // Sum over the groups that have a compressed form, and their decoded (raw) sum.
  uint64_t total_compressed() const;
  uint64_t total_decoded() const;

 private:
  struct Entry {
    std::span<const uint8_t> bytes;
    compress::GroupLayout layout;
  };
  std::vector<Entry> entries_;
  std::shared_ptr<const void> keep_;
};

// The byte ranges of a group's layout that hold BF16 elements (its BF16 tensors, in offset
// order): what the encoder codes; the rest (F32 norms, padding) is stored raw.
std::vector<compress::Bf16Range> bf16_ranges(const WeightGroup& group);

}  // namespace ferry
