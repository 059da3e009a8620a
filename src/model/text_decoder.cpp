#include "model/text_decoder.h"

#include <cmath>
#include <string>

#include "core/bf16.h"
#include "model/projections.h"

namespace ferry {

// Views laid out at 256-byte offsets of one buffer, bound once the buffer exists.
class ActivationLayout {
 public:
  TensorView* add(TensorView* v, DType dtype, int64_t rows, int64_t cols) {
    specs_.push_back({v, dtype, rows, cols, offset_});
    const uint64_t bytes = static_cast<uint64_t>(rows * cols) * dtype_size(dtype);
    offset_ += (bytes + kGroupAlignment - 1) / kGroupAlignment * kGroupAlignment;
    return v;
  }
  uint64_t bytes() const { return offset_; }
  void bind(void* base) const {
    for (const Spec& s : specs_) {
      *s.view = make_view(static_cast<char*>(base) + s.offset, s.dtype, s.rows, s.cols);
    }
  }

 private:
  struct Spec {
    TensorView* view;
    DType dtype;
    int64_t rows, cols;
    uint64_t offset;
  };
  std::vector<Spec> specs_;
  uint64_t offset_ = 0;
};

namespace {

Result<TensorView> weight(const WeightGroup& group, void* base, std::string_view name) {
  if (group.find(name) == nullptr) {
    return make_error(ErrorCode::internal,
                      "group " + group.name + " has no tensor " + std::string(name));
  }
  return group.view(base, name);
}

}  // namespace

// The activations of one step of up to `m` tokens, laid out at 256-byte offsets.
void TextDecoder::layout_step(ActivationLayout& c, const TextConfig& config, int64_t m) {
  const int64_t qdim = config.num_heads * config.head_dim;
  const int64_t kv_dim = config.num_kv_heads * config.head_dim;
  c.add(&ids_, DType::i32, m, 1);
  c.add(&pos_, DType::i32, m, 3);
  c.add(&cos_, DType::f32, m, config.head_dim / 2);
  c.add(&sin_, DType::f32, m, config.head_dim / 2);
  c.add(&rows_, DType::i32, m, 1);
  c.add(&kv_rows_, DType::i32, m, 1);
  c.add(&x_, DType::bf16, m, config.hidden_size);
  c.add(&norm_, DType::bf16, m, config.hidden_size);
  c.add(&qkv_, DType::bf16, m, qdim + 2 * kv_dim);
  c.add(&attn_, DType::bf16, m, qdim);
  c.add(&proj_, DType::bf16, m, config.hidden_size);
  c.add(&gate_up_, DType::bf16, m, 2 * config.intermediate_size);
  c.add(&act_, DType::bf16, m, config.intermediate_size);
}

// The head's input and output: one row each, kept across steps.
void TextDecoder::layout_head(ActivationLayout& c, const TextConfig& config) {
  c.add(&head_in_, DType::bf16, 1, config.hidden_size);
  c.add(&logits_, DType::bf16, 1, config.vocab_size);
}

uint64_t TextDecoder::activation_bytes(const TextConfig& config, int64_t max_step_tokens) {
  TextDecoder d;
  ActivationLayout c;
  d.layout_step(c, config, max_step_tokens);
  if (max_step_tokens <= 1) d.layout_head(c, config);
  return c.bytes();
}

void TextDecoder::bind_step(int64_t tokens) {
  const bool single = tokens == 1 && single_.bytes() > 0;
  ActivationLayout c;
  layout_step(c, config_, single ? 1 : max_tokens_);
  c.bind(single ? single_.data() : arena_.data());
}

TextDecoder::LentBytes TextDecoder::idle_after_prefill() const {
  if (single_.bytes() == 0) return {};
  return {arena_.data(), arena_.bytes()};
}

Result<TextDecoder> TextDecoder::create(const TextConfig& config, Backend& backend,
                                        int64_t max_step_tokens, int64_t cache_capacity,
                                        SharedRegion* activations) {
  if (config.hidden_size <= 0 || config.num_layers <= 0 || config.num_heads <= 0 ||
      config.num_kv_heads <= 0 || config.head_dim <= 0 || config.head_dim % 2 != 0 ||
      config.num_heads % config.num_kv_heads != 0 || config.vocab_size <= 0 ||
      config.intermediate_size <= 0) {
    return make_error(ErrorCode::unsupported, "text decoder: inconsistent text config");
  }
  if (config.attention_bias) {
    return make_error(ErrorCode::unsupported, "text decoder: attention biases are not supported");
  }
  if (max_step_tokens <= 0 || cache_capacity < max_step_tokens) {
    return make_error(ErrorCode::invalid_argument,
                      "text decoder: need 0 < max step tokens <= cache capacity");
  }
  TextDecoder d;
  d.config_ = config;
  d.backend_ = &backend;
  d.max_tokens_ = max_step_tokens;
  const int64_t kv_dim = config.num_kv_heads * config.head_dim;
  FERRY_ASSIGN_OR_RETURN(d.cache_,
                         KvCache::create(backend, config.num_layers, cache_capacity, kv_dim));
  // Multi-token steps (prefill) use the large layout, in the shared region when given; single-token
  // steps (decode) and the head a small one of their own, so that the large one is idle from the
  // first decode step on (idle_after_prefill: the provider may keep weights there).
  const uint64_t large = activation_bytes(config, max_step_tokens);
  if (activations != nullptr) {
    SharedRegion::Carver carve = activations->carver();
    FERRY_ASSIGN_OR_RETURN(d.arena_, carve.take(large));
  } else {
    FERRY_ASSIGN_OR_RETURN(d.arena_, backend.allocate(large, "text activations"));
  }
  if (max_step_tokens > 1) {
    ActivationLayout small;
    d.layout_step(small, config, 1);
    d.layout_head(small, config);
    FERRY_ASSIGN_OR_RETURN(d.single_, backend.allocate(small.bytes(), "text decode activations"));
    small.bind(d.single_.data());
  } else {
    ActivationLayout c;
    d.layout_step(c, config, 1);
    d.layout_head(c, config);
    c.bind(d.arena_.data());
  }
  d.bind_step(max_step_tokens);
  return d;
}

void TextDecoder::reset(Stream& stream) {
  backend_->fill_zero(stream, cache_.data(), cache_.bytes());
  cache_.set_length(0);
  visual_active_ = false;
  visual_ = {};
}

Status TextDecoder::begin_step(Stream& stream, std::span<const int32_t> ids,
                               std::span<const int32_t> positions) {
  const auto n = static_cast<int64_t>(ids.size());
  if (n <= 0 || n > max_tokens_) {
    return make_error(ErrorCode::invalid_argument, "text decoder: step of " + std::to_string(n) +
                                                       " tokens (max " +
                                                       std::to_string(max_tokens_) + ")");
  }
  if (positions.size() != ids.size() * 3) {
    return make_error(ErrorCode::invalid_argument, "text decoder: positions must be [n, 3]");
  }
  if (cache_.length() + n > cache_.capacity()) {
    return make_error(ErrorCode::out_of_memory, "text decoder: KV cache full (" +
                                                    std::to_string(cache_.capacity()) + " rows)");
  }
  for (int32_t id : ids) {
    if (id < 0 || id >= config_.vocab_size) {
      return make_error(ErrorCode::invalid_argument,
                        "text decoder: token id " + std::to_string(id) +
                            " outside the vocabulary (" + std::to_string(config_.vocab_size) + ")");
    }
  }
  ids_host_.assign(ids.begin(), ids.end());
  pos_host_.assign(positions.begin(), positions.end());
  bind_step(n);
  step_tokens_ = n;
  step_pos0_ = cache_.length();
  cache_.set_length(step_pos0_ + n);
  kv_rows_host_.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) kv_rows_host_[i] = static_cast<int32_t>(step_pos0_ + i);
  visual_active_ = false;
  visual_ = {};
  backend_->copy_to_device(stream, ids_.data, ids_host_.data(), ids_host_.size() * sizeof(int32_t));
  backend_->copy_to_device(stream, pos_.data, pos_host_.data(), pos_host_.size() * sizeof(int32_t));
  backend_->copy_to_device(stream, kv_rows_.data, kv_rows_host_.data(),
                           kv_rows_host_.size() * sizeof(int32_t));
  RopeTable table;
  table.pos = pos_.slice_rows(0, n);
  table.cos = cos_.slice_rows(0, n);
  table.sin = sin_.slice_rows(0, n);
  table.theta = static_cast<float>(config_.rope_theta);
  table.head_dim = static_cast<int>(config_.head_dim);
  if (config_.llama3_rope) {
    const Llama3RopeScaling& s = *config_.llama3_rope;
    table.llama3 = {static_cast<float>(s.factor), static_cast<float>(s.low_freq_factor),
                    static_cast<float>(s.high_freq_factor),
                    static_cast<float>(s.original_max_position_embeddings)};
  }
  if (config_.mrope_section.size() == 3) {
    table.sections = {config_.mrope_section[0], config_.mrope_section[1], config_.mrope_section[2]};
  } else {
    // 1-D RoPE: the three position columns are equal, so every index reads t.
    table.sections = {static_cast<int>(config_.head_dim / 2), 0, 0};
  }
  return backend_->run(stream, table);
}

