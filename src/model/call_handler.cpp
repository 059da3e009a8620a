#include "model/call_handler.h"

#include <memory>
#include <utility>

namespace ferry {

const Graph* GraphCache::find(const Key& key) const {
  for (const auto& [k, g] : entries_) {
    if (k == key) return g.get();
  }
  return nullptr;
}

const Graph* GraphCache::add(const Key& key, std::unique_ptr<Graph> graph) {
  entries_.emplace_back(key, std::move(graph));
  return entries_.back().second.get();
}

}  // namespace ferry
