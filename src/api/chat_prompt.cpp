#include "api/chat_prompt.h"

#include <algorithm>
#include <string>

namespace ferry {

namespace {

constexpr std::string_view kImStart = "<|im_start|>";
constexpr std::string_view kImEnd = "<|im_end|>";
constexpr std::string_view kImagePad = "<|image_pad|>";

Error bad(const std::string& msg) {
  return make_error(ErrorCode::invalid_argument, msg);
}

// "<|im_start|>ROLE\n"
std::string turn_start(std::string_view role) {
  return std::string(kImStart) + std::string(role) + "\n";
}

std::string turn_end() {
  return std::string(kImEnd) + "\n";
}

std::string system_turn(const ChatRequest& chat) {
  return chat.system ? turn_start("system") + *chat.system + turn_end() : std::string();
}

std::string images_text(int64_t images) {
  std::string s;
  for (int64_t i = 0; i < images; ++i)
    s += "<|vision_start|>" + std::string(kImagePad) + "<|vision_end|>";
  return s;
}

// The id of a special token the prompt needs, checked against the id the config expects.
Result<int32_t> special_id(const Tokenizer& tokenizer, std::string_view token,
                           std::optional<int64_t> expected = std::nullopt) {
  const std::optional<int32_t> id = tokenizer.token_to_id(token);
  if (!id) {
    return make_error(ErrorCode::format, "tokenizer.json has no " + std::string(token) +
                                             ": not this model's tokenizer");
  }
  if (expected && *id != *expected) {
    return make_error(ErrorCode::format, "tokenizer.json puts " + std::string(token) + " at " +
                                             std::to_string(*id) + ", config.json at " +
                                             std::to_string(*expected));
  }
  return *id;
}

// <|im_end|> and <|endoftext|>: where Qwen's generation configs stop.
Result<std::vector<int32_t>> end_of_turn_ids(const Tokenizer& tokenizer) {
  FERRY_ASSIGN_OR_RETURN(int32_t im_end, special_id(tokenizer, kImEnd));
  FERRY_ASSIGN_OR_RETURN(int32_t eos, special_id(tokenizer, "<|endoftext|>"));
  return std::vector<int32_t>{im_end, eos};
}

Status check_images_fit(const PreprocessedImages& images, const VisionConfig& vision) {
  if (images.grid_thw.empty()) return {};
  if (images.patch_values != vision.patch_values()) {
    return bad("images: " + std::to_string(images.patch_values) +
               " values per patch, the vision tower takes " +
               std::to_string(vision.patch_values()));
  }
  for (const auto& g : images.grid_thw) {
    if (g[1] % vision.spatial_merge_size != 0 || g[2] % vision.spatial_merge_size != 0) {
      return bad("images: a grid of " + std::to_string(g[1]) + "x" + std::to_string(g[2]) +
                 " patches is not a multiple of the merge size");
    }
  }
  return {};
}

}  // namespace

std::string qwen3_chat_text(const ChatRequest& chat) {
  std::string s =
      system_turn(chat) + turn_start("user") + chat.user + turn_end() + turn_start("assistant");
  if (!chat.thinking) s += "<think>\n\n</think>\n\n";
  return s;
}

std::string qwen3_vl_chat_text(const ChatRequest& chat, int64_t images) {
  return system_turn(chat) + turn_start("user") + images_text(images) + chat.user + turn_end() +
         turn_start("assistant");
}

std::string alpamayo_chat_text(int64_t images, int64_t history_tokens) {
  std::string history = "<|traj_history_start|>";
  for (int64_t i = 0; i < history_tokens; ++i) history += "<|traj_history|>";
  history += "<|traj_history_end|>";
  // The assistant turn is continued (continue_final_message): it ends at <|cot_start|>.
  return turn_start("system") + std::string(kAlpamayoSystem) + turn_end() + turn_start("user") +
         images_text(images) + history + std::string(kAlpamayoInstruction) + turn_end() +
         turn_start("assistant") + "<|cot_start|>";
}

std::vector<int64_t> image_token_counts(std::span<const std::array<int64_t, 3>> grid_thw,
                                        int64_t merge) {
  std::vector<int64_t> n;
  for (const auto& g : grid_thw) n.push_back(g[0] * g[1] * g[2] / (merge * merge));
  return n;
}

Result<Prompt> tokenize_and_expand(const Tokenizer& tokenizer, std::string_view text,
                                   int32_t image_pad, std::span<const int64_t> tokens_per_image) {
  FERRY_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tokenizer.encode(text));
  const auto pads = std::count(ids.begin(), ids.end(), image_pad);
  if (pads != static_cast<std::ptrdiff_t>(tokens_per_image.size())) {
    return bad("prompt: " + std::to_string(pads) + " image placeholders for " +
               std::to_string(tokens_per_image.size()) + " images");
  }
  int64_t total = static_cast<int64_t>(ids.size()) - pads;
  for (int64_t n : tokens_per_image) {
    if (n < 1 || n > kMaxSequence)
      return bad("prompt: an image of " + std::to_string(n) + " tokens");
    total += n;
  }
  if (total > kMaxSequence) {
    return bad("prompt: " + std::to_string(total) + " tokens, more than ferry's limit of " +
               std::to_string(kMaxSequence));
  }
  Prompt p;
  p.ids.reserve(static_cast<size_t>(total));
  size_t image = 0;
  for (int32_t id : ids) {
    if (id != image_pad) {
      p.ids.push_back(id);
      continue;
    }
    for (int64_t k = 0; k < tokens_per_image[image]; ++k) {
      p.image_rows.push_back(static_cast<int32_t>(p.ids.size()));
      p.ids.push_back(image_pad);
    }
    ++image;
  }
  return p;
}

