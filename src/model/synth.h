// Seeded synthetic weights for a model's table: what `ferry synth` writes.
//
// Values come from a counter-based generator (splitmix64 of seed, tensor index and element
// index), so any chunk of any tensor can be filled independently, in parallel, and the bytes
// never depend on threads or sharding. Scales keep activations sane through deep stacks:
//   norm weights (1-D, not a bias)  exactly 1
//   biases                          uniform, std 0.01
//   embeddings, position tables     uniform, std 0.02
//   other matrices [out, in...]     uniform, std 1/sqrt(fan_in) (fan_in = product of dims but 0)
// Uniform is the default (the golden hashes are of it). SynthDistribution::normal draws the same
// stds from a normal distribution instead (Box-Muller in double, one 64-bit draw per 2 elements):
// its BF16 exponents carry ~2.55 bits of entropy like trained weights (~2.6), where uniform
// carries ~2.04 and flatters any exponent codec (docs/compression.md).
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <vector>

#include "format/safetensors.h"
#include "model/weights.h"

namespace ferry {

enum class SynthDistribution { uniform, normal };

struct SynthInit {
  bool ones = false;  // exactly 1.0
  float std = 0.0f;   // else random with this standard deviation
  SynthDistribution dist = SynthDistribution::uniform;
};

SynthInit synth_init(const WeightGroup& group, const WeightSpec& spec,
                     SynthDistribution dist = SynthDistribution::uniform);

// Writes elements [first, first + out.size()/dtype_size) of tensor `tensor_index` into `out`
// in the spec's dtype (BF16, F16 or F32).
void synth_fill(uint64_t seed, uint64_t tensor_index, const WeightSpec& spec, SynthInit init,
                uint64_t first, std::span<std::byte> out);

// Every distinct checkpoint tensor of `weights`, in table order, with a fill function. The fill
// adds the bytes it wrote to `*progress` (if not null) as it goes. `weights` must outlive the
// returned fills.
std::vector<TensorToWrite> synth_tensors(const ModelWeights& weights, uint64_t seed,
                                         std::atomic<uint64_t>* progress = nullptr,
                                         SynthDistribution dist = SynthDistribution::uniform);

}  // namespace ferry
