#include "tokenizer/bpe.h"

#include "tokenizer/utf8.h"

#include <mutex>
#include <queue>

namespace ferry::tok {

// Pre-tokens up to kCacheBytes long are cached, up to kCacheEntries of them (then the cache is
// emptied and refilled: ordinary text reuses a few thousand words).
namespace {
constexpr size_t kCacheBytes = 64;
constexpr size_t kCacheEntries = 1 << 16;
}  // namespace

struct Bpe::Cache {
  std::mutex mu;
  std::unordered_map<std::string, std::vector<int32_t>> map;
};

void Bpe::CacheDeleter::operator()(Cache* c) const {
  delete c;
}

Bpe::Bpe(std::array<int32_t, 256> byte_ids, const std::vector<BpeMerge>& merges,
         const std::vector<int32_t>& merged, std::unordered_map<std::string, int32_t> bytes_to_id,
         bool ignore_merges, std::optional<CharSymbols> chars)
    : byte_ids_(byte_ids),
      bytes_to_id_(std::move(bytes_to_id)),
      ignore_merges_(ignore_merges),
      chars_(std::move(chars)),
      cache_(new Cache) {
  rules_.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    // A pair listed twice keeps its last rank, as tokenizers' map from pairs does.
    rules_[key(merges[i].left, merges[i].right)] = Rule{static_cast<uint32_t>(i), merged[i]};
  }
}

void Bpe::encode(std::string_view bytes, std::vector<int32_t>& out) const {
  if (bytes.empty()) return;
  if (ignore_merges_) {
    if (auto it = bytes_to_id_.find(std::string(bytes)); it != bytes_to_id_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  if (bytes.size() > kCacheBytes) {
    merge(bytes, out);
    return;
  }
  const std::string k(bytes);
  {
    std::lock_guard<std::mutex> lock(cache_->mu);
    if (auto it = cache_->map.find(k); it != cache_->map.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t first = out.size();
  merge(bytes, out);
  std::lock_guard<std::mutex> lock(cache_->mu);
  if (cache_->map.size() >= kCacheEntries) cache_->map.clear();
  cache_->map.emplace(k,
                      std::vector<int32_t>(out.begin() + static_cast<ptrdiff_t>(first), out.end()));
}

void Bpe::initial_symbols(std::string_view bytes, std::vector<int32_t>& ids) const {
  if (!chars_) {
    for (char c : bytes) ids.push_back(byte_ids_[static_cast<uint8_t>(c)]);
    return;
  }
  const CharSymbols& cs = *chars_;
  // An unknown waits here until a known character (or the end) follows, so that fuse_unk can
  // join a run of them; characters taken by byte fallback do not flush it (as tokenizers).
  bool unk_pending = false;
  size_t i = 0;
  while (i < bytes.size()) {
    const size_t begin = i;
    std::optional<char32_t> cp = next_code_point(bytes, i);
    if (!cp) ++i;  // not reached: the text was checked to be UTF-8
    const std::string_view ch = bytes.substr(begin, i - begin);
    auto it = cp ? cs.chars.find(*cp) : cs.chars.end();
    if (it != cs.chars.end()) {
      if (unk_pending) ids.push_back(cs.unk);
      unk_pending = false;
      ids.push_back(it->second);
      continue;
    }
    bool all_bytes = true;
    for (char c : ch) all_bytes = all_bytes && cs.byte_tokens[static_cast<uint8_t>(c)] >= 0;
    if (all_bytes) {
      for (char c : ch) ids.push_back(cs.byte_tokens[static_cast<uint8_t>(c)]);
      continue;
    }
    if (cs.unk < 0) continue;
    if (unk_pending && !cs.fuse_unk) ids.push_back(cs.unk);
    unk_pending = true;
  }
  if (unk_pending) ids.push_back(cs.unk);
}

void Bpe::merge(std::string_view bytes, std::vector<int32_t>& out) const {
  struct Symbol {
    int32_t id;
    int32_t prev;  // -1: none
    int32_t next;  // -1: none
    bool alive;
  };
  struct Candidate {
    uint32_t rank;
    int32_t pos;     // the left symbol of the pair
    int32_t result;  // what the pair merges into (to notice a pair that changed since)
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::vector<int32_t> first;
  first.reserve(bytes.size());
  initial_symbols(bytes, first);
  const auto n = static_cast<int32_t>(first.size());
  if (n == 0) return;
  std::vector<Symbol> sym(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    sym[static_cast<size_t>(i)] = {first[static_cast<size_t>(i)], i - 1, i + 1 < n ? i + 1 : -1,
                                   true};
  }
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto push = [&](int32_t left) {
    const Symbol& a = sym[static_cast<size_t>(left)];
    if (a.next < 0) return;
    auto it = rules_.find(key(a.id, sym[static_cast<size_t>(a.next)].id));
    if (it != rules_.end()) heap.push({it->second.rank, left, it->second.result});
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    Symbol& a = sym[static_cast<size_t>(c.pos)];
    if (!a.alive || a.next < 0) continue;
    Symbol& b = sym[static_cast<size_t>(a.next)];
    auto it = rules_.find(key(a.id, b.id));
    if (it == rules_.end() || it->second.result != c.result || it->second.rank != c.rank) continue;
    a.id = c.result;
    b.alive = false;
    a.next = b.next;
    if (b.next >= 0) sym[static_cast<size_t>(b.next)].prev = c.pos;
    if (a.prev >= 0) push(a.prev);
    push(c.pos);
  }
  for (int32_t i = 0; i >= 0; i = sym[static_cast<size_t>(i)].next) {
    out.push_back(sym[static_cast<size_t>(i)].id);
  }
}

}  // namespace ferry::tok