Status TextDecoder::set_visual(Stream& stream, VisualInjection visual) {
  const auto n = static_cast<int64_t>(visual.rows.size());
  if (n == 0) return {};
  if (visual.image_embeds.rows != n || visual.image_embeds.cols != config_.hidden_size) {
    return make_error(ErrorCode::invalid_argument,
                      "text decoder: image embeddings are [" +
                          std::to_string(visual.image_embeds.rows) + ", " +
                          std::to_string(visual.image_embeds.cols) + "], expected [" +
                          std::to_string(n) + ", " + std::to_string(config_.hidden_size) + "]");
  }
  if (static_cast<int64_t>(visual.deepstack.size()) > config_.num_layers) {
    return make_error(ErrorCode::invalid_argument,
                      "text decoder: more deepstack features than layers");
  }
  for (int32_t r : visual.rows) {
    if (r < 0 || r >= step_tokens_) {
      return make_error(ErrorCode::invalid_argument, "text decoder: image row outside the step");
    }
  }
  rows_host_ = visual.rows;
  backend_->copy_to_device(stream, rows_.data, rows_host_.data(),
                           rows_host_.size() * sizeof(int32_t));
  visual_ = std::move(visual);
  visual_active_ = true;
  return {};
}

Status TextDecoder::run_embed(Stream& stream, const WeightGroup& group, void* base) {
  FERRY_ASSIGN_OR_RETURN(TensorView table, weight(group, base, "embed_tokens"));
  const int64_t n = step_tokens_;
  FERRY_RETURN_IF_ERROR(
      backend_->run(stream, GatherRows{table, ids_.slice_rows(0, n), x_.slice_rows(0, n)}));
  if (visual_active_) {
    const auto rows = static_cast<int64_t>(rows_host_.size());
    FERRY_RETURN_IF_ERROR(backend_->run(
        stream, ScatterRows{visual_.image_embeds, rows_.slice_rows(0, rows), x_.slice_rows(0, n)}));
  }
  return {};
}

