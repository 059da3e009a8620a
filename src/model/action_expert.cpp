#include "model/action_expert.h"

#include <cmath>
#include <limits>
#include <string>

#include "core/bf16.h"
#include "core/finite.h"
#include "model/group_view.h"
#include "model/projections.h"

namespace ferry {

namespace {

Error invalid(const std::string& msg) {
  return make_error(ErrorCode::invalid_argument, "action expert: " + msg);
}

}  // namespace

std::vector<float> fourier_frequencies(int64_t num_fourier_feats, double max_freq,
                                       FourierFreqs precision) {
  const int64_t count = num_fourier_feats / 2;
  std::vector<float> f(static_cast<size_t>(count > 0 ? count : 0));
  const double top = std::log10(max_freq);
  for (int64_t k = 0; k < count; ++k) {
    const double e = count > 1 ? top * static_cast<double>(k) / static_cast<double>(count - 1) : 0;
    auto v = static_cast<float>(std::pow(10.0, e));
    if (precision == FourierFreqs::bf16_rounded) v = round_bf16(v);
    f[static_cast<size_t>(k)] = v;
  }
  return f;
}

void fourier_features(std::span<const float> x, int64_t tokens, int64_t dims, float t,
                      std::span<const float> freqs, std::span<float> out) {
  const auto half = static_cast<int64_t>(freqs.size());
  const int64_t width = (dims + 1) * 2 * half;
  FERRY_CHECK(static_cast<int64_t>(x.size()) == tokens * dims, "fourier_features: x size");
  FERRY_CHECK(static_cast<int64_t>(out.size()) == tokens * width, "fourier_features: out size");
  const auto pi = static_cast<float>(3.14159265358979323846);
  const auto sqrt2 = static_cast<float>(1.41421356237309504880);
  auto phi = [&](float u, float* dst) {
    for (int64_t k = 0; k < half; ++k) {
      const float a = u * freqs[static_cast<size_t>(k)] * 2.0f * pi;
      dst[k] = std::sin(a) * sqrt2;
      dst[half + k] = std::cos(a) * sqrt2;
    }
  };
  for (int64_t i = 0; i < tokens; ++i) {
    float* row = out.data() + i * width;
    for (int64_t d = 0; d < dims; ++d)
      phi(x[static_cast<size_t>(i * dims + d)], row + d * 2 * half);
    phi(t, row + dims * 2 * half);
  }
}

Result<ActionExpert> ActionExpert::create(const AlpamayoConfig& config, Backend& backend,
                                          ExpertOptions options) {
  const TextConfig& x = config.expert;
  const ActionInProjConfig& in = config.action_in_proj;
  if (x.hidden_size <= 0 || x.num_heads <= 0 || x.num_kv_heads <= 0 || x.head_dim <= 0 ||
      x.intermediate_size <= 0 || x.num_layers <= 0) {
    return invalid("expert config has a non-positive dimension");
  }
  if (x.num_heads % x.num_kv_heads != 0 || x.head_dim % 2 != 0) {
    return invalid("heads must be a multiple of kv heads and head_dim even");
  }
  if (in.num_fourier_feats <= 0 || in.num_fourier_feats % 2 != 0 || in.hidden_size <= 0 ||
      in.num_enc_layers < 1 || !(in.max_freq > 0)) {
    return invalid("action_in_proj config is invalid");
  }
  if (config.action_space.num_waypoints <= 0 || config.action_space.action_dims <= 0) {
    return invalid("action space is empty");
  }
  if (config.diffusion.num_inference_steps <= 0) return invalid("no diffusion steps");

  ActionExpert e;
  e.config_ = config;
  e.options_ = options;
  e.backend_ = &backend;
  e.tokens_ = config.action_space.num_waypoints;
  e.grid_ = euler_time_grid(config.diffusion.num_inference_steps);
  e.freqs_ = fourier_frequencies(in.num_fourier_feats, in.max_freq, options.fourier_freqs);
  const int64_t s = e.tokens_, dims = config.action_space.action_dims;
  const int64_t feats = (dims + 1) * in.num_fourier_feats;
  e.features_host_.assign(static_cast<size_t>(s * feats), 0.0f);
  e.v_raw_.assign(static_cast<size_t>(s * dims), 0);
  e.v_host_.assign(static_cast<size_t>(s * dims), 0.0f);

  Backend& b = backend;
  const int64_t h = x.hidden_size, qd = x.num_heads * x.head_dim, kvd = x.num_kv_heads * x.head_dim;
  FERRY_ASSIGN_OR_RETURN(e.features_,
                         allocate_matrix(b, s, feats, DType::f32, "expert activations"));
  FERRY_ASSIGN_OR_RETURN(e.mlp_a_,
                         allocate_matrix(b, s, in.hidden_size, DType::bf16, "expert activations"));
  FERRY_ASSIGN_OR_RETURN(e.mlp_b_,
                         allocate_matrix(b, s, in.hidden_size, DType::bf16, "expert activations"));
  FERRY_ASSIGN_OR_RETURN(e.enc_, allocate_matrix(b, s, h, DType::bf16, "expert activations"));
  FERRY_ASSIGN_OR_RETURN(e.h_, allocate_matrix(b, s, h, DType::f32, "expert activations"));
  FERRY_ASSIGN_OR_RETURN(e.norm_, allocate_matrix(b, s, h, DType::f32, "expert activations"));
  FERRY_ASSIGN_OR_RETURN(e.qkv_,
                         allocate_matrix(b, s, qd + 2 * kvd, DType::bf16, "expert activations"));
  FERRY_ASSIGN_OR_RETURN(e.attn_, allocate_matrix(b, s, qd, DType::bf16, "expert activations"));
  FERRY_ASSIGN_OR_RETURN(e.o_, allocate_matrix(b, s, h, DType::bf16, "expert activations"));
  FERRY_ASSIGN_OR_RETURN(e.gate_up_, allocate_matrix(b, s, 2 * x.intermediate_size, DType::bf16,
                                                     "expert activations"));
  FERRY_ASSIGN_OR_RETURN(
      e.act_, allocate_matrix(b, s, x.intermediate_size, DType::bf16, "expert activations"));
  FERRY_ASSIGN_OR_RETURN(e.pos_, allocate_matrix(b, s, 3, DType::i32, "expert activations"));
  FERRY_ASSIGN_OR_RETURN(e.cos_,
                         allocate_matrix(b, s, x.head_dim / 2, DType::f32, "expert activations"));
  FERRY_ASSIGN_OR_RETURN(e.sin_,
                         allocate_matrix(b, s, x.head_dim / 2, DType::f32, "expert activations"));
  FERRY_ASSIGN_OR_RETURN(e.velocity_,
                         allocate_matrix(b, s, dims, DType::bf16, "expert activations"));
  return e;
}

void ActionExpert::begin(uint64_t seed) {
  begin_with(gaussian_noise(seed, tokens_ * config_.action_space.action_dims));
}

void ActionExpert::begin_with(std::vector<float> x0) {
  FERRY_CHECK(static_cast<int64_t>(x0.size()) == tokens_ * config_.action_space.action_dims,
              "begin_with: x0 must be [num_waypoints, action_dims]");
  x_ = std::move(x0);
}

uint64_t ActionExpert::activation_bytes() const {
  uint64_t total = 0;
  for (const DeviceBuffer* d : {&features_, &mlp_a_, &mlp_b_, &enc_, &h_, &norm_, &qkv_, &attn_,
                                &o_, &gate_up_, &act_, &pos_, &cos_, &sin_, &velocity_}) {
    total += d->bytes();
  }
  return total;
}

TensorView ActionExpert::residual() const {
  return buffer_view(h_, DType::f32, tokens_, config_.expert.hidden_size);
}

Status ActionExpert::run_in(Stream& stream, int step, const WeightGroup& group, void* base) {
  if (step < 0 || step >= num_steps()) return invalid("step out of range");
  if (x_.empty()) return invalid("run_in before begin");
  const ActionInProjConfig& in = config_.action_in_proj;
  const int64_t s = tokens_, dims = config_.action_space.action_dims;
  const int64_t feats = (dims + 1) * in.num_fourier_feats, mid = in.hidden_size;
  const int64_t h = config_.expert.hidden_size;
  const auto eps = static_cast<float>(in.norm_eps);

  // The previous step's run_out synchronized the stream, so the host rows are free to rewrite.
  fourier_features(x_, s, dims, grid_.times[static_cast<size_t>(step)], freqs_, features_host_);
  Backend& b = *backend_;
  b.copy_to_device(stream, features_.data(), features_host_.data(),
                   features_host_.size() * sizeof(float));

  // trunk: Linear, SiLU, then (RMSNorm, Linear, SiLU) × (layers − 1), RMSNorm, Linear.
  TensorView cur = buffer_view(features_, DType::f32, s, feats);
  TensorView bufs[2] = {buffer_view(mlp_a_, DType::bf16, s, mid),
                        buffer_view(mlp_b_, DType::bf16, s, mid)};
  int64_t index = 0;
  for (int64_t layer = 0; layer <= in.num_enc_layers; ++layer) {
    const bool last = layer == in.num_enc_layers;
    const int64_t out_cols = last ? h : mid;
    const int64_t in_cols = layer == 0 ? feats : mid;
    if (layer > 0) {
      const std::string nname = "trunk." + std::to_string(index) + ".weight";
      FERRY_ASSIGN_OR_RETURN(TensorView nw, group_tensor(group, base, nname, 1, mid));
      FERRY_RETURN_IF_ERROR(b.run(stream, RmsNorm{cur, nw, cur, mid, eps}));
      ++index;
    }
    const std::string lname = "trunk." + std::to_string(index);
    FERRY_ASSIGN_OR_RETURN(TensorView w,
                           group_tensor(group, base, lname + ".weight", out_cols, in_cols));
    TensorView bias;
    if (group_has(group, lname + ".bias")) {
      FERRY_ASSIGN_OR_RETURN(bias, group_tensor(group, base, lname + ".bias", 1, out_cols));
    }
    const TensorView y = last ? buffer_view(enc_, DType::bf16, s, h) : bufs[layer % 2];
    FERRY_RETURN_IF_ERROR(
        b.run(stream, Linear{cur, w, bias, y, last ? Activation::none : Activation::silu}));
    cur = y;
    index += last ? 1 : 2;  // the SiLU module takes an index too
  }
  FERRY_ASSIGN_OR_RETURN(TensorView lw, group_tensor(group, base, "norm.weight", 1, h));
  FERRY_ASSIGN_OR_RETURN(TensorView lb, group_tensor(group, base, "norm.bias", 1, h));
  // LayerNorm under autocast runs in fp32: the expert's residual stream starts fp32 (spec §6.2).
  return b.run(stream, LayerNorm{cur, lw, lb, residual(), eps});
}

Status ActionExpert::prepare_rope(Stream& stream, int64_t rope_pos0) {
  if (rope_ready_ && rope_pos0 == rope_pos0_) return Status::ok_status();
  if (rope_pos0 < 0 || rope_pos0 + tokens_ > std::numeric_limits<int32_t>::max()) {
    return invalid("rope_pos0 out of range");
  }
  Backend& b = *backend_;
  // A pending upload may still read pos_host_.
  if (rope_ready_) FERRY_RETURN_IF_ERROR(b.synchronize(stream));
  pos_host_.assign(static_cast<size_t>(tokens_ * 3), 0);
  for (int64_t j = 0; j < tokens_; ++j) {
    for (int64_t r = 0; r < 3; ++r) {
      pos_host_[static_cast<size_t>(j * 3 + r)] = static_cast<int32_t>(rope_pos0 + j);
    }
  }
  b.copy_to_device(stream, pos_.data(), pos_host_.data(), pos_host_.size() * sizeof(int32_t));
  const TextConfig& x = config_.expert;
  RopeTable op;
  op.pos = buffer_view(pos_, DType::i32, tokens_, 3);
  op.cos = buffer_view(cos_, DType::f32, tokens_, x.head_dim / 2);
  op.sin = buffer_view(sin_, DType::f32, tokens_, x.head_dim / 2);
  op.theta = static_cast<float>(x.rope_theta);
  op.head_dim = static_cast<int>(x.head_dim);
  // All three position rows are equal, so the section split does not change the angles.
  if (x.mrope_section.size() == 3) {
    op.sections = {x.mrope_section[0], x.mrope_section[1], x.mrope_section[2]};
  } else {
    op.sections = {static_cast<int>(x.head_dim / 2), 0, 0};
  }
  FERRY_RETURN_IF_ERROR(b.run(stream, op));
  rope_pos0_ = rope_pos0;
  rope_ready_ = true;
  return Status::ok_status();
}

Status ActionExpert::run_layer(Stream& stream, int layer, const WeightGroup& group, void* base,
                               const ExpertLayerContext& context) {
  const TextConfig& x = config_.expert;
  if (layer < 0 || layer >= x.num_layers) return invalid("layer out of range");
  switch (group.part) {
    case LayerPart::attention:
      return run_attention(stream, group, base, context);
    case LayerPart::gate_up:
      return run_gate_up(stream, group, base);
    case LayerPart::down:
      return run_down(stream, group, base);
    case LayerPart::whole:
      break;
  }
  return invalid(group.name + " is not a layer part");
}

Status ActionExpert::run_attention(Stream& stream, const WeightGroup& group, void* base,
                                   const ExpertLayerContext& context) {
  const TextConfig& x = config_.expert;
  const int64_t s = tokens_, h = x.hidden_size, hd = x.head_dim;
  const int64_t qd = x.num_heads * hd, kvd = x.num_kv_heads * hd;
  const ExpertLayerContext& c = context;
  if (c.cache_len < 0 || c.offset < 0 || c.offset > c.cache_len) {
    return invalid("offset must lie in [0, cache_len]");
  }
  if (c.offset > 0) {
    for (const TensorView* t : {&c.k_cache, &c.v_cache}) {
      if (t->dtype != DType::bf16 || t->cols != kvd || t->rows < c.cache_len) {
        return invalid("text cache must be bf16 [>= cache_len, " + std::to_string(kvd) + "]");
      }
    }
  }
  FERRY_ASSIGN_OR_RETURN(TensorView in_norm, group_tensor(group, base, "input_layernorm", 1, h));
  FERRY_ASSIGN_OR_RETURN(TensorView wq, group_tensor(group, base, "q_proj", qd, h));
  FERRY_ASSIGN_OR_RETURN(TensorView wk, group_tensor(group, base, "k_proj", kvd, h));
  FERRY_ASSIGN_OR_RETURN(TensorView wv, group_tensor(group, base, "v_proj", kvd, h));
  FERRY_ASSIGN_OR_RETURN(TensorView qn, group_tensor(group, base, "q_norm", 1, hd));
  FERRY_ASSIGN_OR_RETURN(TensorView kn, group_tensor(group, base, "k_norm", 1, hd));
  FERRY_ASSIGN_OR_RETURN(TensorView wo, group_tensor(group, base, "o_proj", h, qd));
  FERRY_RETURN_IF_ERROR(prepare_rope(stream, c.rope_pos0));

  Backend& b = *backend_;
  const auto eps = static_cast<float>(x.rms_norm_eps);
  const TensorView res = residual();
  const TensorView nrm = buffer_view(norm_, DType::f32, s, h);
  const TensorView qkv = buffer_view(qkv_, DType::bf16, s, qd + 2 * kvd);
  const TensorView q = qkv.slice_cols(0, qd);
  const TensorView k = qkv.slice_cols(qd, kvd);
  const TensorView v = qkv.slice_cols(qd + kvd, kvd);
  const TensorView att = buffer_view(attn_, DType::bf16, s, qd);
  const TensorView o = buffer_view(o_, DType::bf16, s, h);
  const TensorView cos = buffer_view(cos_, DType::f32, s, hd / 2);
  const TensorView sin = buffer_view(sin_, DType::f32, s, hd / 2);

  // Attention: RMSNorm in fp32, projections round their f32 input to bf16, per-head q/k norms
  // in bf16, rotary in fp32 rounded once (the expert's cos/sin are fp32, spec §6.3).
  FERRY_RETURN_IF_ERROR(b.run(stream, RmsNorm{res, in_norm, nrm, h, eps}));
  FERRY_RETURN_IF_ERROR(run_projections(b, stream, nrm, {wq, wk, wv}, qkv));
  const auto ihd = static_cast<int>(hd);
  // Per-head q and k norms (bf16), then rotary in fp32 on the adjacent q|k columns: one op.
  FERRY_RETURN_IF_ERROR(
      b.run(stream,
            QkNormRope{qkv.slice_cols(0, qd + kvd), qn, kn, cos, sin, static_cast<int>(x.num_heads),
                       static_cast<int>(x.num_kv_heads), ihd, eps, RopeMath::f32}));
  // Keys: the visible text prefix, then the expert's own 64 rows (its keys stay in its own
  // buffers; the text cache is only read). Non-causal.
  Attention a;
  a.q = q;
  if (c.offset > 0) {
    a.kv[0] = KvSpan{c.k_cache.slice_rows(0, c.offset), c.v_cache.slice_rows(0, c.offset)};
    a.kv[1] = KvSpan{k, v};
    a.num_spans = 2;
  } else {
    a.kv[0] = KvSpan{k, v};
    a.num_spans = 1;
  }
  a.out = att;
  a.num_heads = static_cast<int>(x.num_heads);
  a.num_kv_heads = static_cast<int>(x.num_kv_heads);
  a.head_dim = ihd;
  a.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  a.causal = false;
  FERRY_RETURN_IF_ERROR(b.run(stream, a));
  FERRY_RETURN_IF_ERROR(b.run(stream, Linear{att, wo, {}, o}));

  return {};
}

Status ActionExpert::run_gate_up(Stream& stream, const WeightGroup& group, void* base) {
  const TextConfig& x = config_.expert;
  const int64_t s = tokens_, h = x.hidden_size, inter = x.intermediate_size;
  FERRY_ASSIGN_OR_RETURN(TensorView post,
                         group_tensor(group, base, "post_attention_layernorm", 1, h));
  FERRY_ASSIGN_OR_RETURN(TensorView wg, group_tensor(group, base, "gate_proj", inter, h));
  FERRY_ASSIGN_OR_RETURN(TensorView wu, group_tensor(group, base, "up_proj", inter, h));
  Backend& b = *backend_;
  const auto eps = static_cast<float>(x.rms_norm_eps);
  const TensorView res = residual();
  const TensorView nrm = buffer_view(norm_, DType::f32, s, h);
  const TensorView o = buffer_view(o_, DType::bf16, s, h);
  // MLP on the fp32 stream.
  const TensorView gu = buffer_view(gate_up_, DType::bf16, s, 2 * inter);
  const TensorView act = buffer_view(act_, DType::bf16, s, inter);
  // The attention half's residual add and the MLP's norm in one op.
  FERRY_RETURN_IF_ERROR(b.run(stream, AddRmsNorm{res, o, post, nrm, eps}));
  FERRY_RETURN_IF_ERROR(run_projections(b, stream, nrm, {wg, wu}, gu));
  return b.run(stream, SwiGlu{gu.slice_cols(0, inter), gu.slice_cols(inter, inter), act});
}

Status ActionExpert::run_down(Stream& stream, const WeightGroup& group, void* base) {
  const TextConfig& x = config_.expert;
  const int64_t s = tokens_, h = x.hidden_size, inter = x.intermediate_size;
  FERRY_ASSIGN_OR_RETURN(TensorView wd, group_tensor(group, base, "down_proj", h, inter));
  Backend& b = *backend_;
  const TensorView res = residual();
  const TensorView o = buffer_view(o_, DType::bf16, s, h);
  const TensorView act = buffer_view(act_, DType::bf16, s, inter);
  FERRY_RETURN_IF_ERROR(b.run(stream, Linear{act, wd, {}, o}));
  return b.run(stream, Add{res, o});
}

Status ActionExpert::run_out(Stream& stream, int step, const WeightGroup& group, void* base) {
  if (step < 0 || step >= num_steps()) return invalid("step out of range");
  if (x_.empty()) return invalid("run_out before begin");
  const TextConfig& x = config_.expert;
  const int64_t s = tokens_, h = x.hidden_size, dims = config_.action_space.action_dims;
  FERRY_ASSIGN_OR_RETURN(TensorView nw, group_tensor(group, base, "norm", 1, h));
  FERRY_ASSIGN_OR_RETURN(TensorView w,
                         group_tensor(group, base, "action_out_proj.weight", dims, h));
  FERRY_ASSIGN_OR_RETURN(TensorView bias,
                         group_tensor(group, base, "action_out_proj.bias", 1, dims));
  Backend& b = *backend_;
  const TensorView nrm = buffer_view(norm_, DType::f32, s, h);
  const TensorView vel = buffer_view(velocity_, DType::bf16, s, dims);
  FERRY_RETURN_IF_ERROR(
      b.run(stream, RmsNorm{residual(), nw, nrm, h, static_cast<float>(x.rms_norm_eps)}));
  FERRY_RETURN_IF_ERROR(b.run(stream, Linear{nrm, w, bias, vel}));
  b.copy_to_host(stream, v_raw_.data(), velocity_.data(), v_raw_.size() * sizeof(uint16_t));
  return Status::ok_status();
}

Status ActionExpert::finish_step(Stream& stream, int step) {
  if (step < 0 || step >= num_steps()) return invalid("step out of range");
  FERRY_RETURN_IF_ERROR(backend_->synchronize(stream));
  if (!all_finite_bf16(v_raw_)) {
    return nonfinite_error("the action expert's velocity at flow step " + std::to_string(step));
  }
  for (size_t i = 0; i < v_raw_.size(); ++i) v_host_[i] = bf16_to_f32(v_raw_[i]);
  // x ← x + Δ_i·v in fp32 (the velocity is bf16, x stays fp32: spec §6.4).
  euler_step(x_, v_host_, grid_.deltas[static_cast<size_t>(step)]);
  return Status::ok_status();
}

}  // namespace ferry