Status fuse_history(std::vector<int32_t>& ids, int32_t placeholder,
                    std::span<const int32_t> history) {
  const auto n = std::count(ids.begin(), ids.end(), placeholder);
  if (n != static_cast<std::ptrdiff_t>(history.size())) {
    return bad("prompt: " + std::to_string(n) + " ego-history placeholders for " +
               std::to_string(history.size()) + " history tokens");
  }
  size_t k = 0;
  for (int32_t& id : ids) {
    if (id == placeholder) id = history[k++];
  }
  return {};
}

Result<ModelInputs> alpamayo_inputs(const Tokenizer& tokenizer, const AlpamayoConfig& config,
                                    PreprocessedImages images, const EgoHistory& history) {
  const Qwen3VLConfig& vlm = config.vlm;
  FERRY_RETURN_IF_ERROR(check_images_fit(images, vlm.vision));
  if (config.tokens_per_history_traj != kHistoryTokens) {
    return make_error(ErrorCode::unsupported, "alpamayo: tokens_per_history_traj " +
                                                  std::to_string(config.tokens_per_history_traj) +
                                                  ", ferry knows " +
                                                  std::to_string(kHistoryTokens));
  }
  FERRY_ASSIGN_OR_RETURN(int32_t pad, special_id(tokenizer, kImagePad, vlm.image_token_id));
  FERRY_ASSIGN_OR_RETURN(int32_t placeholder, special_id(tokenizer, "<|traj_history|>"));
  FERRY_ASSIGN_OR_RETURN(int32_t future_start, special_id(tokenizer, "<|traj_future_start|>",
                                                          config.traj_future_start_token_id));
  const auto n_images = static_cast<int64_t>(images.grid_thw.size());
  const std::vector<int64_t> counts =
      image_token_counts(images.grid_thw, vlm.vision.spatial_merge_size);
  FERRY_ASSIGN_OR_RETURN(
      Prompt p,
      tokenize_and_expand(tokenizer, alpamayo_chat_text(n_images, kHistoryTokens), pad, counts));
  const std::array<int32_t, kHistoryTokens> hist = history_tokens(history);
  FERRY_RETURN_IF_ERROR(fuse_history(p.ids, placeholder, hist));
  ModelInputs in;
  in.prompt = std::move(p.ids);
  in.pixel_values = std::move(images.pixel_values);
  in.image_grid_thw = std::move(images.grid_thw);
  in.history = history;
  FERRY_ASSIGN_OR_RETURN(in.stop.stop_tokens, end_of_turn_ids(tokenizer));
  in.stop.stop_after = future_start;
  return in;
}

Result<ModelInputs> chat_inputs(const Tokenizer& tokenizer, const ModelConfig& config,
                                const ChatRequest& chat, PreprocessedImages images) {
  if (config.alpamayo() != nullptr) {
    return bad("prompt: Alpamayo-R1's prompt is fixed (the frames and the ego history fill it)");
  }
  ModelInputs in;
  FERRY_ASSIGN_OR_RETURN(in.stop.stop_tokens, end_of_turn_ids(tokenizer));
  const Qwen3VLConfig* vlm = config.vlm();
  if (vlm == nullptr) {
    if (!images.grid_thw.empty()) return bad("images: a text model takes no images");
    FERRY_ASSIGN_OR_RETURN(in.prompt, tokenizer.encode(qwen3_chat_text(chat)));
    return in;
  }
  FERRY_RETURN_IF_ERROR(check_images_fit(images, vlm->vision));
  FERRY_ASSIGN_OR_RETURN(int32_t pad, special_id(tokenizer, kImagePad, vlm->image_token_id));
  const auto n_images = static_cast<int64_t>(images.grid_thw.size());
  FERRY_ASSIGN_OR_RETURN(
      Prompt p,
      tokenize_and_expand(tokenizer, qwen3_vl_chat_text(chat, n_images), pad,
                          image_token_counts(images.grid_thw, vlm->vision.spatial_merge_size)));
  in.prompt = std::move(p.ids);
  in.pixel_values = std::move(images.pixel_values);
  in.image_grid_thw = std::move(images.grid_thw);
  return in;
}

Result<Workload> workload_for_inputs(const ModelConfig& config, const ModelInputs& inputs,
                                     int64_t max_tokens) {
  Workload w;
  w.num_images = static_cast<int64_t>(inputs.image_grid_thw.size());
  if (w.num_images > 0) {
    const VisionConfig& v = config.vlm()->vision;
    const auto& g0 = inputs.image_grid_thw.front();
    for (const auto& g : inputs.image_grid_thw) {
      if (g != g0) {
        return bad("images: sizes differ (" + std::to_string(g0[1] * v.patch_size) + "x" +
                   std::to_string(g0[2] * v.patch_size) + " and " +
                   std::to_string(g[1] * v.patch_size) + "x" + std::to_string(g[2] * v.patch_size) +
                   " after resizing); every frame must have the same size");
      }
    }
    w.image_height = g0[1] * v.patch_size;
    w.image_width = g0[2] * v.patch_size;
  }
  w.prompt_tokens = static_cast<int64_t>(inputs.prompt.size());
  w.gen_tokens = max_tokens;
  if (const AlpamayoConfig* a = config.alpamayo()) w.flow_steps = a->diffusion.num_inference_steps;
  const int64_t context = config.text().max_position_embeddings;
  if (context > 0 && (w.prompt_tokens > context || max_tokens > context - w.prompt_tokens)) {
    return bad("prompt: " + std::to_string(w.prompt_tokens) + " tokens plus up to " +
               std::to_string(max_tokens) + " generated exceed the model's context of " +
               std::to_string(context) + " tokens");
  }
  FERRY_RETURN_IF_ERROR(validate_workload(w, config));
  return w;
}

}  // namespace ferry