Status TextDecoder::run_layer(Stream& stream, int layer, const WeightGroup& group, void* base) {
  if (layer < 0 || layer >= config_.num_layers) {
    return make_error(ErrorCode::internal, "text decoder: layer out of range");
  }
  switch (group.part) {
    case LayerPart::attention:
      return run_attention(stream, layer, group, base);
    case LayerPart::gate_up:
      return run_gate_up(stream, group, base);
    case LayerPart::down:
      return run_down(stream, layer, group, base);
    case LayerPart::whole:
      break;
  }
  return make_error(ErrorCode::internal, "text decoder: " + group.name + " is not a layer part");
}

Status TextDecoder::run_attention(Stream& stream, int layer, const WeightGroup& group, void* base) {
  const int64_t n = step_tokens_;
  const auto heads = static_cast<int>(config_.num_heads);
  const auto kv_heads = static_cast<int>(config_.num_kv_heads);
  const auto head_dim = static_cast<int>(config_.head_dim);
  const auto eps = static_cast<float>(config_.rms_norm_eps);
  FERRY_ASSIGN_OR_RETURN(TensorView ln1, weight(group, base, "input_layernorm"));
  FERRY_ASSIGN_OR_RETURN(TensorView wq, weight(group, base, "q_proj"));
  FERRY_ASSIGN_OR_RETURN(TensorView wk, weight(group, base, "k_proj"));
  FERRY_ASSIGN_OR_RETURN(TensorView wv, weight(group, base, "v_proj"));
  FERRY_ASSIGN_OR_RETURN(TensorView wo, weight(group, base, "o_proj"));
  const TensorView x = x_.slice_rows(0, n);
  const TensorView nm = norm_.slice_rows(0, n);
  const int64_t qdim = config_.num_heads * config_.head_dim;
  const int64_t kv_dim = config_.num_kv_heads * config_.head_dim;
  const TensorView qkv = qkv_.slice_rows(0, n);
  const TensorView q = qkv.slice_cols(0, qdim);
  const TensorView cos = cos_.slice_rows(0, n);
  const TensorView sin = sin_.slice_rows(0, n);

  // The previous layer's MLP output joins the residual stream here, in one op with this layer's
  // input norm (a launch less per layer; the same arithmetic as Add then RmsNorm).
  const TensorView proj = proj_.slice_rows(0, n);
  if (mlp_output_pending(layer - 1)) {
    FERRY_RETURN_IF_ERROR(backend_->run(stream, AddRmsNorm{x, proj, ln1, nm, eps}));
  } else {
    FERRY_RETURN_IF_ERROR(backend_->run(stream, RmsNorm{x, ln1, nm, config_.hidden_size, eps}));
  }
  FERRY_RETURN_IF_ERROR(run_projections(*backend_, stream, nm, {wq, wk, wv}, qkv));
  // q and k are adjacent columns and rotate alike (same tables and rounding): one op, with
  // Qwen3's per-head norms in the same pass, and this step's key | value rows stored into their
  // cache rows (read from device memory) by the same op.
  const TensorView qk = qkv.slice_cols(0, qdim + kv_dim);
  const TensorView kv_rows = kv_rows_.slice_rows(0, n);
  const TensorView kv = qkv.slice_cols(qdim, 2 * kv_dim);
  if (config_.qk_norm) {
    FERRY_ASSIGN_OR_RETURN(TensorView qn, weight(group, base, "q_norm"));
    FERRY_ASSIGN_OR_RETURN(TensorView kn, weight(group, base, "k_norm"));
    QkNormRope op{qk, qn, kn, cos, sin, heads, kv_heads, head_dim, eps, RopeMath::bf16};
    op.kv = kv;
    op.rows = kv_rows;
    op.kv_dst = cache_.rows(layer);
    FERRY_RETURN_IF_ERROR(backend_->run(stream, op));
  } else {
    FERRY_RETURN_IF_ERROR(
        backend_->run(stream, Rope{qk, cos, sin, heads + kv_heads, head_dim, RopeMath::bf16}));
    FERRY_RETURN_IF_ERROR(backend_->run(stream, ScatterRows{kv, kv_rows, cache_.rows(layer)}));
  }

  // Over the whole capacity: the position read from the device limits the keys (causal).
  Attention att;
  att.q = q;
  att.kv[0] = KvSpan{cache_.k(layer), cache_.v(layer)};
  att.num_spans = 1;
  att.out = attn_.slice_rows(0, n);
  att.num_heads = heads;
  att.num_kv_heads = kv_heads;
  att.head_dim = head_dim;
  att.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
  att.causal = true;
  att.q_pos0_dev = kv_rows.slice_rows(0, 1);
  FERRY_RETURN_IF_ERROR(backend_->run(stream, att));

  FERRY_RETURN_IF_ERROR(backend_->run(stream, Linear{att.out, wo, {}, proj}));
  return {};
}

