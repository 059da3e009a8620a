#include "model/prompt.h"

#include <algorithm>
#include <string>

#include "model/ego_history.h"
#include "model/sampling.h"

namespace ferry {

namespace {

constexpr int64_t kSystemTextTokens = 12;  // "You are a driving assistant that ..." (spec §4.3)

class PromptBuilder {
 public:
  PromptBuilder(uint64_t seed, int64_t vocab) : rng_(seed), vocab_(vocab) {}

  void tok(int32_t id) { p_.ids.push_back(id); }
  // Ids the filler text must never use: a config may place the image / vision ids below
  // kFirstSpecialId, where a random text id would pass for an image token.
  void reserve(const Qwen3VLConfig& c) {
    reserved_ = {c.image_token_id, c.vision_start_token_id, c.vision_end_token_id};
  }
  void text(int64_t n) {
    const auto limit = static_cast<uint64_t>(std::clamp<int64_t>(vocab_, 1, kFirstSpecialId));
    for (int64_t i = 0; i < n; ++i) {
      int64_t id = static_cast<int64_t>(rng_.next() % limit);
      // Redraw on a reserved id (at most three of >= 4 candidates when vocab allows it).
      for (int tries = 0; tries < 64 && is_reserved(id); ++tries) {
        id = static_cast<int64_t>(rng_.next() % limit);
      }
      p_.ids.push_back(static_cast<int32_t>(id));
    }
  }
  bool is_reserved(int64_t id) const {
    return std::find(reserved_.begin(), reserved_.end(), id) != reserved_.end();
  }
  void images(std::span<const int64_t> tokens_per_image, const Qwen3VLConfig& c) {
    for (int64_t n : tokens_per_image) {
      tok(static_cast<int32_t>(c.vision_start_token_id));
      for (int64_t i = 0; i < n; ++i) {
        p_.image_rows.push_back(static_cast<int32_t>(p_.ids.size()));
        tok(static_cast<int32_t>(c.image_token_id));
      }
      tok(static_cast<int32_t>(c.vision_end_token_id));
    }
  }
  int64_t size() const { return static_cast<int64_t>(p_.ids.size()); }

  Result<Prompt> finish() {
    for (int32_t id : p_.ids) {
      if (id < 0 || id >= vocab_) {
        return make_error(ErrorCode::unsupported, "prompt: token id " + std::to_string(id) +
                                                      " is outside the model's vocabulary (" +
                                                      std::to_string(vocab_) + ")");
      }
    }
    return std::move(p_);
  }

 private:
  Rng rng_;
  int64_t vocab_;
  Prompt p_;
  std::vector<int64_t> reserved_;
};

int64_t sum(std::span<const int64_t> v) {
  int64_t s = 0;
  for (int64_t x : v) s += x;
  return s;
}

// The tokens of each prompt that are not filler text: chat template, image spans, ego history.
int64_t qwen3_vl_fixed(int64_t image_tokens, int64_t images) {
  return 3 + image_tokens + 2 * images + 5;
}
int64_t alpamayo_fixed(int64_t image_tokens, int64_t images, int64_t history) {
  return (3 + kSystemTextTokens + 2) + 3 + image_tokens + 2 * images + (history + 2) + 2 + 4;
}

}  // namespace

int64_t min_prompt_tokens(const ModelConfig& config, const Workload& w) {
  if (config.alpamayo() != nullptr)
    return alpamayo_fixed(image_tokens(w, config), w.num_images, kHistoryTokens) + 1;
  if (config.vlm() != nullptr) return qwen3_vl_fixed(image_tokens(w, config), w.num_images) + 1;
  return 1;
}

std::vector<int32_t> random_text_ids(uint64_t seed, int64_t length, int64_t vocab) {
  PromptBuilder b(seed, vocab);
  b.text(length);
  return b.finish().value().ids;
}

Result<Prompt> qwen3_vl_prompt(uint64_t seed, int64_t target_tokens,
                               std::span<const int64_t> tokens_per_image,
                               const Qwen3VLConfig& config) {
  const int64_t fixed =
      qwen3_vl_fixed(sum(tokens_per_image), static_cast<int64_t>(tokens_per_image.size()));
  PromptBuilder b(seed, config.text.vocab_size);
  b.reserve(config);
  b.tok(kImStart);
  b.tok(kTokUser);
  b.tok(kTokNewline);
  b.images(tokens_per_image, config);
  b.text(std::max<int64_t>(1, target_tokens - fixed));
  b.tok(kImEnd);
  b.tok(kTokNewline);
  b.tok(kImStart);
  b.tok(kTokAssistant);
  b.tok(kTokNewline);
  return b.finish();
}

Result<Prompt> alpamayo_prompt(uint64_t seed, int64_t target_tokens,
                               std::span<const int64_t> tokens_per_image,
                               std::span<const int32_t> history_ids, const AlpamayoConfig& config) {
  const auto n_hist = static_cast<int64_t>(history_ids.size());
  const int64_t fixed =
      alpamayo_fixed(sum(tokens_per_image), static_cast<int64_t>(tokens_per_image.size()), n_hist);
  PromptBuilder b(seed, config.vlm.text.vocab_size);
  b.reserve(config.vlm);
  b.tok(kImStart);
  b.tok(kTokSystem);
  b.tok(kTokNewline);
  b.text(kSystemTextTokens);
  b.tok(kImEnd);
  b.tok(kTokNewline);
  b.tok(kImStart);
  b.tok(kTokUser);
  b.tok(kTokNewline);
  b.images(tokens_per_image, config.vlm);
  b.tok(kTrajHistoryStart);
  for (int32_t id : history_ids) b.tok(id);
  b.tok(kTrajHistoryEnd);
  b.text(std::max<int64_t>(1, target_tokens - fixed));  // the instruction, stretched as filler
  b.tok(kImEnd);
  b.tok(kTokNewline);
  b.tok(kImStart);
  b.tok(kTokAssistant);
  b.tok(kTokNewline);
  b.tok(kCotStart);
  return b.finish();
}

}  // namespace ferry
