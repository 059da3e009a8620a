#include "model/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "core/bf16.h"

namespace ferry {

namespace {
uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
uint64_t rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

bool masked(int64_t id, LogitsMask m) {
  return id >= m.begin && id < m.end;
}
}  // namespace

uint64_t sub_seed(uint64_t seed, uint64_t use) {
  uint64_t x = seed ^ (use * 0xd1b54a32d192ed03ull);
  return splitmix64(x);
}

Rng::Rng(uint64_t seed) {
  uint64_t x = seed;
  for (uint64_t& s : s_) s = splitmix64(x);
}

uint64_t Rng::next() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform() {
  return static_cast<double>(next() >> 11) * 0x1.0p-53;
}

namespace {

// The first index of the largest value (NaN and masked ids skipped), over any element type that
// `value` turns into a float exactly.
template <class T, class ToFloat>
int32_t first_argmax(std::span<const T> logits, LogitsMask mask, ToFloat value) {
  int32_t best = -1;
  float best_v = 0.0f;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float v = value(logits[i]);
    if (std::isnan(v) || masked(static_cast<int64_t>(i), mask)) continue;
    if (best < 0 || v > best_v) {
      best = static_cast<int32_t>(i);
      best_v = v;
    }
  }
  return best;
}

}  // namespace

int32_t argmax_token(std::span<const float> logits, LogitsMask mask) {
  return first_argmax(logits, mask, [](float v) { return v; });
}

int32_t argmax_token_bf16(std::span<const uint16_t> logits, LogitsMask mask) {
  return first_argmax(logits, mask, [](uint16_t v) { return bf16_to_f32(v); });
}

int32_t sample_top_p(std::span<const float> logits, float temperature, float top_p, LogitsMask mask,
                     Rng& rng) {
  // Scaled logits of the candidates (masked ids and NaNs are -inf: they can never be drawn).
  std::vector<int32_t> ids;
  std::vector<float> z(logits.size());
  ids.reserve(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    const bool drop = masked(static_cast<int64_t>(i), mask) || std::isnan(logits[i]);
    z[i] = drop ? -std::numeric_limits<float>::infinity() : logits[i] / temperature;
    if (!drop) ids.push_back(static_cast<int32_t>(i));
  }
  if (ids.empty()) return -1;
  // Ascending by value; ties by id, so the order is fully determined.
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return z[a] < z[b]; });
  const float zmax = z[ids.back()];
  std::vector<float> e(ids.size());
  float sum = 0.0f;
  for (size_t i = 0; i < ids.size(); ++i) {
    e[i] = std::exp(z[ids[i]] - zmax);
    sum += e[i];
  }
  // Drop the low tail whose cumulative probability is <= 1 - top_p; the last (largest) stays.
  const float cut = 1.0f - top_p;
  size_t first_kept = 0;
  float cum = 0.0f;
  for (size_t i = 0; i + 1 < ids.size(); ++i) {
    cum += e[i] / sum;
    if (cum <= cut) {
      first_kept = i + 1;
    } else {
      break;
    }
  }
  // Draw from the renormalized survivors, most likely first.
  double kept_sum = 0.0;
  for (size_t i = first_kept; i < ids.size(); ++i) kept_sum += e[i];
  const double u = rng.uniform() * kept_sum;
  double acc = 0.0;
  for (size_t i = ids.size(); i-- > first_kept;) {
    acc += e[i];
    if (u < acc) return ids[i];
  }
  return ids[first_kept];
}

int32_t select_token(std::span<const float> logits, const SamplingParams& params, LogitsMask mask,
                     Rng& rng) {
  if (params.greedy) return argmax_token(logits, mask);
  return sample_top_p(logits, params.temperature, params.top_p, mask, rng);
}

}  // namespace ferry
