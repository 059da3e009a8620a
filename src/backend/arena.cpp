#include "backend/arena.h"

#include <algorithm>
#include <iterator>

namespace ferry {

Arena::Arena(uint64_t capacity) : capacity_(capacity / kAlignment * kAlignment) {
  if (capacity_ > 0) free_.emplace(0, capacity_);
}

std::optional<uint64_t> Arena::take(uint64_t bytes) {
  if (bytes > UINT64_MAX - kAlignment) return std::nullopt;
  const uint64_t need =
      std::max<uint64_t>(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < need) continue;
    const uint64_t offset = it->first;
    const uint64_t left = it->second - need;
    free_.erase(it);
    if (left > 0) free_.emplace(offset + need, left);
    taken_.emplace(offset, need);
    in_use_ += need;
    return offset;
  }
  return std::nullopt;
}

bool Arena::give(uint64_t offset) {
  auto t = taken_.find(offset);
  if (t == taken_.end()) return false;
  uint64_t start = offset;
  uint64_t size = t->second;
  in_use_ -= size;
  taken_.erase(t);
  // Merge with the free range after, then the one before.
  auto next = free_.lower_bound(start);
  if (next != free_.end() && next->first == start + size) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      size += prev->second;
      free_.erase(prev);
    }
  }
  free_.emplace(start, size);
  return true;
}

uint64_t Arena::largest_free() const {
  uint64_t best = 0;
  for (const auto& [offset, size] : free_) best = std::max(best, size);
  return best;
}

}  // namespace ferry
