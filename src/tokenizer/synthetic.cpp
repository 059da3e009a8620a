#include "tokenizer/synthetic.h"

#include <array>
#include <unordered_set>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "format/atomic_write.h"
#include "tokenizer/byte_level.h"

namespace ferry {
namespace {

constexpr int64_t kQwenFirstAdded = 151643;

struct Added {
  std::string content;
  bool special;
  bool normalized;
};

// Qwen3's added tokens in id order; the flag: special (the tool, FIM and think markers are not).
const std::vector<std::pair<const char*, bool>>& qwen3_added() {
  static const std::vector<std::pair<const char*, bool>> list = {
      {"<|endoftext|>", true},      {"<|im_start|>", true},
      {"<|im_end|>", true},         {"<|object_ref_start|>", true},
      {"<|object_ref_end|>", true}, {"<|box_start|>", true},
      {"<|box_end|>", true},        {"<|quad_start|>", true},
      {"<|quad_end|>", true},       {"<|vision_start|>", true},
      {"<|vision_end|>", true},     {"<|vision_pad|>", true},
      {"<|image_pad|>", true},      {"<|video_pad|>", true},
      {"<tool_call>", false},       {"</tool_call>", false},
      {"<|fim_prefix|>", false},    {"<|fim_middle|>", false},
      {"<|fim_suffix|>", false},    {"<|fim_pad|>", false},
      {"<|repo_name|>", false},     {"<|file_sep|>", false},
      {"<tool_response>", false},   {"</tool_response>", false},
      {"<think>", false},           {"</think>", false}};
  return list;
}

// Alpamayo-R1's specials in the order they were added (spec §4.4; <|image_pad|> already exists).
constexpr std::array<const char*, 28> kAlpamayoKeys = {"prompt_start",
                                                       "prompt_end",
                                                       "image_start",
                                                       "image_pre_tkn",
                                                       "image_end",
                                                       "traj_history_start",
                                                       "traj_history_pre_tkn",
                                                       "traj_history_end",
                                                       "cot_start",
                                                       "cot_end",
                                                       "meta_action_start",
                                                       "meta_action_end",
                                                       "traj_future_start",
                                                       "traj_future_pre_tkn",
                                                       "traj_future_end",
                                                       "traj_history",
                                                       "traj_future",
                                                       "vectorized_wm",
                                                       "vectorized_wm_start",
                                                       "vectorized_wm_end",
                                                       "vectorized_wm_pre_tkn",
                                                       "route_start",
                                                       "route_pad",
                                                       "route_end",
                                                       "question_start",
                                                       "question_end",
                                                       "answer_start",
                                                       "answer_end"};
constexpr int64_t kTrajFutureStartIndex = 12;  // position of traj_future_start in the list

Status expect_id(const char* what, int64_t config_id, int64_t layout_id) {
  if (config_id == layout_id) return Status();
  return make_error(ErrorCode::unsupported,
                    std::string("synthetic tokenizer: the configuration puts ") + what + " at " +
                        std::to_string(config_id) + ", the Qwen layout at " +
                        std::to_string(layout_id));
}

// Id -> added token, from the configuration.
Result<std::vector<std::pair<int64_t, Added>>> added_layout(const ModelConfig& config) {
  const int64_t vocab = config.text().vocab_size;
  const auto& qwen = qwen3_added();
  const auto n_qwen = static_cast<int64_t>(qwen.size());
  // A text model smaller than Qwen's vocabulary keeps its added tokens at the top.
  int64_t first = config.vlm() ? kQwenFirstAdded : std::min(kQwenFirstAdded, vocab - n_qwen);
  if (first < 256) {
    return make_error(ErrorCode::unsupported,
                      "synthetic tokenizer: vocab_size " + std::to_string(vocab) +
                          " leaves no room for 256 byte tokens and the added tokens");
  }
  std::vector<std::pair<int64_t, Added>> out;
  for (int64_t k = 0; k < n_qwen; ++k) {
    out.push_back({first + k, Added{qwen[static_cast<size_t>(k)].first,
                                    qwen[static_cast<size_t>(k)].second, false}});
  }
  if (const Qwen3VLConfig* v = config.vlm()) {
    FERRY_RETURN_IF_ERROR(expect_id("<|image_pad|>", v->image_token_id, first + 12));
    FERRY_RETURN_IF_ERROR(expect_id("<|vision_start|>", v->vision_start_token_id, first + 9));
    FERRY_RETURN_IF_ERROR(expect_id("<|vision_end|>", v->vision_end_token_id, first + 10));
  }
  if (const AlpamayoConfig* a = config.alpamayo()) {
    FERRY_RETURN_IF_ERROR(expect_id("<i0>", a->traj_token_start_idx, first + n_qwen));
    // Not special: tokenizer.add_tokens() makes them ordinary added tokens, matched normalized.
    for (int64_t k = 0; k < a->traj_vocab_size; ++k) {
      out.push_back(
          {a->traj_token_start_idx + k, Added{"<i" + std::to_string(k) + ">", false, true}});
    }
    const int64_t base = a->traj_token_start_idx + a->traj_vocab_size;
    FERRY_RETURN_IF_ERROR(expect_id("<|traj_future_start|>", a->traj_future_start_token_id,
                                    base + kTrajFutureStartIndex));
    for (size_t k = 0; k < kAlpamayoKeys.size(); ++k) {
      out.push_back({base + static_cast<int64_t>(k),
                     Added{std::string("<|") + kAlpamayoKeys[k] + "|>", true, false}});
    }
  }
  if (out.back().first >= vocab) {
    return make_error(ErrorCode::unsupported,
                      "synthetic tokenizer: vocab_size " + std::to_string(vocab) +
                          " is too small for added token id " + std::to_string(out.back().first));
  }
  return out;
}

// `count` distinct byte strings: the 256 bytes (printable ASCII first), then joins of two earlier
// tokens taken diagonally (each new token with every older one, both orders), so short, common
// pieces come first. `merges[i]` makes token 256 + i.
void ordinary_tokens(size_t count, std::vector<std::string>& tokens,
                     std::vector<std::pair<size_t, size_t>>& merges) {
  for (unsigned b = 0x20; b < 0x7F; ++b) tokens.emplace_back(1, static_cast<char>(b));
  for (unsigned b = 0; b < 256; ++b) {
    if (b < 0x20 || b >= 0x7F) tokens.emplace_back(1, static_cast<char>(b));
  }
  std::unordered_set<std::string> seen(tokens.begin(), tokens.end());
  auto add = [&](size_t l, size_t r) {
    if (tokens.size() >= count) return;
    std::string s = tokens[l] + tokens[r];
    if (!seen.insert(s).second) return;
    tokens.push_back(std::move(s));
    merges.emplace_back(l, r);
  };
  for (size_t k = 0; tokens.size() < count; ++k) {
    for (size_t j = 0; j <= k && tokens.size() < count; ++j) {
      add(k, j);
      if (j != k) add(j, k);
    }
  }
}

std::string json_string(const std::string& s) {
  return nlohmann::json(s).dump();
}

}  // namespace

Result<std::string> synthetic_tokenizer_json(const ModelConfig& config) {
  FERRY_ASSIGN_OR_RETURN(auto added, added_layout(config));
  const int64_t vocab = config.text().vocab_size;
  std::vector<bool> taken(static_cast<size_t>(vocab), false);
  for (const auto& [id, a] : added) taken[static_cast<size_t>(id)] = true;
  std::vector<int64_t> ordinary_ids;  // in id order: token k of ordinary_tokens() gets ids[k]
  for (int64_t id = 0; id < vocab; ++id) {
    if (!taken[static_cast<size_t>(id)]) ordinary_ids.push_back(id);
  }
  std::vector<std::string> tokens;
  std::vector<std::pair<size_t, size_t>> merges;
  ordinary_tokens(ordinary_ids.size(), tokens, merges);

  std::vector<std::string> text(tokens.size());
  for (size_t k = 0; k < tokens.size(); ++k) text[k] = tok::bytes_to_byte_level(tokens[k]);
  std::string out;
  out.reserve(tokens.size() * 40);
  out += "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":[";
  for (size_t k = 0; k < added.size(); ++k) {
    const auto& [id, a] = added[k];
    out += k ? "," : "";
    out += "{\"id\":" + std::to_string(id) + ",\"content\":" + json_string(a.content) +
           ",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":" +
           (a.normalized ? "true" : "false") + ",\"special\":" + (a.special ? "true" : "false") +
           "}";
  }
  out +=
      "],\"normalizer\":{\"type\":\"NFC\"},\"pre_tokenizer\":{\"type\":\"Sequence\","
      "\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":";
  out += json_string(
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)");
  const std::string byte_level =
      "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":false,"
      "\"use_regex\":false}";
  out += "},\"behavior\":\"Isolated\",\"invert\":false}," + byte_level + "]},";
  out += "\"post_processor\":" + byte_level + ",\"decoder\":" + byte_level + ",";
  out +=
      "\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":null,"
      "\"continuing_subword_prefix\":\"\",\"end_of_word_suffix\":\"\",\"fuse_unk\":false,"
      "\"byte_fallback\":false,\"ignore_merges\":false,\"vocab\":{";
  for (size_t k = 0; k < tokens.size(); ++k) {
    out += k ? "," : "";
    out += json_string(text[k]) + ":" + std::to_string(ordinary_ids[k]);
  }
  out += "},\"merges\":[";
  for (size_t k = 0; k < merges.size(); ++k) {
    out += k ? "," : "";
    out += json_string(text[merges[k].first] + " " + text[merges[k].second]);
  }
  out += "]}}\n";
  return out;
}

Status write_synthetic_tokenizer(const std::string& dir, const ModelConfig& config) {
  FERRY_ASSIGN_OR_RETURN(std::string text, synthetic_tokenizer_json(config));
  return write_file_atomic(dir + "/tokenizer.json", text);
}

}  // namespace ferry
