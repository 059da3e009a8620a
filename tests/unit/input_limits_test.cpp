// Flags and file content that must end in a clear error, never an unbounded allocation, a hang
// or a crash: the workload limits, Alpamayo config values the engine cannot honour, special
// files where a checkpoint or config should be, and non-BF16 weights.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "format/mapped_file.h"
#include "model/config_json.h"
#include "model/presets.h"
#include "model/weights.h"
#include "model/workload.h"
#include "scratch_dir.h"

namespace ferry {
namespace {

Workload tiny_vl_workload() {
  Workload w;
  w.num_images = 2;
  w.image_height = 64;
  w.image_width = 96;
  w.prompt_tokens = 100;
  w.gen_tokens = 4;
  w.flow_steps = 10;
  return w;
}

void expect_rejected(const Status& s, const std::string& words) {
  ASSERT_FALSE(s.ok()) << "accepted; expected an error about: " << words;
  EXPECT_NE(s.error().message.find(words), std::string::npos) << s.error().message;
}

TEST(InputLimits, WorkloadBoundsAreErrorsBeforeAnythingIsSized) {
  const ModelConfig ar = preset("alpamayo-tiny").value();
  ASSERT_TRUE(validate_workload(tiny_vl_workload(), ar).ok());
  EXPECT_EQ(image_tokens(tiny_vl_workload(), ar), 2 * (64 / 32) * (96 / 32));

  Workload w = tiny_vl_workload();
  w.num_images = kMaxImages + 1;
  expect_rejected(validate_workload(w, ar), "at most 256 images");
  EXPECT_EQ(image_tokens(w, ar), 0);  // out of range: never multiplied

  w = tiny_vl_workload();
  w.image_width = 80;  // not a multiple of patch 16 x merge 2
  expect_rejected(validate_workload(w, ar), "multiple of 32");
  w.image_width = kMaxImageSide + 32;
  expect_rejected(validate_workload(w, ar), "at most 8192");

  w = tiny_vl_workload();
  w.gen_tokens = int64_t{1} << 40;
  expect_rejected(validate_workload(w, ar), "exceed");
  w = tiny_vl_workload();
  w.flow_steps = kMaxFlowSteps + 1;
  expect_rejected(validate_workload(w, ar), "flow steps");

  // A text model's own context limit is enforced.
  ModelConfig q = preset("qwen3-tiny").value();
  std::get<TextConfig>(q.body).max_position_embeddings = 8;
  Workload t;
  t.prompt_tokens = 6;
  t.gen_tokens = 2;
  EXPECT_TRUE(validate_workload(t, q).ok());
  t.gen_tokens = 3;
  expect_rejected(validate_workload(t, q), "max_position_embeddings");
}

TEST(InputLimits, AlpamayoValuesTheEngineCannotHonourAreConfigErrors) {
  const ModelConfig base = preset("alpamayo-tiny").value();
  ASSERT_TRUE(validate_config(base).ok());
  auto with = [&](auto edit) {
    ModelConfig c = base;
    edit(std::get<AlpamayoConfig>(c.body));
    return validate_config(c);
  };
  expect_rejected(with([](AlpamayoConfig& a) {
                    a.traj_token_start_idx = 0;
                    a.traj_vocab_size = a.vlm.text.vocab_size;
                  }),
                  "masks the whole vocabulary");
  expect_rejected(
      with([](AlpamayoConfig& a) { a.traj_future_start_token_id = a.traj_token_start_idx + 5; }),
      "inside the masked trajectory ids");
  expect_rejected(with([](AlpamayoConfig& a) { a.tokens_per_history_traj = 40; }), "48 tokens");
  expect_rejected(with([](AlpamayoConfig& a) { a.action_space.dt = 1e-9; }), "time step");
  expect_rejected(
      with([](AlpamayoConfig& a) { a.vlm.image_token_id = a.vlm.vision_start_token_id; }),
      "three different ids");
}

TEST(InputLimits, SpecialFilesAreRefusedWithoutBlocking) {
  const testing::ScratchDir scratch("ferry_fifo");
  const std::filesystem::path& dir = scratch.path();
  const std::string fifo = (dir / "config.json").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Both would block forever on a FIFO without a writer if they opened it for reading.
  auto m = MappedFile::open(fifo);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message.find("not a regular file"), std::string::npos);
  auto c = load_config(dir.string());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("not a regular file"), std::string::npos);
}

TEST(InputLimits, NonBf16WeightsAreRefusedBeforeLoading) {
  ModelConfig c = preset("qwen3-tiny").value();
  EXPECT_TRUE(check_runnable_dtypes(describe_weights(c).value()).ok());
  std::get<TextConfig>(c.body).dtype = "float16";
  const Status s = check_runnable_dtypes(describe_weights(c).value());
  expect_rejected(s, "BF16 weights only");
  EXPECT_EQ(s.error().code, ErrorCode::unsupported);
}

}  // namespace
}  // namespace ferry
