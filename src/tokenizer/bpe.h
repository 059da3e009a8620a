// The BPE model of a byte-level tokenizer: ranked merges applied to the bytes of one pre-token.
//
// A pre-token starts as one symbol per byte (the vocabulary's single-byte tokens); the adjacent
// pair with the lowest merge rank is merged, leftmost first among equal ranks, until no pair has
// a merge. Pairs wait in a min-heap keyed by (rank, position) over a linked list of symbols, so a
// pre-token of n bytes costs O(n log n). Results of short pre-tokens are cached.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/status.h"

namespace ferry::tok {

struct BpeMerge {
  int32_t left = 0;
  int32_t right = 0;
};

class Bpe {
 public:
  // byte_ids[b]: the id of the token that is byte b alone. merges: in rank order (rank = index);
  // merged[i]: the id of the token merge i makes. bytes_to_id: the raw bytes of every token that
  // has them, for `ignore_merges` (a pre-token that is itself a token is taken whole).
  Bpe(std::array<int32_t, 256> byte_ids, const std::vector<BpeMerge>& merges,
      const std::vector<int32_t>& merged, std::unordered_map<std::string, int32_t> bytes_to_id,
      bool ignore_merges);

  // Appends the ids of one pre-token given as raw bytes.
  void encode(std::string_view bytes, std::vector<int32_t>& out) const;

 private:
  struct Rule {
    uint32_t rank;
    int32_t result;
  };
  static uint64_t key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  void merge(std::string_view bytes, std::vector<int32_t>& out) const;

  struct Cache;
  struct CacheDeleter {
    void operator()(Cache* c) const;
  };

  std::array<int32_t, 256> byte_ids_{};
  std::unordered_map<uint64_t, Rule> rules_;
  std::unordered_map<std::string, int32_t> bytes_to_id_;
  bool ignore_merges_ = false;
  std::unique_ptr<Cache, CacheDeleter> cache_;
};

}  // namespace ferry::tok
