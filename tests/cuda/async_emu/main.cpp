#include "emu.cpp"
// run_attention's host logic, the combine, and a double reference.
int attention_splits(int64_t q_rows, int nh, int nkv, int64_t keys, int rpb) {
  const int group = nh / nkv;
  const int64_t blocks = (q_rows * group + rpb - 1) / rpb * nkv;
  if (blocks >= 132 || keys <= 128) return 1;
  int64_t splits = (264 + blocks - 1) / blocks;
  const int64_t by_keys = (keys + 127) / 128;
  if (splits > by_keys) splits = by_keys;
  if (splits > 128) splits = 128;
  return (int)(splits < 1 ? 1 : splits);
}
struct Shape {
  int64_t S, span0, span1;
  int H, KV, hd;
  bool causal;
  int64_t p0;
  bool fused;
  std::vector<int32_t> seg;
  int64_t max_rows;
  bool dev_pos;
};
std::mt19937_64 rng(1);
bf16_t rnd(float sc) {
  std::uniform_real_distribution<float> d(-sc, sc);
  return f32_to_bf16(d(rng));
}

int run(const Shape& a, int variant /*1 w4, 2 w8, 3 w4m2*/) {
  const int64_t qc = (int64_t)a.H * a.hd, kc = (int64_t)a.KV * a.hd;
  std::vector<bf16_t> qkv, q, k0, v0, k1, v1;
  const bf16_t *qp, *kp[2] = {nullptr, nullptr}, *vp[2] = {nullptr, nullptr};
  int64_t qs, ks[2] = {0, 0}, vs[2] = {0, 0};
  if (a.fused) {
    int64_t w = qc + 2 * kc;
    qkv.resize(a.S * w);
    for (auto& x : qkv) x = rnd(2);
    qp = qkv.data();
    qs = w;
    kp[0] = qkv.data() + qc;
    vp[0] = qkv.data() + qc + kc;
    ks[0] = vs[0] = w;
  } else {
    q.resize(a.S * qc);
    for (auto& x : q) x = rnd(2);
    k0.resize(std::max<int64_t>(a.span0, 1) * kc);
    for (auto& x : k0) x = rnd(2);
    v0.resize(std::max<int64_t>(a.span0, 1) * kc);
    for (auto& x : v0) x = rnd(1);
    qp = q.data();
    qs = qc;
    kp[0] = k0.data();
    vp[0] = v0.data();
    ks[0] = vs[0] = kc;
  }
  int spans = 1;
  if (a.span1 > 0) {
    k1.resize(a.span1 * (kc + 8));
    v1.resize(a.span1 * (kc + 8));
    for (auto& x : k1) x = rnd(2);
    for (auto& x : v1) x = rnd(1);
    kp[1] = k1.data();
    vp[1] = v1.data();
    ks[1] = vs[1] = kc + 8;
    spans = 2;
  }
  const int64_t span0 = a.fused ? a.S : a.span0;
  const int64_t keys = span0 + (spans == 2 ? a.span1 : 0);
  std::vector<bf16_t> out(a.S * qc, 0x7f7f);
  AttnParams p{};
  p.q = qp;
  p.q_stride = qs;
  for (int s = 0; s < 2; ++s) {
    p.k[s] = kp[s];
    p.v[s] = vp[s];
    p.k_stride[s] = ks[s];
    p.v_stride[s] = vs[s];
  }
  p.span0 = span0;
  p.seq = a.S;
  p.keys = keys;
  p.out = out.data();
  p.out_stride = qc;
  p.heads = a.H;
  p.group = a.H / a.KV;
  p.head_dim = a.hd;
  p.scale_log2 = (1.0f / std::sqrt((float)a.hd)) * 1.4426950408889634f;
  p.causal = a.causal;
  p.q_pos0 = a.p0;
  int32_t p0dev = (int32_t)a.p0;
  if (a.dev_pos) p.q_pos0_dev = &p0dev;
  const int padded = a.hd == 64 ? 64 : (a.hd == 128 ? 128 : 80);
  int rpb = 64;
  if (variant == 2) rpb = 128;
  if (variant == 3 && padded <= 80) rpb = 128;
  const bool segmented = !a.seg.empty();
  const int splits = segmented ? 1 : attention_splits(a.S, a.H, a.KV, keys, rpb);
  int64_t per = (keys + splits - 1) / splits;
  per = (per + 63) / 64 * 64;
  if (per == 0) per = 64;
  p.keys_per_split = per;
  int64_t row_blocks = (a.S * p.group + rpb - 1) / rpb;
  std::vector<int32_t> segs = a.seg;
  int64_t max_rows = a.max_rows;
  if (segmented) {
    if (max_rows == 0)
      for (size_t i = 1; i < segs.size(); ++i)
        max_rows = std::max<int64_t>(max_rows, segs[i] - segs[i - 1]);
    p.segments = segs.data();
    p.segments_stride = 1;
    p.max_segment_rows = max_rows;
    p.seg_row_blocks = (max_rows * p.group + rpb - 1) / rpb;
    row_blocks = (int64_t)(segs.size() - 1) * p.seg_row_blocks;
  }
  const int64_t prow = a.S * a.H;
  std::vector<float> part;
  if (splits > 1) {
    part.assign(splits * prow * (a.hd + 2), NAN);
    p.part_acc = part.data();
    p.part_ml = part.data() + splits * prow * a.hd;
  }
  dim3 grid{(unsigned)row_blocks, (unsigned)a.KV, (unsigned)splits};
  auto L = [&](auto f) { f(); };
  if (padded == 64) {
    if (variant == 1)
      launch<64, 4, 1>(p, grid);
    else if (variant == 2)
      launch<64, 8, 1>(p, grid);
    else
      launch<64, 4, 2>(p, grid);
  } else if (padded == 80) {
    if (variant == 1)
      launch<80, 4, 1>(p, grid);
    else if (variant == 2)
      launch<80, 8, 1>(p, grid);
    else
      launch<80, 4, 2>(p, grid);
  } else {
    if (variant == 2)
      launch<128, 8, 1>(p, grid);
    else
      launch<128, 4, 1>(p, grid);
  }
  (void)L;
  if (splits > 1) {
    for (int64_t r = 0; r < prow; ++r) {
      float mx = -INFINITY;
      for (int s = 0; s < splits; ++s) mx = std::max(mx, p.part_ml[(s * prow + r) * 2]);
      std::vector<float> w(splits);
      double l = 0;
      for (int s = 0; s < splits; ++s) {
        float ms = p.part_ml[(s * prow + r) * 2];
        w[s] = ms != -INFINITY ? std::exp2(ms - mx) : 0;
        l += p.part_ml[(s * prow + r) * 2 + 1] * w[s];
      }
      for (int d = 0; d < a.hd; ++d) {
        double acc = 0;
        for (int s = 0; s < splits; ++s) acc += p.part_acc[(s * prow + r) * a.hd + d] * w[s];
        out[(r / a.H) * qc + (r % a.H) * a.hd + d] =
            f32_to_bf16((mx != -INFINITY && l > 0) ? (float)(acc / l) : 0.f);
      }
    }
  }
  // reference
  double maxerr = 0;
  int64_t bad = 0;
  auto key_row = [&](int64_t key, const bf16_t* const* base, const int64_t* st, int kvh) {
    int s = key < span0 ? 0 : 1;
    int64_t row = s == 0 ? key : key - span0;
    return base[s] + row * st[s] + kvh * a.hd;
  };
  for (int64_t i = 0; i < a.S; ++i) {
    int64_t kb = 0, ke = keys;
    if (segmented) {
      for (size_t s = 0; s + 1 < segs.size(); ++s)
        if (i >= segs[s] && i < segs[s + 1]) {
          kb = segs[s];
          ke = segs[s + 1];
        }
    }
    if (a.causal) ke = std::min<int64_t>(ke, a.p0 + i + 1);
    for (int h = 0; h < a.H; ++h) {
      int kvh = h / p.group;
      const bf16_t* qr = qp + i * qs + h * a.hd;
      std::vector<double> sc;
      double m = -1e300;
      for (int64_t j = kb; j < ke; ++j) {
        const bf16_t* kr = key_row(j, kp, ks, kvh);
        double d = 0;
        for (int e = 0; e < a.hd; ++e) d += (double)bf16_to_f32(qr[e]) * bf16_to_f32(kr[e]);
        d /= std::sqrt((double)a.hd);
        sc.push_back(d);
        m = std::max(m, d);
      }
      double l = 0;
      for (auto& x : sc) {
        x = std::exp(x - m);
        l += x;
      }
      for (int e = 0; e < a.hd; ++e) {
        double o = 0;
        for (int64_t j = kb; j < ke; ++j) o += sc[j - kb] * bf16_to_f32(key_row(j, vp, vs, kvh)[e]);
        o = l > 0 ? o / l : 0;
        double got = bf16_to_f32(out[i * qc + h * a.hd + e]);
        double err = std::fabs(got - o);
        if (!(err <= 0.00195 + 0.0156 * std::fabs(o))) {
          ++bad;
          if (bad <= 3)
            std::printf("  bad i=%lld h=%d e=%d got %g want %g\n", (long long)i, h, e, got, o);
        }
        if (err > maxerr || std::isnan(err)) maxerr = std::isnan(err) ? 1e9 : err;
      }
    }
  }
  std::printf(
      "S=%lld L=%lld+%lld H=%d/%d hd=%d causal=%d p0=%lld fused=%d seg=%zu variant=%d splits=%d: "
      "max_err=%g bad=%lld\n",
      (long long)a.S, (long long)a.span0, (long long)a.span1, a.H, a.KV, a.hd, a.causal,
      (long long)a.p0, a.fused, a.seg.size(), variant, splits, maxerr, (long long)bad);
  return bad == 0;
}
int main(int argc, char** argv) {
  int which = argc > 1 ? atoi(argv[1]) : 0;
  std::vector<std::pair<Shape, int>> cases = {
      {{37, 37, 0, 4, 2, 64, true, 0, true, {}, 0, false}, 3},
      {{70, 70, 0, 2, 1, 64, true, 0, false, {}, 0, false}, 3},
      {{40, 0, 40, 4, 2, 64, true, 0, false, {}, 0, false}, 3},
      {{37, 37, 0, 4, 2, 64, true, 0, true, {}, 0, false}, 1},
      {{97, 97, 0, 2, 2, 72, false, 0, false, {0, 40, 97}, 97, false}, 1},
      {{128, 128, 0, 8, 2, 128, true, 0, true, {}, 0, false}, 1},
      {{300, 300, 0, 4, 4, 72, false, 0, false, {}, 0, false}, 3},
      {{400, 400, 0, 4, 4, 72, false, 0, false, {0, 100, 200, 300, 400}, 0, false}, 1},
      {{333, 333, 0, 4, 4, 72, false, 0, true, {0, 1, 38, 121, 200, 333}, 0, false}, 2},
      {{177, 177, 0, 4, 4, 128, false, 0, false, {0, 50, 177}, 0, false}, 1},
      {{200, 800, 200, 8, 2, 128, true, 800, false, {}, 0, false}, 3},
      {{64, 2048, 0, 16, 4, 128, true, 1436, false, {}, 0, true}, 1},
  };
  for (size_t i = 0; i < cases.size(); ++i)
    if (which == 0 || which == (int)i + 1) run(cases[i].first, cases[i].second);
}
