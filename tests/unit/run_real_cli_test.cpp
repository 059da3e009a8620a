// `ferry run` on real inputs through the binary: 16 frames and an ego history on alpamayo-tiny
// (text, trajectory file and picture out), a prompt on qwen3-tiny, and a one-line error for
// each bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "api/chat_prompt.h"
#include "cli_runner.h"
#include "format/atomic_write.h"
#include "image/image.h"
#include "model/presets.h"
#include "text_test_model.h"
#include "tokenizer/synthetic.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A frame with a gradient that differs per index, as PNG.
std::string frame_png(int index, int64_t h, int64_t w) {
  RgbImage img;
  img.height = h;
  img.width = w;
  img.planes.resize(3 * img.plane_size());
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) {
      const auto i = static_cast<size_t>(y * w + x);
      img.plane(0)[i] = static_cast<uint8_t>((x * 255) / w);
      img.plane(1)[i] = static_cast<uint8_t>((y * 255) / h);
      img.plane(2)[i] = static_cast<uint8_t>(index * 15);
    }
  }
  return encode_png(img).value();
}

class RealRun : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = fs::temp_directory_path() / ("ferry_real_" + std::to_string(::getpid()));
    for (const char* name : {"alpamayo-tiny", "qwen3-tiny"}) {
      const ModelConfig c = preset(name).value();
      const std::string dir = (root_ / name).string();
      ASSERT_TRUE(testing::write_test_checkpoint(dir, c, 2).ok());
      ASSERT_TRUE(write_synthetic_tokenizer(dir, c).ok());
    }
    fs::create_directories(root_ / "frames");
    for (int i = 0; i < 16; ++i) {
      char name[16];
      std::snprintf(name, sizeof name, "%02d.png", i);
      ASSERT_TRUE(
          write_file_atomic((root_ / "frames" / name).string(), frame_png(i, 180, 320)).ok());
    }
    std::string xyz = "{\"xyz\": [";
    for (int k = 0; k < 16; ++k) {
      xyz += std::string(k ? "," : "") + "[" + std::to_string(0.8 * (k - 15)) + ", " +
             std::to_string(0.002 * (k - 15) * (k - 15)) + ", 0.0]";
    }
    std::ofstream(root_ / "history.json") << xyz + "]}";
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }

  static testing::CliRun alpamayo(const std::string& args) {
    return testing::run_ferry("run --backend cpu --quiet --model " +
                              (root_ / "alpamayo-tiny").string() + " " + args);
  }
  static testing::CliRun qwen(const std::string& args) {
    return testing::run_ferry("run --backend cpu --quiet --model " +
                              (root_ / "qwen3-tiny").string() + " " + args);
  }
  static std::string path(const std::string& name) { return (root_ / name).string(); }

  // A failure: exit 2, nothing on stdout, one line on stderr holding `expect`.
  static void expect_one_line_error(const testing::CliRun& r, const std::string& expect) {
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_FALSE(r.signaled);
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_NE(r.err.find(expect), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }

  static fs::path root_;
};

fs::path RealRun::root_;

TEST_F(RealRun, AlpamayoFramesAndHistoryGiveTextTrajectoryAndPicture) {
  const auto r = alpamayo("--frames " + path("frames") + " --ego-history " + path("history.json") +
                          " --max-tokens 6 --seed 3 --json --trajectory " + path("t.json") +
                          " --picture " + path("p.png") + " --dump-inputs " + path("dump"));
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const auto tokens = j["tokens"].get<std::vector<int32_t>>();
  EXPECT_GE(tokens.size(), 1u);
  EXPECT_LE(tokens.size(), 6u);
  EXPECT_TRUE(j["text"].is_string());
  EXPECT_TRUE(j["reasoning"].is_string());
  EXPECT_TRUE(j["stop"] == "max_tokens" || j["stop"] == "end_of_turn" ||
              j["stop"] == "traj_future_start")
      << j["stop"];
  // 16 frames of 180x320 become 320x544 (Alpamayo's pixel bounds): 170 tokens each.
  const auto prompt = j["prompt_tokens"].get<int64_t>();
  EXPECT_GT(prompt, 16 * 170 + 48);
  ASSERT_EQ(j["trajectory_xyz"].size(), 64u);

  const auto traj = nlohmann::json::parse(read_file(path("t.json")));
  ASSERT_EQ(traj["waypoints"].size(), 64u);
  EXPECT_NEAR(traj["waypoints"][63]["t"].get<double>(), 6.4, 1e-9);
  EXPECT_EQ(traj["waypoints"][10]["x"].get<float>(), j["trajectory_xyz"][10][0].get<float>());

  const std::string png = read_file(path("p.png"));
  auto picture = decode_image(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(png.data()), png.size()), "p.png");
  ASSERT_TRUE(picture.ok()) << picture.error().to_string();
  EXPECT_EQ(picture->height, 512);
  EXPECT_EQ(picture->width, 910 + 512);  // the 320x180 front frame scaled to 512 high

  // The dumped prompt is the template with 16 x 170 image tokens (get_rope_index's input).
  const std::string ids = read_file(path("dump/input_ids.npy"));
  EXPECT_NE(ids.find("'shape': (1, " + std::to_string(prompt) + ")"), std::string::npos);
  const std::string grids = read_file(path("dump/image_grid_thw.npy"));
  EXPECT_NE(grids.find("'shape': (16, 3)"), std::string::npos);
}

