// Antialiased bicubic resize on uint8, bit-exact with PyTorch's CPU kernel (see resize.h).
// The double arithmetic of the weights is written in the same order as the kernel's, and this
// file is compiled without floating-point contraction (ISO C++ mode), so every weight, and so
// every rounded int16, comes out the same.
#include "image/resize.h"

#include <algorithm>
#include <cmath>

namespace ferry {
namespace {

// Keys' cubic convolution kernel with a = −0.5 (what antialiased bicubic uses in PyTorch and
// PIL), evaluated in the same operation order as PyTorch.
double keys_cubic(double x) {
  constexpr double a = -0.5;
  x = std::abs(x);
  if (x < 1.0) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2.0) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0.0;
}

// Horizontal: one row, out[i] = clamp((half + Σ_j in[first_i + j] · w_ij) >> P, 0, 255).
void resample_row(const uint8_t* in, uint8_t* out, const ResampleTaps& taps) {
  const int64_t half = int64_t{1} << (taps.precision - 1);
  for (int64_t i = 0; i < taps.out_size; ++i) {
    const int16_t* w = taps.weights.data() + i * taps.max_taps;
    const uint8_t* src = in + taps.first[static_cast<size_t>(i)];
    int64_t acc = half;
    const int64_t n = taps.count[static_cast<size_t>(i)];
    for (int64_t j = 0; j < n; ++j) acc += int64_t{src[j]} * w[j];
    out[i] = static_cast<uint8_t>(std::clamp<int64_t>(acc >> taps.precision, 0, 255));
  }
}

// Vertical: output row i of a plane [in_size, width] -> [out_size, width], the same sum per
// column, accumulated row by row (integer sums: the order does not change the result).
void resample_columns(const uint8_t* in, int64_t width, uint8_t* out, const ResampleTaps& taps,
                      std::vector<int64_t>& acc) {
  const int64_t half = int64_t{1} << (taps.precision - 1);
  acc.resize(static_cast<size_t>(width));
  for (int64_t i = 0; i < taps.out_size; ++i) {
    std::fill(acc.begin(), acc.end(), half);
    const int16_t* w = taps.weights.data() + i * taps.max_taps;
    const int64_t first = taps.first[static_cast<size_t>(i)];
    const int64_t n = taps.count[static_cast<size_t>(i)];
    for (int64_t j = 0; j < n; ++j) {
      const uint8_t* row = in + (first + j) * width;
      const int64_t wj = w[j];
      for (int64_t x = 0; x < width; ++x) acc[static_cast<size_t>(x)] += int64_t{row[x]} * wj;
    }
    uint8_t* dst = out + i * width;
    for (int64_t x = 0; x < width; ++x) {
      dst[x] = static_cast<uint8_t>(
          std::clamp<int64_t>(acc[static_cast<size_t>(x)] >> taps.precision, 0, 255));
    }
  }
}

}  // namespace

ResampleTaps bicubic_aa_taps(int64_t in_size, int64_t out_size) {
  ResampleTaps t;
  t.in_size = in_size;
  t.out_size = out_size;
  const double scale = static_cast<double>(in_size) / static_cast<double>(out_size);
  const double support = scale >= 1.0 ? (4 * 0.5) * scale : 4 * 0.5;
  const double inv_scale = scale >= 1.0 ? 1.0 / scale : 1.0;
  t.max_taps = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  t.first.resize(static_cast<size_t>(out_size));
  t.count.resize(static_cast<size_t>(out_size));

  std::vector<double> w(static_cast<size_t>(out_size * t.max_taps), 0.0);
  double w_max = 0.0;
  for (int64_t i = 0; i < out_size; ++i) {
    const double center = scale * (static_cast<double>(i) + 0.5);
    const int64_t first = std::max(static_cast<int64_t>(center - support + 0.5), int64_t{0});
    int64_t count = std::min(static_cast<int64_t>(center + support + 0.5), in_size) - first;
    count = std::clamp(count, int64_t{0}, t.max_taps);
    double* wi = w.data() + i * t.max_taps;
    double total = 0.0;
    for (int64_t j = 0; j < count; ++j) {
      wi[j] = keys_cubic((static_cast<double>(j + first) - center + 0.5) * inv_scale);
      total += wi[j];
    }
    if (total != 0.0) {
      for (int64_t j = 0; j < count; ++j) {
        wi[j] /= total;
        w_max = std::max(w_max, wi[j]);
      }
    }
    t.first[static_cast<size_t>(i)] = first;
    t.count[static_cast<size_t>(i)] = count;
  }

  // The most fractional bits for which the largest weight, doubled, still fits in int16.
  int precision = 0;
  for (; precision < 22; ++precision) {
    const auto next = static_cast<int>(0.5 + w_max * (1 << (precision + 1)));
    if (next >= (1 << 15)) break;
  }
  t.precision = precision;
  t.weights.resize(w.size());
  for (size_t k = 0; k < w.size(); ++k) {
    const double v = w[k] * (1 << precision);
    t.weights[k] =
        static_cast<int16_t>(v < 0 ? static_cast<int>(-0.5 + v) : static_cast<int>(0.5 + v));
  }
  return t;
}

Result<RgbImage> resize_bicubic_aa(const RgbImage& image, int64_t height, int64_t width) {
  if (height < 1 || width < 1 || image.height < 1 || image.width < 1 ||
      image.planes.size() != 3 * image.plane_size()) {
    return make_error(ErrorCode::invalid_argument,
                      "resize: bad sizes " + std::to_string(image.width) + "x" +
                          std::to_string(image.height) + " -> " + std::to_string(width) + "x" +
                          std::to_string(height));
  }
  const ResampleTaps h_taps = bicubic_aa_taps(image.width, width);
  const ResampleTaps v_taps = bicubic_aa_taps(image.height, height);
  if (h_taps.precision < 1 || v_taps.precision < 1) {
    return make_error(ErrorCode::internal, "resize: degenerate resampling weights");
  }
  RgbImage cur = image;
  if (width != cur.width) {  // horizontal pass first, rounded to uint8
    RgbImage next{cur.height, width,
                  std::vector<uint8_t>(static_cast<size_t>(3 * cur.height * width))};
    for (int c = 0; c < 3; ++c) {
      for (int64_t y = 0; y < cur.height; ++y) {
        resample_row(cur.plane(c) + y * cur.width, next.plane(c) + y * width, h_taps);
      }
    }
    cur = std::move(next);
  }
  if (height != cur.height) {  // then the vertical pass over its output
    RgbImage next{height, cur.width,
                  std::vector<uint8_t>(static_cast<size_t>(3 * height * cur.width))};
    std::vector<int64_t> acc;
    for (int c = 0; c < 3; ++c)
      resample_columns(cur.plane(c), cur.width, next.plane(c), v_taps, acc);
    cur = std::move(next);
  }
  return cur;
}

}  // namespace ferry
