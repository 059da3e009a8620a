// The resize of Qwen3-VL's image processor: torchvision's `resize(uint8 image, antialias=True,
// BICUBIC)`, which on the CPU is PyTorch's `_upsample_bicubic2d_aa` on the uint8 tensor itself
// (no float round trip). That kernel is integer arithmetic and so is this one, with the same
// taps, the same fixed-point weights and the same rounding: outputs are bit-identical.
//
// What it computes, per axis (in → out samples, scale s = in/out as a double):
//   - kernel: Keys' cubic with a = −0.5; when shrinking (s ≥ 1) it is stretched by s, so its
//     support is 2·s input samples each side of the centre, else 2;
//   - output i covers inputs [xmin, xmin + n) around centre c = s·(i + ½), with
//     xmin = max(trunc(c − support + ½), 0), n = min(trunc(c + support + ½), in) − xmin (at most
//     2·⌈support⌉ + 1); weight j = cubic((xmin + j − c + ½) / max(s, 1)), divided by their sum;
//   - the weights become int16 fixed point with P fractional bits, P the largest (≤ 22) for
//     which the largest weight of the axis times 2^(P+1), rounded, stays below 2^15; each weight
//     is rounded half away from zero;
//   - a sample is (2^(P−1) + Σ pixel·weight) >> P (arithmetic shift), clamped to [0, 255].
// The horizontal pass runs first and is rounded to uint8; the vertical pass reads its output.
// An axis whose size does not change is not touched (no pass, no rounding).
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "image/image.h"

namespace ferry {

// The taps of one axis: output i reads `count[i]` inputs from `first[i]` with the int16
// weights at weights[i · max_taps ...].
struct ResampleTaps {
  int64_t in_size = 0;
  int64_t out_size = 0;
  int64_t max_taps = 0;
  int precision = 0;  // fractional bits of the weights
  std::vector<int64_t> first;
  std::vector<int64_t> count;
  std::vector<int16_t> weights;  // [out_size, max_taps]
};

// Taps of the antialiased bicubic kernel for one axis. in_size, out_size ≥ 1.
ResampleTaps bicubic_aa_taps(int64_t in_size, int64_t out_size);

// Resizes to height × width (both ≥ 1) exactly as torchvision does on a uint8 tensor.
Result<RgbImage> resize_bicubic_aa(const RgbImage& image, int64_t height, int64_t width);

}  // namespace ferry
