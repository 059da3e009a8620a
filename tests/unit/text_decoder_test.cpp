// The KV cache path against a plain prefill: prefill of S tokens then one decode step must give
// the same last logits as a prefill of S+1 tokens, within bf16 tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "core/bf16.h"
#include "model/presets.h"
#include "model/prompt.h"
#include "model/rope_index.h"
#include "model/text_decoder.h"
#include "resident_weights.h"
#include "scratch_dir.h"
#include "text_test_model.h"

namespace ferry {
namespace {

class DecoderFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = preset("qwen3-tiny");
    ASSERT_TRUE(c.ok());
    config_ = *c;
    ASSERT_TRUE(testing::write_test_checkpoint(dir_, config_, 2).ok());
    auto w = describe_weights(config_);
    ASSERT_TRUE(w.ok());
    weights_ = *w;
    auto ck = Checkpoint::open(dir_);
    ASSERT_TRUE(ck.ok()) << ck.error().to_string();
    backend_ = create_cpu_backend();
    stream_ = backend_->create_stream();
    auto r = testing::ResidentWeights::load(*backend_, *stream_, weights_, *ck);
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    resident_ = std::move(*r);
  }

  // One forward of `ids` at the decoder's current cache length; returns the last logits.
  std::vector<float> step(TextDecoder& d, const std::vector<int32_t>& ids) {
    const auto pos = linear_positions(d.cache().length(), static_cast<int64_t>(ids.size()));
    EXPECT_TRUE(d.begin_step(*stream_, ids, pos).ok());
    for (size_t g = 0; g < weights_.groups.size(); ++g) {
      const WeightGroup& grp = weights_.groups[g];
      void* base = resident_.base(static_cast<int>(g));
      Status s;
      if (grp.kind == GroupKind::embedding) s = d.run_embed(*stream_, grp, base);
      if (grp.kind == GroupKind::decoder_layer) s = d.run_layer(*stream_, grp.layer, grp, base);
      if (grp.kind == GroupKind::lm_head) s = d.run_head(*stream_, grp, base);
      EXPECT_TRUE(s.ok()) << s.error().to_string();
    }
    std::vector<uint16_t> raw;
    EXPECT_TRUE(d.read_logits(*stream_, raw).ok());
    std::vector<float> values(raw.size());
    for (size_t i = 0; i < raw.size(); ++i) values[i] = bf16_to_f32(raw[i]);
    return values;
  }

  testing::ScratchDir scratch_{"ferry_text_decoder", /*create=*/false};
  std::string dir_ = scratch_.str();
  ModelConfig config_;
  ModelWeights weights_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Stream> stream_;
  testing::ResidentWeights resident_;
};

TEST_F(DecoderFixture, DecodeStepMatchesLongerPrefill) {
  const TextConfig& t = config_.text();
  const std::vector<int32_t> ids = random_text_ids(9, 33, t.vocab_size);
  const std::vector<int32_t> head(ids.begin(), ids.end() - 1);

  auto a = TextDecoder::create(t, *backend_, 33, 40);
  ASSERT_TRUE(a.ok()) << a.error().to_string();
  step(*a, head);
  EXPECT_EQ(a->cache().length(), 32);
  const std::vector<float> decoded = step(*a, {ids.back()});
  EXPECT_EQ(a->cache().length(), 33);

  auto b = TextDecoder::create(t, *backend_, 33, 33);
  ASSERT_TRUE(b.ok());
  const std::vector<float> prefilled = step(*b, ids);

  ASSERT_EQ(decoded.size(), prefilled.size());
  // Same math, different row blocking: bf16 rounding differences only. Per element, at most 2 bf16
  // ulps of the reference logit (ulp(v) = 2^(floor(log2|v|) - 7)) plus 2^-6 absolute for logits
  // near zero, which a rounding difference upstream moves by an amount set by the weights, not by
  // the logit. The CPU backend is stricter than that: its ops never split a reduction by rows, and
  // the two paths were measured bit-identical (4 checkpoint seeds x 6 prompts x lengths 9 and 33;
  // logits up to ~5), so the bound has all its margin; a wrong cache row or position fails it.
  float max_abs = 0;
  size_t worst = 0;
  float worst_excess = -1;
  for (size_t i = 0; i < decoded.size(); ++i) {
    const float ref = std::fabs(prefilled[i]);
    max_abs = std::max(max_abs, ref);
    const float ulp = ref > 0 ? std::ldexp(1.0f, std::ilogb(ref) - 7) : 0.0f;
    const float diff = std::fabs(decoded[i] - prefilled[i]);
    const float excess = std::isfinite(diff) ? diff / (2 * ulp + 0x1p-6f) : INFINITY;
    if (excess > worst_excess) {
      worst_excess = excess;
      worst = i;
    }
  }
  ASSERT_GT(max_abs, 0.0f);
  EXPECT_LE(worst_excess, 1.0f) << "logit " << worst << ": decoded " << decoded[worst]
                                << ", prefilled " << prefilled[worst];
}

TEST_F(DecoderFixture, RejectsIdsOutsideTheVocabularyAndFullCache) {
  const TextConfig& t = config_.text();
  auto d = TextDecoder::create(t, *backend_, 4, 4);
  ASSERT_TRUE(d.ok());
  const std::vector<int32_t> bad = {1, static_cast<int32_t>(t.vocab_size)};
  EXPECT_FALSE(d->begin_step(*stream_, bad, linear_positions(0, 2)).ok());
  const std::vector<int32_t> five = {1, 2, 3, 4, 5};
  EXPECT_FALSE(d->begin_step(*stream_, five, linear_positions(0, 5)).ok());  // > max step
  const std::vector<int32_t> four = {1, 2, 3, 4};
  EXPECT_TRUE(d->begin_step(*stream_, four, linear_positions(0, 4)).ok());
  const std::vector<int32_t> one = {1};
  EXPECT_FALSE(d->begin_step(*stream_, one, linear_positions(4, 1)).ok());  // cache full
  EXPECT_TRUE(backend_->synchronize(*stream_).ok());
}

}  // namespace
}  // namespace ferry
