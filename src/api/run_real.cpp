#include "api/run_real.h"

#include <algorithm>
#include <cinttypes>
#include <filesystem>

#include "api/llama_chat.h"
#include "api/prompt_ids.h"
#include "api/run_inputs.h"
#include "format/atomic_write.h"
#include "image/image.h"
#include "image/qwen_vl_preprocess.h"

namespace ferry::api {

namespace {

Error bad(const std::string& msg) {
  return make_error(ErrorCode::invalid_argument, msg);
}

Status check_flags(const ModelConfig& config, const RealInputFlags& f) {
  const std::string arch = architecture_name(config.arch);
  const bool prompt = f.prompt.has_value() || !f.prompt_file.empty();
  if (config.alpamayo() != nullptr) {
    if (prompt || f.system) {
      return bad(
          "--prompt/--system: Alpamayo-R1's prompt is fixed (spec §4.3); the frames and "
          "the ego history fill it");
    }
    if (f.frames.empty() || f.ego_history.empty()) {
      return bad("alpamayo-r1 takes --frames and --ego-history together");
    }
  } else {
    if (!f.ego_history.empty() || !f.ego_rotations.empty()) {
      return bad("--ego-history: only alpamayo-r1 takes an ego history, not " + arch);
    }
    if (config.vlm() == nullptr && !f.frames.empty()) {
      return bad("--frames: " + arch + " is a text-only model; it takes no images");
    }
    if (!prompt) return bad("give the prompt with --prompt TEXT or --prompt-file FILE");
    if (f.prompt && !f.prompt_file.empty()) return bad("give --prompt or --prompt-file, not both");
  }
  if (!f.ego_rotations.empty() && f.ego_history.empty()) {
    return bad("--ego-rotations goes with --ego-history");
  }
  if (!f.thinking && config.arch != Architecture::qwen3) {
    return bad("--no-thinking: only Qwen3 text models have a thinking switch");
  }
  return {};
}

// Decodes the frames (make_real_inputs checks that they share one size).
Result<std::vector<RgbImage>> decode_frames(const FrameSet& set, const DecodeLimits& limits) {
  std::vector<RgbImage> decoded;
  for (const std::string& path : set.paths) {
    FERRY_ASSIGN_OR_RETURN(RgbImage img, read_image(path, limits));
    decoded.push_back(std::move(img));
  }
  return decoded;
}

// The parts the model takes, and nothing else: what check_flags says in flags' terms, for
// inputs handed over in memory.
Status check_parts(const ModelConfig& config, const InputParts& p) {
  const std::string arch = architecture_name(config.arch);
  if (p.frame_names.size() != p.frames.size()) {
    return make_error(ErrorCode::internal, "inputs: a name for every frame");
  }
  if (config.alpamayo() != nullptr) {
    if (p.chat) return bad("alpamayo-r1's prompt is fixed (spec §4.3): it takes no prompt");
    if (p.frames.empty() || !p.history) {
      return bad("alpamayo-r1 takes frames and an ego history together");
    }
    if (static_cast<int64_t>(p.frames.size()) != kAlpamayoFrames) {
      return bad("alpamayo-r1 takes " + std::to_string(kAlpamayoFrames) +
                 " frames (4 cameras x 4 times, camera-major), got " +
                 std::to_string(p.frames.size()));
    }
    if (p.front && (*p.front < 0 || *p.front >= kAlpamayoFrames)) {
      return bad("front frame " + std::to_string(*p.front) + " is not one of the 16");
    }
    return {};
  }
  if (p.history) return bad("ego history: only alpamayo-r1 takes one, not " + arch);
  if (config.vlm() == nullptr && !p.frames.empty()) {
    return bad("frames: " + arch + " is a text-only model; it takes no images");
  }
  if (!p.chat) return bad(arch + " takes a prompt");
  return {};
}

// Every frame must have the first one's size.
Status check_one_size(const InputParts& p) {
  for (size_t i = 1; i < p.frames.size(); ++i) {
    const RgbImage& a = p.frames[0];
    const RgbImage& b = p.frames[i];
    if (b.height != a.height || b.width != a.width) {
      return bad(p.frame_names[i] + ": " + std::to_string(b.height) + "x" +
                 std::to_string(b.width) + " pixels, but " + p.frame_names[0] + " is " +
                 std::to_string(a.height) + "x" + std::to_string(a.width) +
                 "; every frame must have one size");
    }
  }
  return {};
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

bool has_extension(const std::string& path, std::string_view ext) {
  std::string e = std::filesystem::path(path).extension().string();
  std::transform(e.begin(), e.end(), e.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return e == ext;
}

}  // namespace

namespace {

// The most tokens generated when --max-tokens is not given: the model's default, shrunk to the
// room the context leaves.
int64_t default_max_tokens(const ModelConfig& config, int64_t prompt_tokens) {
  int64_t max_tokens = config.alpamayo() != nullptr ? kAlpamayoMaxTokens : kTextMaxTokens;
  const int64_t context = config.text().max_position_embeddings;
  if (context > prompt_tokens) max_tokens = std::min(max_tokens, context - prompt_tokens);
  return max_tokens;
}

// --prompt-ids: the ids as they are, no stop token.
Result<RealInputs> prompt_id_inputs(const std::string& model_dir, const ModelConfig& config,
                                    const RealInputFlags& flags) {
  const std::string arch = architecture_name(config.arch);
  if (config.alpamayo() != nullptr || !flags.frames.empty() || !flags.ego_history.empty()) {
    return bad("--prompt-ids: text prompts only (" + arch +
               " with frames or an ego history "
               "builds its prompt from them)");
  }
  if (flags.prompt || !flags.prompt_file.empty() || flags.system || !flags.thinking) {
    return bad("--prompt-ids replaces --prompt, --prompt-file, --system and --no-thinking");
  }
  RealInputs out;
  std::error_code ec;
  if (std::filesystem::is_regular_file(model_dir + "/tokenizer.json", ec)) {
    FERRY_ASSIGN_OR_RETURN(out.tokenizer, Tokenizer::load_dir(model_dir));
  }
  FERRY_ASSIGN_OR_RETURN(out.inputs.prompt,
                         parse_prompt_ids(flags.prompt_ids, config.text().vocab_size));
  const auto n = static_cast<int64_t>(out.inputs.prompt.size());
  const int64_t max_tokens =
      flags.max_tokens > 0 ? flags.max_tokens : default_max_tokens(config, n);
  FERRY_ASSIGN_OR_RETURN(out.workload, workload_for_inputs(config, out.inputs, max_tokens));
  return out;
}

}  // namespace

Result<RealInputs> load_real_inputs(const std::string& model_dir, const ModelConfig& config,
                                    const RealInputFlags& flags) {
  if (!flags.prompt_ids.empty()) return prompt_id_inputs(model_dir, config, flags);
  FERRY_RETURN_IF_ERROR(check_flags(config, flags));
  const AlpamayoConfig* alpamayo = config.alpamayo();
  FERRY_ASSIGN_OR_RETURN(Tokenizer tokenizer, Tokenizer::load_dir(model_dir));
  InputParts parts;
  if (!flags.frames.empty()) {
    FERRY_RETURN_IF_ERROR(
        read_frames(model_dir, flags.frames, alpamayo != nullptr ? kAlpamayoFrames : 0, parts));
  }
  if (alpamayo != nullptr) {
    FERRY_ASSIGN_OR_RETURN(parts.history, read_ego_history(flags.ego_history, flags.ego_rotations));
  } else {
    ChatRequest chat;
    chat.system = flags.system;
    chat.thinking = flags.thinking;
    if (flags.prompt) {
      chat.user = *flags.prompt;
    } else {
      FERRY_ASSIGN_OR_RETURN(chat.user, read_text_file(flags.prompt_file, kMaxPromptBytes));
    }
    parts.chat = std::move(chat);
  }
  parts.max_tokens = flags.max_tokens;
  FERRY_ASSIGN_OR_RETURN(PreparedInputs p,
                         make_real_inputs(tokenizer, model_dir, config, std::move(parts)));
  return RealInputs{std::move(tokenizer), std::move(p.inputs), p.workload, std::move(p.scene)};
}

Status read_frames(const std::string& model_dir, const std::string& path, int64_t count,
                   InputParts& parts) {
  FERRY_ASSIGN_OR_RETURN(FrameSet set, read_frame_set(path, count));
  FERRY_ASSIGN_OR_RETURN(VisionPreprocessConfig pre, load_preprocessor_config(model_dir));
  FERRY_ASSIGN_OR_RETURN(parts.frames, decode_frames(set, pre.limits));
  parts.frame_names = std::move(set.paths);
  parts.front = set.front;
  parts.camera = set.camera;
  return {};
}

Result<PreparedInputs> make_real_inputs(const Tokenizer& tokenizer, const std::string& model_dir,
                                        const ModelConfig& config, InputParts parts) {
  FERRY_RETURN_IF_ERROR(check_parts(config, parts));
  FERRY_RETURN_IF_ERROR(check_one_size(parts));
  const AlpamayoConfig* alpamayo = config.alpamayo();
  PreprocessedImages images;
  std::optional<TrajectoryScene> scene;
  if (!parts.frames.empty()) {
    FERRY_ASSIGN_OR_RETURN(VisionPreprocessConfig pre, load_preprocessor_config(model_dir));
    if (alpamayo != nullptr) {
      // AR1/helper.py:get_processor overrides the processor's pixel bounds (spec §4.2).
      const VisionPreprocessConfig ar = VisionPreprocessConfig::alpamayo_r1();
      pre.min_pixels = ar.min_pixels;
      pre.max_pixels = ar.max_pixels;
    }
    FERRY_RETURN_IF_ERROR(check_preprocess_matches(pre, config.vlm()->vision));
    FERRY_ASSIGN_OR_RETURN(images, preprocess_decoded(parts.frames, pre));
    if (alpamayo != nullptr) {
      scene.emplace();
      scene->front =
          std::move(parts.frames[static_cast<size_t>(parts.front.value_or(kAlpamayoFrontFrame))]);
      scene->camera = parts.camera;
      scene->dt = alpamayo->action_space.dt;
    }
  }
  ModelInputs inputs;
  if (alpamayo != nullptr) {
    for (const auto& p : parts.history->xyz) scene->history.push_back(p);
    FERRY_ASSIGN_OR_RETURN(
        inputs, alpamayo_inputs(tokenizer, *alpamayo, std::move(images), *parts.history));
  } else if (config.arch == Architecture::llama) {
    FERRY_ASSIGN_OR_RETURN(LlamaChat chat, load_llama_chat(model_dir));
    FERRY_ASSIGN_OR_RETURN(inputs, llama_chat_inputs(tokenizer, chat, *parts.chat));
  } else {
    FERRY_ASSIGN_OR_RETURN(inputs, chat_inputs(tokenizer, config, *parts.chat, std::move(images)));
  }
  int64_t max_tokens = parts.max_tokens;
  if (max_tokens <= 0) {
    // A default never makes a prompt too long: it shrinks to the room the context leaves.
    max_tokens = default_max_tokens(config, static_cast<int64_t>(inputs.prompt.size()));
  }
  FERRY_ASSIGN_OR_RETURN(Workload w, workload_for_inputs(config, inputs, max_tokens));
  return PreparedInputs{std::move(inputs), w, std::move(scene)};
}

void TextPrinter::push(int32_t id) {
  // An id the tokenizer lacks (a model's vocabulary may be padded past it) prints as U+FFFD.
  Result<std::string> piece = decoder_.push(id);
  std::fputs(piece.ok() ? piece->c_str() : "\xef\xbf\xbd", out_);
  std::fflush(out_);
}

void TextPrinter::finish() {
  std::fputs((decoder_.finish() + "\n").c_str(), out_);
  std::fflush(out_);
}

namespace {

// Tokenizer::decode, with U+FFFD for each id the tokenizer lacks instead of an error.
Result<std::string> decode_lossy(const Tokenizer& tokenizer, std::span<const int32_t> ids,
                                 bool skip_special) {
  std::string out;
  size_t run = 0;
  for (size_t i = 0; i <= ids.size(); ++i) {
    if (i < ids.size() && tokenizer.id_to_token(ids[i])) continue;
    FERRY_ASSIGN_OR_RETURN(std::string piece,
                           tokenizer.decode(ids.subspan(run, i - run), skip_special));
    out += piece;
    if (i < ids.size()) out += "\xef\xbf\xbd";
    run = i + 1;
  }
  return out;
}

}  // namespace

Result<GeneratedText> generated_text(const Tokenizer& tokenizer, const StopRule& stop,
                                     const InferenceResult& r) {
  GeneratedText g;
  FERRY_ASSIGN_OR_RETURN(g.text, decode_lossy(tokenizer, r.tokens, false));
  const bool future = stop.stop_after && std::find(r.tokens.begin(), r.tokens.end(),
                                                   *stop.stop_after) != r.tokens.end();
  const bool end_of_turn =
      !r.tokens.empty() && std::find(stop.stop_tokens.begin(), stop.stop_tokens.end(),
                                     r.tokens.back()) != stop.stop_tokens.end();
  g.stop = future ? "traj_future_start" : end_of_turn ? "end_of_turn" : "max_tokens";
  if (stop.stop_after) {
    // The chain of causation: what comes before <|cot_end|>.
    const std::optional<int32_t> cot_end = tokenizer.token_to_id("<|cot_end|>");
    auto end = r.tokens.end();
    if (cot_end) end = std::find(r.tokens.begin(), r.tokens.end(), *cot_end);
    const std::vector<int32_t> cot(r.tokens.begin(), end);
    FERRY_ASSIGN_OR_RETURN(g.reasoning, decode_lossy(tokenizer, cot, /*skip_special=*/true));
    const auto first = g.reasoning.find_first_not_of(" \n\t");
    const auto last = g.reasoning.find_last_not_of(" \n\t");
    g.reasoning = first == std::string::npos ? "" : g.reasoning.substr(first, last - first + 1);
  }
  return g;
}

Status check_output_path(const std::string& flag, const std::string& path,
                         std::initializer_list<std::string_view> extensions) {
  bool ok = false;
  std::string names;
  for (std::string_view e : extensions) {
    ok = ok || has_extension(path, e);
    names += (names.empty() ? "" : " or ") + std::string(e);
  }
  if (!ok) return bad(flag + ": name a " + names + " file, got " + path);
  std::error_code ec;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty() && !std::filesystem::is_directory(parent, ec)) {
    return bad(flag + ": folder " + parent.string() + " does not exist");
  }
  return {};
}

Status write_trajectory(const std::string& path, const InferenceResult& r, double dt) {
  if (r.trajectory_xyz.empty()) return bad("--trajectory: this run made no trajectory");
  std::string out;
  if (has_extension(path, ".csv")) {
    out = "t,x,y,z,yaw\n";
    for (size_t i = 0; i < r.trajectory_xyz.size(); ++i) {
      const auto& p = r.trajectory_xyz[i];
      out += number(dt * static_cast<double>(i + 1)) + "," + number(p[0]) + "," + number(p[1]) +
             "," + number(p[2]) + "," + number(r.trajectory_yaw[i]) + "\n";
    }
  } else {
    out = "{\"frame\": \"t0 ego frame: x forward, y left, z up (m); yaw (rad)\",\n \"dt\": " +
          number(dt) + ",\n \"waypoints\": [\n";
    for (size_t i = 0; i < r.trajectory_xyz.size(); ++i) {
      const auto& p = r.trajectory_xyz[i];
      out += std::string(i ? ",\n" : "") + "  {\"t\": " + number(dt * static_cast<double>(i + 1)) +
             ", \"x\": " + number(p[0]) + ", \"y\": " + number(p[1]) + ", \"z\": " + number(p[2]) +
             ", \"yaw\": " + number(r.trajectory_yaw[i]) + "}";
    }
    out += "\n ]\n}\n";
  }
  return write_file_atomic(path, out);
}

Status write_picture(const std::string& path, TrajectoryScene scene, const InferenceResult& r) {
  scene.trajectory = r.trajectory_xyz;
  if (has_extension(path, ".svg")) {
    FERRY_ASSIGN_OR_RETURN(std::string svg, trajectory_svg(scene));
    return write_file_atomic(path, svg);
  }
  FERRY_ASSIGN_OR_RETURN(RgbImage picture, draw_trajectory_picture(scene));
  FERRY_ASSIGN_OR_RETURN(std::string png, encode_png(picture));
  return write_file_atomic(path, png);
}

}  // namespace ferry::api
