// Flow-matching sampling helpers (spec §6.4, §7.7): torch's linspace formula, the Euler time
// grid, and the seeded Gaussian noise ferry uses in place of torch's CUDA generator.
#pragma once

#include <cstdint>
#include <vector>

namespace ferry {

// torch.linspace in fp32 (§7.7): step = (end − start)/(n − 1) in fp32; value i is
// start + step·i for i < n/2 and end − step·(n − 1 − i) otherwise.
std::vector<float> linspace_f32(float start, float end, int64_t n);

struct TimeGrid {
  std::vector<float> times;   // t_i, i in [0, steps]: linspace_f32(0, 1, steps + 1)
  std::vector<float> deltas;  // Δ_i = t_{i+1} − t_i in fp32, i in [0, steps)
};
TimeGrid euler_time_grid(int64_t steps);

// x += Δ · v elementwise in fp32 (one Euler step).
void euler_step(std::vector<float>& x, const std::vector<float>& v, float delta);

// n samples of N(0, 1) in fp32: Box–Muller over a splitmix64 stream seeded with `seed`. Not
// torch's generator (its CUDA Philox stream cannot be matched bit for bit); documented instead.
std::vector<float> gaussian_noise(uint64_t seed, int64_t n);

}  // namespace ferry
