#include "model/synth.h"

#include <cmath>
#include <cstring>
#include <set>
#include <string_view>
#include <thread>

#include "core/bf16.h"

namespace ferry {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// IEEE half from float (round to nearest even), enough for finite values in the normal range.
uint16_t f32_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const int32_t exp = static_cast<int32_t>((u >> 23) & 0xff) - 127 + 15;
  uint32_t mant = u & 0x7fffffu;
  if (exp <= 0) {  // subnormal or zero
    if (exp < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    const uint32_t shift = static_cast<uint32_t>(14 - exp);
    uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  uint32_t half = (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1))) ++half;  // may carry into the exponent
  return static_cast<uint16_t>(sign | half);
}

// f32_to_bf16 without the NaN case (every generated value is finite): same rounding, no branch.
inline uint16_t bf16_of_finite(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

}  // namespace

SynthInit synth_init(const WeightGroup& group, const WeightSpec& spec, SynthDistribution dist) {
  SynthInit init;
  init.dist = dist;
  const std::string_view local = spec.local_name;
  if (spec.shape.size() == 1) {
    if (ends_with(local, "bias")) {
      init.std = 0.01f;
    } else {
      init.ones = true;  // every 1-D non-bias tensor of the tables is a norm weight
    }
    return init;
  }
  if (group.kind == GroupKind::embedding || local == "pos_embed") {
    init.std = 0.02f;
    return init;
  }
  int64_t fan_in = 1;
  for (size_t i = 1; i < spec.shape.size(); ++i) fan_in *= spec.shape[i];
  init.std = static_cast<float>(1.0 / std::sqrt(static_cast<double>(fan_in)));
  return init;
}

namespace {

// Calls store(k, value) for elements first .. first+n-1, one 64-bit draw per 4 elements.
template <class Store>
void generate(uint64_t key, float scale, uint64_t first, size_t n, Store store) {
  auto draw = [key](uint64_t block) { return splitmix64(key + block * 0x9e3779b97f4a7c15ull); };
  auto value = [scale](uint64_t r, unsigned j) {
    return (static_cast<float>(static_cast<uint16_t>(r >> (16 * j))) - 32767.5f) * scale;
  };
  uint64_t i = first;
  size_t k = 0;
  // Head: up to the next multiple of 4 elements.
  for (; k < n && (i & 3) != 0; ++k, ++i)
    store(k, value(draw(i >> 2), static_cast<unsigned>(i & 3)));
  // Body: whole blocks of 4, one draw each, straight-line.
  for (; k + 4 <= n; k += 4, i += 4) {
    const uint64_t r = draw(i >> 2);
    store(k, value(r, 0));
    store(k + 1, value(r, 1));
    store(k + 2, value(r, 2));
    store(k + 3, value(r, 3));
  }
  for (; k < n; ++k, ++i) store(k, value(draw(i >> 2), static_cast<unsigned>(i & 3)));
}

// The normal counterpart: element i is the cos (even i) or sin (odd i) half of a Box-Muller pair
// drawn from 64 bits of block i / 2 (u1 in (0, 1] from the high half, u2 from the low half), in
// double, times `std`, rounded once to float. |z| <= sqrt(-2 ln 2^-32) = 6.66.
template <class Store>
void generate_normal(uint64_t key, double std, uint64_t first, size_t n, Store store) {
  auto pair = [key, std](uint64_t block, double& c, double& s) {
    const uint64_t r = splitmix64(key + block * 0x9e3779b97f4a7c15ull);
    const double u1 = static_cast<double>((r >> 32) + 1) * 0x1p-32;
    const double u2 = static_cast<double>(r & 0xffffffffull) * 0x1p-32;
    const double radius = std * std::sqrt(-2.0 * std::log(u1));
    const double angle = 6.283185307179586 * u2;
    c = radius * std::cos(angle);
    s = radius * std::sin(angle);
  };
  uint64_t i = first;
  size_t k = 0;
  double c = 0, s = 0;
  if (k < n && (i & 1) != 0) {  // head: the sin half of a pair
    pair(i >> 1, c, s);
    store(k++, static_cast<float>(s));
    ++i;
  }
  for (; k + 2 <= n; k += 2, i += 2) {
    pair(i >> 1, c, s);
    store(k, static_cast<float>(c));
    store(k + 1, static_cast<float>(s));
  }
  if (k < n) {
    pair(i >> 1, c, s);
    store(k, static_cast<float>(c));
  }
}

template <class Store>
void generate_init(uint64_t key, SynthInit init, uint64_t first, size_t n, Store store) {
  if (init.dist == SynthDistribution::normal) {
    generate_normal(key, static_cast<double>(init.std), first, n, store);
  } else {
    // Uniform on [-a, a] has std a/sqrt(3); 16 random bits per value.
    generate(key, init.std * 1.7320508f / 32767.5f, first, n, store);
  }
}

}  // namespace