Status TextDecoder::run_gate_up(Stream& stream, const WeightGroup& group, void* base) {
  const int64_t n = step_tokens_;
  const auto eps = static_cast<float>(config_.rms_norm_eps);
  FERRY_ASSIGN_OR_RETURN(TensorView ln2, weight(group, base, "post_attention_layernorm"));
  FERRY_ASSIGN_OR_RETURN(TensorView wg, weight(group, base, "gate_proj"));
  FERRY_ASSIGN_OR_RETURN(TensorView wu, weight(group, base, "up_proj"));
  const TensorView x = x_.slice_rows(0, n);
  const TensorView nm = norm_.slice_rows(0, n);
  const TensorView proj = proj_.slice_rows(0, n);
  // The residual add and the post-attention norm in one op.
  FERRY_RETURN_IF_ERROR(backend_->run(stream, AddRmsNorm{x, proj, ln2, nm, eps}));
  const int64_t inter = config_.intermediate_size;
  const TensorView gate_up = gate_up_.slice_rows(0, n);
  const TensorView act = act_.slice_rows(0, n);
  FERRY_RETURN_IF_ERROR(run_projections(*backend_, stream, nm, {wg, wu}, gate_up));
  FERRY_RETURN_IF_ERROR(backend_->run(
      stream, SwiGlu{gate_up.slice_cols(0, inter), gate_up.slice_cols(inter, inter), act}));
  return {};
}

