// The bookkeeping of one device region: which byte ranges are taken. Pure host code, no device
// calls, so it is tested on its own; the backends put it over the region they reserve
// (Backend::reserve). First fit over a free list sorted by offset, neighbours merged on release:
// ferry allocates a few hundred long-lived buffers per session, so simplicity beats speed here.
#pragma once

#include <cstdint>
#include <map>
#include <optional>

namespace ferry {

class Arena {
 public:
  static constexpr uint64_t kAlignment = 256;

  explicit Arena(uint64_t capacity = 0);

  // The offset of `bytes` (rounded up to kAlignment; 0 takes one unit) or nullopt when no free
  // range is large enough.
  std::optional<uint64_t> take(uint64_t bytes);
  // Returns a range that take() handed out. Returns false (and changes nothing) for an offset it
  // did not hand out.
  bool give(uint64_t offset);

  uint64_t capacity() const { return capacity_; }
  uint64_t in_use() const { return in_use_; }
  uint64_t largest_free() const;
  size_t live_ranges() const { return taken_.size(); }

 private:
  uint64_t capacity_ = 0;
  uint64_t in_use_ = 0;
  std::map<uint64_t, uint64_t> free_;   // offset -> bytes, no two adjacent
  std::map<uint64_t, uint64_t> taken_;  // offset -> bytes
};

}  // namespace ferry
