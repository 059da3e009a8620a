// Helpers for the vision-encoder and action-expert tests: random weight groups laid out like the
// real ones (256-byte aligned tensors in one buffer), device read-back, and float64 reference
// pieces that follow the spec's rounding points.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "core/bf16.h"
#include "model/weights.h"

namespace ferry::testing_visexp {

inline double bf(double v) {
  return static_cast<double>(round_bf16(static_cast<float>(v)));
}
inline double f32(double v) {
  return static_cast<double>(static_cast<float>(v));
}

using Mat = std::vector<double>;  // row-major

// A weight group with random bf16 contents, on the device and mirrored on the host.
struct TestGroup {
  WeightGroup group;
  std::vector<uint8_t> host;
  DeviceBuffer device;

  // The tensor's values as doubles (exact bf16 values).
  Mat get(const std::string& name) const {
    const WeightSpec* s = group.find(name);
    EXPECT_NE(s, nullptr) << name;
    if (s == nullptr) return {};
    Mat out(s->bytes / 2);
    for (size_t i = 0; i < out.size(); ++i) {
      uint16_t b;
      std::memcpy(&b, host.data() + s->offset + 2 * i, 2);
      out[i] = bf16_to_f32(b);
    }
    return out;
  }
  void* base() const { return device.data(); }
};

inline TestGroup make_group(
    Backend& backend, Stream& stream, const std::string& name, GroupKind kind,
    const std::vector<std::pair<std::string, std::vector<int64_t>>>& tensors, uint64_t seed) {
  TestGroup g;
  g.group.name = name;
  g.group.kind = kind;
  uint64_t offset = 0;
  for (const auto& [local, shape] : tensors) {
    WeightSpec s;
    s.checkpoint_name = name + "." + local;
    s.local_name = local;
    s.dtype = DType::bf16;
    s.shape = shape;
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    s.offset = offset;
    s.bytes = static_cast<uint64_t>(n) * 2;
    offset = (offset + s.bytes + kGroupAlignment - 1) / kGroupAlignment * kGroupAlignment;
    g.group.tensors.push_back(s);
  }
  g.group.bytes = offset;
  g.host.assign(offset, 0);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (const WeightSpec& s : g.group.tensors) {
    const std::string& n = s.local_name;
    const bool is_norm = n.find("norm") != std::string::npos && n.find("bias") == std::string::npos;
    const bool is_bias = n.find("bias") != std::string::npos;
    const int64_t fan_in = s.shape.size() >= 2 ? static_cast<int64_t>(s.bytes / 2) / s.shape[0] : 1;
    for (uint64_t i = 0; i < s.bytes / 2; ++i) {
      double v = u(rng);
      if (is_norm) {
        v = 1.0 + 0.2 * v;
      } else if (is_bias) {
        v = 0.2 * v;
      } else if (n == "pos_embed") {
        v = 0.5 * v;
      } else {
        v = 1.5 * v / std::sqrt(static_cast<double>(fan_in));
      }
      const uint16_t b = f32_to_bf16(static_cast<float>(v));
      std::memcpy(g.host.data() + s.offset + 2 * i, &b, 2);
    }
  }
  auto dev = backend.allocate(offset);
  EXPECT_TRUE(dev.ok());
  g.device = std::move(dev).value();
  backend.copy_to_device(stream, g.device.data(), g.host.data(), g.host.size());
  EXPECT_TRUE(backend.synchronize(stream).ok());
  return g;
}

// A contiguous device view read back as doubles.
inline Mat read_back(Backend& backend, Stream& stream, const TensorView& v) {
  EXPECT_EQ(v.stride(), v.cols);
  const size_t n = static_cast<size_t>(v.rows * v.cols);
  Mat out(n);
  if (v.dtype == DType::bf16) {
    std::vector<uint16_t> raw(n);
    backend.copy_to_host(stream, raw.data(), v.data, n * 2);
    EXPECT_TRUE(backend.synchronize(stream).ok());
    for (size_t i = 0; i < n; ++i) out[i] = bf16_to_f32(raw[i]);
  } else {
    EXPECT_EQ(v.dtype, DType::f32);
    std::vector<float> raw(n);
    backend.copy_to_host(stream, raw.data(), v.data, n * 4);
    EXPECT_TRUE(backend.synchronize(stream).ok());
    for (size_t i = 0; i < n; ++i) out[i] = raw[i];
  }
  return out;
}

// y = x·wᵀ + b with the input rounded to bf16, accumulated in double; y rounded to bf16 (then the
// activation applied to the rounded value and rounded again) unless `out_f32`.
enum class Act { none, silu, gelu_tanh, gelu_erf };
inline double apply(Act a, double u) {
  switch (a) {
    case Act::none:
      return u;
    case Act::silu:
      return u / (1.0 + std::exp(-u));
    case Act::gelu_tanh:
      return 0.5 * u * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (u + 0.044715 * u * u * u)));
    case Act::gelu_erf:
      return 0.5 * u * (1.0 + std::erf(u / std::sqrt(2.0)));
  }
  return u;
}
inline Mat linear(const Mat& x, int64_t m, int64_t k, const Mat& w, int64_t n, const Mat* bias,
                  Act act = Act::none, bool out_f32 = false) {
  Mat y(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t o = 0; o < n; ++o) {
      double acc = bias != nullptr ? (*bias)[static_cast<size_t>(o)] : 0.0;
      for (int64_t j = 0; j < k; ++j) {
        acc += bf(x[static_cast<size_t>(i * k + j)]) * w[static_cast<size_t>(o * k + j)];
      }
      y[static_cast<size_t>(i * n + o)] = out_f32 ? f32(apply(act, acc)) : bf(apply(act, bf(acc)));
    }
  }
  return y;
}