Status TextDecoder::run_down(Stream& stream, int layer, const WeightGroup& group, void* base) {
  const int64_t n = step_tokens_;
  FERRY_ASSIGN_OR_RETURN(TensorView wd, weight(group, base, "down_proj"));
  const TensorView x = x_.slice_rows(0, n);
  const TensorView act = act_.slice_rows(0, n);
  const TensorView proj = proj_.slice_rows(0, n);
  FERRY_RETURN_IF_ERROR(backend_->run(stream, Linear{act, wd, {}, proj}));
  // The residual add of the MLP waits for the next layer's norm (or the head), except before
  // deepstack (spec §3.6), which adds to layer k's complete output, at the image rows, prefill
  // only.
  if (!mlp_output_pending(layer)) {
    FERRY_RETURN_IF_ERROR(backend_->run(stream, Add{x, proj}));
    const auto rows = static_cast<int64_t>(rows_host_.size());
    FERRY_RETURN_IF_ERROR(backend_->run(
        stream,
        AddRows{x, visual_.deepstack[static_cast<size_t>(layer)], rows_.slice_rows(0, rows)}));
  }
  return {};
}

bool TextDecoder::mlp_output_pending(int layer) const {
  if (layer < 0) return false;  // before layer 0: the embeddings, complete
  return !(visual_active_ && layer < static_cast<int>(visual_.deepstack.size()));
}

Status TextDecoder::run_head(Stream& stream, const WeightGroup& group, void* base) {
  // One row chunk of the head (model/weights.h: lm_head_chunks): logits [row0, row0 + rows).
  FERRY_ASSIGN_OR_RETURN(TensorView lm_head, weight(group, base, "lm_head"));
  const WeightSpec* spec = group.find("lm_head");
  const int64_t row0 = spec->source_row0;
  const int64_t rows = lm_head.rows;
  if (row0 < 0 || row0 + rows > config_.vocab_size) {
    return make_error(ErrorCode::internal,
                      "text decoder: " + group.name + " is outside the vocabulary");
  }
  // The first chunk carries the final norm: the last layer's MLP output completes the residual
  // stream of every row (hidden()), and only the last position's logits are needed.
  if (group.find("norm") != nullptr) {
    FERRY_ASSIGN_OR_RETURN(TensorView norm_w, weight(group, base, "norm"));
    if (mlp_output_pending(static_cast<int>(config_.num_layers) - 1)) {
      FERRY_RETURN_IF_ERROR(backend_->run(
          stream, Add{x_.slice_rows(0, step_tokens_), proj_.slice_rows(0, step_tokens_)}));
    }
    const TensorView last = x_.slice_rows(step_tokens_ - 1, 1);
    FERRY_RETURN_IF_ERROR(backend_->run(stream, RmsNorm{last, norm_w, head_in_, config_.hidden_size,
                                                        static_cast<float>(config_.rms_norm_eps)}));
  }
  FERRY_RETURN_IF_ERROR(
      backend_->run(stream, Linear{head_in_, lm_head, {}, logits_.slice_cols(row0, rows)}));
  if (row0 + rows == config_.vocab_size) visual_active_ = false;  // the step's last chunk
  return {};
}

Status TextDecoder::read_logits(Stream& stream, std::vector<uint16_t>& raw) {
  const auto vocab = static_cast<size_t>(config_.vocab_size);
  // Through page-locked memory: the copy is a direct DMA instead of a staged pageable copy, and
  // the GPU waits for this read (and the host's choice of the next token) every decode step.
  if (logits_host_.bytes() < vocab * sizeof(uint16_t)) {
    FERRY_ASSIGN_OR_RETURN(logits_host_, backend_->allocate_host(vocab * sizeof(uint16_t)));
  }
  backend_->copy_to_host(stream, logits_host_.data(), logits_.data, vocab * sizeof(uint16_t));
  FERRY_RETURN_IF_ERROR(backend_->synchronize(stream));
  const auto* p = static_cast<const uint16_t*>(logits_host_.data());
  raw.assign(p, p + vocab);
  return {};
}

TensorView TextDecoder::logits() const {
  return logits_;
}

TensorView TextDecoder::hidden() const {
  return x_.slice_rows(0, step_tokens_);
}

uint64_t fnv1a64(const void* data, size_t bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace ferry
