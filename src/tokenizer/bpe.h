// The BPE model: ranked merges applied to one pre-token.
//
// A byte-level pre-token starts as one symbol per byte (the vocabulary's single-byte tokens); a
// SentencePiece one (CharSymbols) as one symbol per character: the character's token, else with
// byte_fallback its UTF-8 bytes as <0xNN> tokens, else the unknown token (consecutive unknowns
// fused into one with fuse_unk), as tokenizers' BPE::merge_word does. Then the adjacent
// pair with the lowest merge rank is merged, leftmost first among equal ranks, until no pair has
// a merge. Pairs wait in a min-heap keyed by (rank, position) over a linked list of symbols, so a
// pre-token of n bytes costs O(n log n). Results of short pre-tokens are cached.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
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

// The initial symbols of a SentencePiece vocabulary.
struct CharSymbols {
  std::unordered_map<char32_t, int32_t> chars;  // tokens that are one character
  std::array<int32_t, 256> byte_tokens{};       // <0xNN> ids; -1 where absent or no fallback
  int32_t unk = -1;                             // the unknown token; -1: unknowns are dropped
  bool fuse_unk = false;
};

class Bpe {
 public:
  // byte_ids[b]: the id of the token that is byte b alone. merges: in rank order (rank = index);
  // merged[i]: the id of the token merge i makes. bytes_to_id: the raw bytes of every token that
  // has them, for `ignore_merges` (a pre-token that is itself a token is taken whole). With
  // `chars`, the vocabulary is SentencePiece text and byte_ids is unused.
  Bpe(std::array<int32_t, 256> byte_ids, const std::vector<BpeMerge>& merges,
      const std::vector<int32_t>& merged, std::unordered_map<std::string, int32_t> bytes_to_id,
      bool ignore_merges, std::optional<CharSymbols> chars = std::nullopt);

  // Appends the ids of one pre-token given as raw bytes (SentencePiece: valid UTF-8).
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
  // The symbols a pre-token starts as.
  void initial_symbols(std::string_view bytes, std::vector<int32_t>& ids) const;

  struct Cache;
  struct CacheDeleter {
    void operator()(Cache* c) const;
  };

  std::array<int32_t, 256> byte_ids_{};
  std::unordered_map<uint64_t, Rule> rules_;
  std::unordered_map<std::string, int32_t> bytes_to_id_;
  bool ignore_merges_ = false;
  std::optional<CharSymbols> chars_;
  std::unique_ptr<Cache, CacheDeleter> cache_;
};

}  // namespace ferry::tok
