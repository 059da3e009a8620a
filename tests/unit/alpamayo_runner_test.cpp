// The action expert's cache offset (spec §5.3): 1 + the index of the first <|traj_future_start|>
// in prompt + generated tokens. The golden run only covers the case where the generation forces it
// as the last token; these cover a mid-generation occurrence and none at all.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "model/alpamayo_runner.h"

namespace ferry {
namespace {

constexpr int32_t kFutureStart = 155681;

TEST(FirstFutureOffset, TokenMidGenerationGivesItsIndexInTheFullSequencePlusOne) {
  const std::vector<int32_t> prompt = {10, 11, 12, 13, 14, 15, 16};  // 7 tokens
  // The first <|traj_future_start|> is generated token 2, so index 7 + 2 = 9 in prompt + tokens;
  // the later one does not count.
  const std::vector<int32_t> tokens = {20, 21, kFutureStart, 22, kFutureStart, 23};
  EXPECT_EQ(first_future_offset(prompt, tokens, kFutureStart), 7 + 2 + 1);
  // First and last generated token.
  EXPECT_EQ(first_future_offset(prompt, {kFutureStart, 20, 21}, kFutureStart), 7 + 0 + 1);
  EXPECT_EQ(first_future_offset(prompt, {20, 21, kFutureStart}, kFutureStart), 7 + 2 + 1);
  // Another id is not the token: only `future_start` counts.
  EXPECT_EQ(first_future_offset(prompt, tokens, 22), 7 + 3 + 1);
}

TEST(FirstFutureOffset, TokenNeverGeneratedGivesTheWholeSequence) {
  const std::vector<int32_t> prompt = {10, 11, 12, 13, 14};
  EXPECT_EQ(first_future_offset(prompt, {20, 21, 22, 23}, kFutureStart), 5 + 4);
  EXPECT_EQ(first_future_offset(prompt, {}, kFutureStart), 5);
  // Only the generated tokens are searched, not the prompt.
  EXPECT_EQ(first_future_offset({kFutureStart, 11}, {20, 21, 22}, kFutureStart), 2 + 3);
}

}  // namespace
}  // namespace ferry