TEST_F(RealRun, AlpamayoTextModeStreamsAndWritesCsvAndSvg) {
  const auto r = alpamayo("--frames " + path("frames") + " --ego-history " + path("history.json") +
                          " --max-tokens 3 --greedy --trajectory " + path("t.csv") + " --picture " +
                          path("p.svg"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("generated  "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("wrote      " + path("t.csv")), std::string::npos);
  const std::string csv = read_file(path("t.csv"));
  EXPECT_EQ(csv.rfind("t,x,y,z,yaw\n0.1,", 0), 0u);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 65);
  EXPECT_EQ(read_file(path("p.svg")).rfind("<svg ", 0), 0u);
}

TEST_F(RealRun, BadInputsGetOneLineErrors) {
  const std::string hist = " --ego-history " + path("history.json");
  // Wrong count of frames.
  fs::create_directories(root_ / "fifteen");
  for (int i = 0; i < 15; ++i) {
    fs::copy_file(root_ / "frames" / "00.png",
                  root_ / "fifteen" / (std::to_string(10 + i) + ".png"));
  }
  expect_one_line_error(alpamayo("--frames " + path("fifteen") + hist),
                        "15 frames, the model takes 16");
  // An unreadable image, named.
  fs::copy(root_ / "frames", root_ / "broken");
  std::ofstream(root_ / "broken" / "07.png") << "not a png at all";
  expect_one_line_error(alpamayo("--frames " + path("broken") + hist), "07.png");
  // Mismatched sizes.
  fs::copy(root_ / "frames", root_ / "mixed");
  ASSERT_TRUE(write_file_atomic(path("mixed/05.png"), frame_png(5, 200, 320)).ok());
  expect_one_line_error(alpamayo("--frames " + path("mixed") + hist),
                        "every frame must have one size");
  // NaN positions (JSON has no NaN: .npy does).
  {
    std::string header = "{'descr': '<f8', 'fortran_order': False, 'shape': (16, 3), }";
    header.append(64 - (10 + header.size() + 1) % 64, ' ');
    header += '\n';
    std::string bytes =
        std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(header.size()) + '\0' + header;
    std::vector<double> v(48, 0.0);
    v[7] = std::nan("");
    bytes.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(double));
    std::ofstream(root_ / "nan.npy", std::ios::binary) << bytes;
  }
  expect_one_line_error(
      alpamayo("--frames " + path("frames") + " --ego-history " + path("nan.npy")),
      "point 2 has a non-finite position");
  // A prompt longer than the context (qwen3-tiny: 40960 positions).
  {
    std::string text;
    for (int i = 0; i < 42000; ++i) text += "a ";
    std::ofstream(root_ / "long.txt") << text;
  }
  expect_one_line_error(qwen("--prompt-file " + path("long.txt")), "exceed the model's context");
  expect_one_line_error(qwen("--prompt hi --max-tokens 40960"), "exceed the model's context");
  // Flags that do not go together.
  expect_one_line_error(alpamayo("--frames " + path("frames")), "--frames and --ego-history");
  expect_one_line_error(alpamayo("--prompt hi"), "Alpamayo-R1's prompt is fixed");
  expect_one_line_error(qwen("--frames " + path("frames") + " --prompt hi"), "text-only model");
  expect_one_line_error(qwen("--prompt hi --tokens 3"), "--tokens");
  expect_one_line_error(qwen("--max-tokens 3"), "--max-tokens applies to real inputs");
  expect_one_line_error(alpamayo("--picture " + path("x.png")), "--picture");
  expect_one_line_error(
      alpamayo("--frames " + path("frames") + hist + " --trajectory " + path("t.txt")),
      "name a .json or .csv file");
}

TEST_F(RealRun, TextModelAnswersAPromptInTheChatFormat) {
  const auto r = qwen(
      "--prompt 'Hello there' --system 'Be brief.' --max-tokens 4 --json "
      "--dump-inputs " +
      path("qdump"));
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_LE(j["tokens"].size(), 4u);
  EXPECT_TRUE(j["text"].is_string());
  EXPECT_FALSE(j.contains("reasoning"));
  // The prompt is the chat template's text through the model's tokenizer.
  const auto tok = Tokenizer::load_dir(path("qwen3-tiny"));
  ASSERT_TRUE(tok.ok());
  ChatRequest chat;
  chat.system = "Be brief.";
  chat.user = "Hello there";
  const auto want = tok->encode(qwen3_chat_text(chat)).value();
  EXPECT_EQ(j["prompt_tokens"].get<size_t>(), want.size());
  const std::string ids = read_file(path("qdump/input_ids.npy"));
  const size_t data = ids.size() - want.size() * 8;
  for (size_t i = 0; i < want.size(); ++i) {
    int64_t v = 0;
    std::memcpy(&v, ids.data() + data + i * 8, 8);
    EXPECT_EQ(v, want[i]) << i;
  }

  const auto text = qwen("--prompt 'Hello there' --max-tokens 4");
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("generated  "), std::string::npos) << text.out;
}

}  // namespace
}  // namespace ferry
