// Chat prompts of real inputs (api/chat_prompt.h): the rendered texts against the templates as
// the spec and the official helper write them, image-pad expansion, history fusion, and the
// checks on the tokenizer and the workload. Token ids against Hugging Face's tokenizers with the
// real Qwen vocabulary are checked in tests/python/test_prompt.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "api/chat_prompt.h"
#include "model/presets.h"
#include "tokenizer/synthetic.h"

namespace ferry {
namespace {

const Tokenizer& alpamayo_tokenizer() {
  static const Tokenizer t = [] {
    const ModelConfig c = preset("alpamayo-tiny").value();
    return Tokenizer::from_json(synthetic_tokenizer_json(c).value()).value();
  }();
  return t;
}

TEST(ChatPrompt, AlpamayoTextIsTheSpecsTemplate) {
  // Spec §4.3, written out by hand: 2 images and 3 history placeholders here.
  const std::string want =
      "<|im_start|>system\nYou are a driving assistant that generates safe and accurate "
      "actions.<|im_end|>\n<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>"
      "<|vision_start|><|image_pad|><|vision_end|><|traj_history_start|><|traj_history|>"
      "<|traj_history|><|traj_history|><|traj_history_end|>output the chain-of-thought reasoning "
      "of the driving process, then output the future trajectory.<|im_end|>\n<|im_start|>"
      "assistant\n<|cot_start|>";
  EXPECT_EQ(alpamayo_chat_text(2, 3), want);
}

TEST(ChatPrompt, Qwen3TextTurns) {
  ChatRequest c;
  c.user = "Hi\nthere";
  EXPECT_EQ(qwen3_chat_text(c), "<|im_start|>user\nHi\nthere<|im_end|>\n<|im_start|>assistant\n");
  c.system = "Be brief.";
  c.thinking = false;
  EXPECT_EQ(qwen3_chat_text(c),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi\nthere<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\n");
  c.system.reset();
  EXPECT_EQ(qwen3_vl_chat_text(c, 1),
            "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>Hi\nthere<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatPrompt, ImagePadsExpandInOrderWithTheirRows) {
  const Tokenizer& tok = alpamayo_tokenizer();
  const std::string text = "a<|vision_start|><|image_pad|><|vision_end|>b<|image_pad|>c";
  const std::vector<int64_t> counts = {3, 2};
  auto p = tokenize_and_expand(tok, text, 151655, counts);
  ASSERT_TRUE(p.ok()) << p.error().to_string();
  const std::vector<int32_t> plain = tok.encode(text).value();
  // Every id but the pads is the tokenizer's, in order; pads repeat per image.
  std::vector<int32_t> want;
  size_t image = 0;
  for (int32_t id : plain) {
    if (id != 151655) {
      want.push_back(id);
      continue;
    }
    want.insert(want.end(), static_cast<size_t>(counts[image++]), 151655);
  }
  EXPECT_EQ(p->ids, want);
  ASSERT_EQ(p->image_rows.size(), 5u);
  for (int32_t r : p->image_rows) EXPECT_EQ(p->ids[static_cast<size_t>(r)], 151655);

  auto wrong = tokenize_and_expand(tok, text, 151655, std::vector<int64_t>{3});
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.error().message.find("2 image placeholders for 1 images"), std::string::npos);
}

TEST(ChatPrompt, HistoryIdsReplaceThePlaceholdersInOrder) {
  std::vector<int32_t> ids = {1, 9, 2, 9, 9, 3};
  const std::vector<int32_t> hist = {100, 101, 102};
  ASSERT_TRUE(fuse_history(ids, 9, hist).ok());
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 100, 2, 101, 102, 3}));
  std::vector<int32_t> short_ids = {9, 9};
  EXPECT_FALSE(fuse_history(short_ids, 9, hist).ok());
}

TEST(ChatPrompt, AlpamayoInputsCarryTheStopRuleAndTheFusedHistory) {
  const ModelConfig c = preset("alpamayo-tiny").value();
  PreprocessedImages images;
  images.patch_values = c.vlm()->vision.patch_values();
  for (int i = 0; i < 16; ++i) images.grid_thw.push_back({1, 4, 6});
  images.pixel_values.assign(static_cast<size_t>(16 * 24 * images.patch_values), 0.25f);
  const EgoHistory h = synthetic_history(3);
  auto in = alpamayo_inputs(alpamayo_tokenizer(), *c.alpamayo(), images, h);
  ASSERT_TRUE(in.ok()) << in.error().to_string();
  EXPECT_EQ(in->stop.stop_after, 155681);
  EXPECT_EQ(in->stop.stop_tokens, (std::vector<int32_t>{151645, 151643}));
  EXPECT_EQ(std::count(in->prompt.begin(), in->prompt.end(), 151655), 16 * 6);
  EXPECT_EQ(std::count(in->prompt.begin(), in->prompt.end(), 155684), 0);  // all replaced
  const auto hist = history_tokens(h);
  auto at = std::find(in->prompt.begin(), in->prompt.end(), 155674);  // <|traj_history_start|>
  ASSERT_NE(at, in->prompt.end());
  EXPECT_TRUE(std::equal(hist.begin(), hist.end(), at + 1));
  EXPECT_EQ(*(at + 1 + kHistoryTokens), 155676);  // <|traj_history_end|>
  EXPECT_EQ(in->prompt.back(), 155677);           // <|cot_start|>

  auto w = workload_for_inputs(c, *in, 32);
  ASSERT_TRUE(w.ok()) << w.error().to_string();
  EXPECT_EQ(w->num_images, 16);
  EXPECT_EQ(w->image_height, 64);
  EXPECT_EQ(w->image_width, 96);
  EXPECT_EQ(w->prompt_tokens, static_cast<int64_t>(in->prompt.size()));
  EXPECT_EQ(w->gen_tokens, 32);
}

TEST(ChatPrompt, WorkloadRefusesPromptsBeyondTheContextAndMixedSizes) {
  const ModelConfig c = preset("qwen3-tiny").value();
  ModelInputs in;
  in.prompt.assign(40000, 5);
  auto ok = workload_for_inputs(c, in, 960);
  EXPECT_TRUE(ok.ok());
  auto over = workload_for_inputs(c, in, 961);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error().message,
            "prompt: 40000 tokens plus up to 961 generated exceed the model's context of 40960 "
            "tokens");

  const ModelConfig vl = preset("qwen3-vl-tiny").value();
  ModelInputs two;
  two.prompt.assign(10, 5);
  two.image_grid_thw = {{1, 4, 4}, {1, 4, 6}};
  auto mixed = workload_for_inputs(vl, two, 4);
  ASSERT_FALSE(mixed.ok());
  EXPECT_NE(mixed.error().message.find("sizes differ"), std::string::npos);
}

TEST(ChatPrompt, TokenizerThatLacksTheModelsSpecialsIsRefused) {
  const ModelConfig c = preset("alpamayo-tiny").value();
  // A Qwen3 tokenizer has no Alpamayo tokens.
  const Tokenizer qwen =
      Tokenizer::from_json(synthetic_tokenizer_json(preset("qwen3-tiny").value()).value()).value();
  PreprocessedImages images;
  auto in = alpamayo_inputs(qwen, *c.alpamayo(), images, synthetic_history(1));
  ASSERT_FALSE(in.ok());
  EXPECT_NE(in.error().message.find("<|traj_history|>"), std::string::npos);
  ChatRequest chat;
  chat.user = "x";
  EXPECT_FALSE(chat_inputs(qwen, c, chat, {}).ok());  // Alpamayo's prompt is fixed
}

}  // namespace
}  // namespace ferry