inline Mat layer_norm(const Mat& x, int64_t m, int64_t n, const Mat& w, const Mat& b, double eps,
                      bool out_f32 = false) {
  Mat y(x.size());
  for (int64_t i = 0; i < m; ++i) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < n; ++j) mean += x[static_cast<size_t>(i * n + j)];
    mean /= static_cast<double>(n);
    for (int64_t j = 0; j < n; ++j) {
      const double d = x[static_cast<size_t>(i * n + j)] - mean;
      var += d * d;
    }
    var /= static_cast<double>(n);
    for (int64_t j = 0; j < n; ++j) {
      const auto idx = static_cast<size_t>(i * n + j);
      const double v = (x[idx] - mean) / std::sqrt(var + eps) * w[static_cast<size_t>(j)] +
                       b[static_cast<size_t>(j)];
      y[idx] = out_f32 ? f32(v) : bf(v);
    }
  }
  return y;
}

// RMSNorm over `dim`-wide chunks. bf16 stream: bf16(bf16(n)·w); f32 stream: n·w.
inline Mat rms_norm(const Mat& x, int64_t m, int64_t n, int64_t dim, const Mat& w, double eps,
                    bool f32_stream) {
  Mat y(x.size());
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t c = 0; c < n; c += dim) {
      double ss = 0;
      for (int64_t j = 0; j < dim; ++j) {
        const double v = x[static_cast<size_t>(i * n + c + j)];
        ss += v * v;
      }
      const double r = 1.0 / std::sqrt(ss / static_cast<double>(dim) + eps);
      for (int64_t j = 0; j < dim; ++j) {
        const auto idx = static_cast<size_t>(i * n + c + j);
        const double nv = x[idx] * r;
        y[idx] = f32_stream ? f32(nv * w[static_cast<size_t>(j)])
                            : bf(bf(nv) * w[static_cast<size_t>(j)]);
      }
    }
  }
  return y;
}

// Half-split rotary in fp32-like arithmetic, rounded once to bf16. cos/sin: [m, head_dim/2].
inline void rope(Mat& x, int64_t m, int64_t heads, int64_t head_dim, const Mat& cos,
                 const Mat& sin) {
  const int64_t half = head_dim / 2, n = heads * head_dim;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t j = 0; j < half; ++j) {
        const auto a = static_cast<size_t>(i * n + h * head_dim + j);
        const auto b = a + static_cast<size_t>(half);
        const double c = cos[static_cast<size_t>(i * half + j)];
        const double s = sin[static_cast<size_t>(i * half + j)];
        const double xa = x[a], xb = x[b];
        x[a] = bf(xa * c - xb * s);
        x[b] = bf(xb * c + xa * s);
      }
    }
  }
}

// Non-causal attention of q [m, heads·hd] over keys/values [t, kv_heads·hd]; bf16 out.
inline Mat attention(const Mat& q, int64_t m, const Mat& k, const Mat& v, int64_t t, int64_t heads,
                     int64_t kv_heads, int64_t hd) {
  Mat out(static_cast<size_t>(m * heads * hd));
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  const int64_t group = heads / kv_heads, qn = heads * hd, kn = kv_heads * hd;
  std::vector<double> s(static_cast<size_t>(t));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t kh = h / group;
      double mx = -1e300;
      for (int64_t j = 0; j < t; ++j) {
        double d = 0;
        for (int64_t e = 0; e < hd; ++e) {
          d += q[static_cast<size_t>(i * qn + h * hd + e)] *
               k[static_cast<size_t>(j * kn + kh * hd + e)];
        }
        s[static_cast<size_t>(j)] = d * scale;
        mx = std::max(mx, d * scale);
      }
      double z = 0;
      for (double& e : s) z += (e = std::exp(e - mx));
      for (int64_t e = 0; e < hd; ++e) {
        double acc = 0;
        for (int64_t j = 0; j < t; ++j) {
          acc += s[static_cast<size_t>(j)] * v[static_cast<size_t>(j * kn + kh * hd + e)];
        }
        out[static_cast<size_t>(i * qn + h * hd + e)] = bf(acc / z);
      }
    }
  }
  return out;
}

// Columns [first, first + count) of a row-major [m, n] matrix.
inline Mat cols(const Mat& x, int64_t m, int64_t n, int64_t first, int64_t count) {
  Mat out(static_cast<size_t>(m * count));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < count; ++j) {
      out[static_cast<size_t>(i * count + j)] = x[static_cast<size_t>(i * n + first + j)];
    }
  }
  return out;
}

// Every |got − want| within atol + rtol·|want|; reports the worst element.
inline void expect_close(const Mat& got, const Mat& want, double atol, double rtol,
                         const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t worst = 0;
  double worst_excess = -1;
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double lim = atol + rtol * std::abs(want[i]);
    const double err = std::abs(got[i] - want[i]);
    if (!(err <= lim)) ++bad;
    if (!(err - lim <= worst_excess)) {
      worst_excess = err - lim;
      worst = i;
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size()
                     << " elements out of tolerance; worst at " << worst << ": got " << got[worst]
                     << ", want " << want[worst];
}

}  // namespace ferry::testing_visexp
