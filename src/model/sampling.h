// Token selection on the host, from the last position's logits as f32.
//
// Greedy is argmax (the first index of the largest value). Sampling follows spec §5.1 (the
// transformers TemperatureLogitsWarper + TopPLogitsWarper chain): mask, divide by the
// temperature, sort ascending, softmax, cumulative sum, drop tokens whose cumulative probability
// is <= 1 - top_p (the most likely token always stays), softmax over what is left, draw one.
// The draw uses ferry's own documented generator (Rng below), so a seed gives the same tokens on
// every machine and backend; it does not reproduce torch.multinomial's Philox stream.
#pragma once

#include <cstdint>
#include <span>

#include "model/workload.h"

namespace ferry {

// xoshiro256** (Blackman & Vigna, 2018), state seeded from one 64-bit seed by splitmix64.
class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t next();
  double uniform();  // [0, 1), 53 random bits

 private:
  uint64_t s_[4];
};

// An independent seed for one use of the workload seed (prompt text, sampling, pixels, ...):
// splitmix64 of seed and a per-use constant.
uint64_t sub_seed(uint64_t seed, uint64_t use);

// Token ids [begin, end) forced to -inf before selection (Alpamayo's ExpertLogitsProcessor masks
// the 4000 trajectory ids [151669, 155669)). Empty when begin >= end.
struct LogitsMask {
  int64_t begin = 0;
  int64_t end = 0;
};

// The first index of the largest value; NaN never wins. -1 for an empty or all-NaN input.
int32_t argmax_token(std::span<const float> logits, LogitsMask mask = {});

// argmax_token over bf16 logits (raw bits), without converting them first: the same index.
int32_t argmax_token_bf16(std::span<const uint16_t> logits, LogitsMask mask = {});

// Temperature + top-p draw as described above. -1 if every token is masked.
int32_t sample_top_p(std::span<const float> logits, float temperature, float top_p, LogitsMask mask,
                     Rng& rng);

// Greedy or sampled, per the workload's settings.
int32_t select_token(std::span<const float> logits, const SamplingParams& params, LogitsMask mask,
                     Rng& rng);

}  // namespace ferry
