// `ferry run` on real inputs (docs/inputs.md): the flags that name them, turning them into a
// model's inputs and the workload that sizes its session, printing text as it is generated, and
// writing what comes out (the trajectory as JSON or CSV, the picture as PNG or SVG).
#pragma once

#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/chat_prompt.h"
#include "core/status.h"
#include "image/image.h"
#include "image/trajectory_picture.h"
#include "model/config.h"
#include "model/ego_history.h"
#include "model/inference.h"
#include "model/model_inputs.h"
#include "model/workload.h"
#include "tokenizer/tokenizer.h"

namespace ferry::api {

struct RealInputFlags {
  std::string frames;                 // --frames: a folder or a manifest
  std::string ego_history;            // --ego-history
  std::string ego_rotations;          // --ego-rotations
  std::optional<std::string> prompt;  // --prompt
  std::string prompt_file;            // --prompt-file
  std::optional<std::string> system;  // --system
  std::string prompt_ids;             // --prompt-ids: "1,2,3" or a .npy / .json file (prompt_ids.h)
  bool thinking = true;               // --no-thinking clears it
  int64_t max_tokens = 0;             // --max-tokens (0: the default for the model)

  bool any() const {
    return !frames.empty() || !ego_history.empty() || !ego_rotations.empty() || prompt ||
           !prompt_file.empty() || system || !prompt_ids.empty();
  }
};

// Alpamayo-R1 generates at most this many tokens unless told otherwise (the official test
// script's max_generation_length); text models 512.
inline constexpr int64_t kAlpamayoMaxTokens = 256;
inline constexpr int64_t kTextMaxTokens = 512;
inline constexpr size_t kMaxPromptBytes = 4 << 20;

struct RealInputs {
  std::optional<Tokenizer> tokenizer;  // absent only for --prompt-ids without a tokenizer.json
  ModelInputs inputs;
  Workload workload;
  std::optional<TrajectoryScene> scene;  // Alpamayo: the front frame, camera and history
};

// Reads and checks everything the flags name: the tokenizer of `model_dir`, the frames
// (decoded, preprocessed with the model's processor settings), the ego history, the prompt.
// --prompt-ids (text models) feeds its ids as they are and generates exactly max_tokens (no
// stop token: the same count as another runtime asked for that many), with the tokenizer only
// for printing the text when the folder has one.
Result<RealInputs> load_real_inputs(const std::string& model_dir, const ModelConfig& config,
                                    const RealInputFlags& flags);

// Real inputs once read, from files (load_real_inputs) or handed over in memory (the Python
// module, python/): what make_real_inputs turns into a model's inputs.
struct InputParts {
  std::vector<RgbImage> frames;          // decoded, in the order the model takes them
  std::vector<std::string> frame_names;  // one per frame, for errors: its path or "frames[3]"
  std::optional<int64_t> front;          // Alpamayo: the frame the picture draws on (default 7)
  CameraModel camera;
  std::optional<EgoHistory> history;  // Alpamayo
  std::optional<ChatRequest> chat;    // text and Qwen3-VL models
  int64_t max_tokens = 0;             // 0: the default for the model
};

struct PreparedInputs {
  ModelInputs inputs;
  Workload workload;  // sized exactly for `inputs`
  std::optional<TrajectoryScene> scene;
};

// Reads the frames `path` names (read_frame_set: a folder or a manifest; exactly `count` when
// > 0) and decodes them with `model_dir`'s decode limits into `parts`.
Status read_frames(const std::string& model_dir, const std::string& path, int64_t count,
                   InputParts& parts);

// Checks `parts` against the model (which parts it takes, 16 frames of one size for
// Alpamayo-R1), preprocesses the frames with `model_dir`'s processor settings and builds the
// prompt with `tokenizer`. Every error is invalid_argument or the reader's, never a crash.
Result<PreparedInputs> make_real_inputs(const Tokenizer& tokenizer, const std::string& model_dir,
                                        const ModelConfig& config, InputParts parts);

// Prints generated text to `out` as it comes (Tokenizer's StreamDecoder; special tokens left
// out), flushing each piece.
class TextPrinter {
 public:
  TextPrinter(const Tokenizer& tokenizer, std::FILE* out) : decoder_(tokenizer, true), out_(out) {}
  void push(int32_t id);
  void finish();

 private:
  StreamDecoder decoder_;
  std::FILE* out_;
};

// What a run generated, as text: `text` the whole generation with special tokens, `reasoning`
// (Alpamayo) the text before <|cot_end|> without them; `stop` why generation ended:
// "traj_future_start", "end_of_turn" or "max_tokens".
struct GeneratedText {
  std::string text;
  std::string reasoning;
  std::string stop;
};
Result<GeneratedText> generated_text(const Tokenizer& tokenizer, const StopRule& stop,
                                     const InferenceResult& r);

// An output flag's file: one of `extensions` (".json", ...), in a folder that exists; checked
// before the run, so a long run does not end in a file that cannot be written.
Status check_output_path(const std::string& flag, const std::string& path,
                         std::initializer_list<std::string_view> extensions);

// The trajectory as JSON ({"dt": .., "waypoints": [{"t", "x", "y", "z", "yaw"}, ...]}) or CSV
// (t,x,y,z,yaw), by the file's extension (.json, .csv); written atomically.
Status write_trajectory(const std::string& path, const InferenceResult& r, double dt);
// The picture (image/trajectory_picture.h) as .png or .svg, by extension; written atomically.
Status write_picture(const std::string& path, TrajectoryScene scene, const InferenceResult& r);

}  // namespace ferry::api