void synth_fill(uint64_t seed, uint64_t tensor_index, const WeightSpec& spec, SynthInit init,
                uint64_t first, std::span<std::byte> out) {
  const size_t esize = dtype_size(spec.dtype);
  const size_t n = out.size() / esize;
  const uint64_t key = splitmix64(seed ^ splitmix64(tensor_index + 0x5851f42d4c957f2dull));
  std::byte* p = out.data();
  switch (spec.dtype) {
    case DType::f32: {
      auto store = [p](size_t k, float v) { std::memcpy(p + 4 * k, &v, 4); };
      if (init.ones) {
        for (size_t k = 0; k < n; ++k) store(k, 1.0f);
      } else {
        generate_init(key, init, first, n, store);
      }
      break;
    }
    case DType::f16: {
      auto store = [p](size_t k, float v) {
        const uint16_t h = f32_to_f16(v);
        std::memcpy(p + 2 * k, &h, 2);
      };
      if (init.ones) {
        for (size_t k = 0; k < n; ++k) store(k, 1.0f);
      } else {
        generate_init(key, init, first, n, store);
      }
      break;
    }
    default: {  // bf16
      auto store = [p](size_t k, float v) {
        const uint16_t h = bf16_of_finite(v);
        std::memcpy(p + 2 * k, &h, 2);
      };
      if (init.ones) {
        for (size_t k = 0; k < n; ++k) store(k, 1.0f);
      } else {
        generate_init(key, init, first, n, store);
      }
      break;
    }
  }
}

std::vector<TensorToWrite> synth_tensors(const ModelWeights& weights, uint64_t seed,
                                         std::atomic<uint64_t>* progress, SynthDistribution dist) {
  std::vector<TensorToWrite> out;
  std::set<std::string_view> seen;
  uint64_t index = 0;
  for (const auto& group : weights.groups) {
    for (const auto& spec : group.tensors) {
      if (!seen.insert(spec.checkpoint_name).second) continue;  // a tied tensor
      const SynthInit init = synth_init(group, spec, dist);
      const WeightSpec* s = &spec;
      const uint64_t tensor_index = index++;
      TensorToWrite t;
      t.name = spec.checkpoint_name;
      t.dtype = spec.dtype;
      t.shape = spec.checkpoint_shape();
      t.fill = [seed, tensor_index, s, init, progress](std::span<std::byte> bytes) {
        const size_t esize = dtype_size(s->dtype);
        // Chunks of 8 MiB: the unit of progress and of the threads below.
        constexpr size_t kChunk = size_t{8} << 20;
        const size_t chunks = (bytes.size() + kChunk - 1) / kChunk;
        std::atomic<size_t> next{0};
        auto work = [&] {
          for (size_t c = next++; c < chunks; c = next++) {
            const size_t off = c * kChunk;
            const size_t len = std::min(kChunk, bytes.size() - off);
            synth_fill(seed, tensor_index, *s, init, off / esize, bytes.subspan(off, len));
            if (progress != nullptr) progress->fetch_add(len, std::memory_order_relaxed);
          }
        };
        // The writer fills tensors in parallel, largest first; a tensor much larger than the
        // rest (an embedding, the LM head) also splits itself, so it does not finish alone.
        const size_t want = std::min<size_t>(std::thread::hardware_concurrency(), chunks / 8);
        const size_t helpers = want > 1 ? want - 1 : 0;
        std::vector<std::thread> threads;
        for (size_t h = 0; h < helpers; ++h) {
          try {
            threads.emplace_back(work);
          } catch (...) {
            break;  // fewer helpers; this thread still does all the remaining chunks
          }
        }
        work();
        for (auto& th : threads) th.join();
      };
      out.push_back(std::move(t));
    }
  }
  return out;
}

}  // namespace ferry
