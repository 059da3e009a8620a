#include "model/vision_encoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>

#include "core/bf16.h"
#include "core/finite.h"
#include "model/group_view.h"
#include "model/vision_tables.h"

namespace ferry {

namespace {

Error invalid(const std::string& msg) {
  return make_error(ErrorCode::invalid_argument, "vision encoder: " + msg);
}

Result<Activation> parse_activation(const std::string& name) {
  if (name == "gelu_pytorch_tanh" || name == "gelu_tanh") return Activation::gelu_tanh;
  if (name == "gelu") return Activation::gelu_erf;
  if (name == "silu") return Activation::silu;
  return make_error(ErrorCode::unsupported, "vision encoder: hidden_act " + name);
}

int64_t side_of(int64_t n) {
  auto s = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(n))));
  return s * s == n ? s : -1;
}

}  // namespace

template <class F>
Status VisionEncoder::for_each_buffer(F&& f) {
  const VisionConfig& c = config_;
  const int64_t n = num_patches_, h = c.hidden_size, t = n / 4, half = c.head_dim() / 2;
  deepstack_.resize(c.deepstack_visual_indexes.size());
  FERRY_RETURN_IF_ERROR(f(pixels_, n, c.patch_values(), DType::bf16));
  FERRY_RETURN_IF_ERROR(f(pos_idx_, n, 4, DType::i32));
  FERRY_RETURN_IF_ERROR(f(pos_weight_, n, 4, DType::f32));
  FERRY_RETURN_IF_ERROR(f(rope_cos_, n, half, DType::f32));
  FERRY_RETURN_IF_ERROR(f(rope_sin_, n, half, DType::f32));
  FERRY_RETURN_IF_ERROR(f(segments_, static_cast<int64_t>(images_.size()) + 1, 1, DType::i32));
  FERRY_RETURN_IF_ERROR(f(x_, n, h, DType::bf16));
  FERRY_RETURN_IF_ERROR(f(norm_, n, h, DType::bf16));
  FERRY_RETURN_IF_ERROR(f(qkv_, n, 3 * h, DType::bf16));
  FERRY_RETURN_IF_ERROR(f(attn_, n, h, DType::bf16));
  FERRY_RETURN_IF_ERROR(f(mlp_, n, c.intermediate_size, DType::bf16));
  FERRY_RETURN_IF_ERROR(f(merger_mid_, t, 4 * h, DType::bf16));
  FERRY_RETURN_IF_ERROR(f(embeds_, t, c.out_hidden_size, DType::bf16));
  for (DeviceBuffer& d : deepstack_) {
    FERRY_RETURN_IF_ERROR(f(d, t, c.out_hidden_size, DType::bf16));
  }
  return Status::ok_status();
}

Result<VisionEncoder> VisionEncoder::prepare(const VisionConfig& config, Backend* backend,
                                             std::vector<ImageGeometry> images) {
  const VisionConfig& c = config;
  if (c.depth <= 0 || c.hidden_size <= 0 || c.num_heads <= 0 || c.intermediate_size <= 0 ||
      c.out_hidden_size <= 0 || c.patch_size <= 0 || c.in_channels <= 0 ||
      c.temporal_patch_size <= 0) {
    return invalid("config has a non-positive dimension");
  }
  if (c.hidden_size % c.num_heads != 0 || c.head_dim() % 4 != 0) {
    return invalid("hidden_size / num_heads must be a multiple of 4");
  }
  if (c.spatial_merge_size != 2) {
    return make_error(ErrorCode::unsupported, "vision encoder: spatial_merge_size must be 2");
  }
  const int64_t side = side_of(c.num_position_embeddings);
  if (side <= 0) return invalid("num_position_embeddings is not a square");
  for (int64_t k : c.deepstack_visual_indexes) {
    if (k < 0 || k >= c.depth) return invalid("deepstack index out of range");
  }
  if (images.empty()) return invalid("no images");
  FERRY_ASSIGN_OR_RETURN(Activation act, parse_activation(c.hidden_act));

  VisionEncoder e;
  e.config_ = config;
  e.backend_ = backend;
  e.block_act_ = act;
  const int64_t unit = c.patch_size * c.spatial_merge_size;
  for (const ImageGeometry& g : images) {
    if (g.height <= 0 || g.width <= 0 || g.height % unit != 0 || g.width % unit != 0) {
      return invalid("image " + std::to_string(g.height) + "x" + std::to_string(g.width) +
                     " is not a positive multiple of " + std::to_string(unit));
    }
    if (g.height > (int64_t{1} << 16) || g.width > (int64_t{1} << 16)) {
      return invalid("image side larger than 65536");
    }
    const int64_t patches = (g.height / c.patch_size) * (g.width / c.patch_size);
    e.patches_per_image_.push_back(patches);
    e.segments_host_.push_back(static_cast<int32_t>(e.num_patches_));
    e.max_patches_ = std::max(e.max_patches_, patches);
    e.num_patches_ += patches;
    if (e.num_patches_ > (int64_t{1} << 24)) return invalid("too many patches");
  }
  e.segments_host_.push_back(static_cast<int32_t>(e.num_patches_));  // <= 2^24: fits
  e.images_ = std::move(images);

  // Host tables, per image in window order, concatenated.
  for (const ImageGeometry& g : e.images_) {
    const int64_t gh = g.height / c.patch_size, gw = g.width / c.patch_size;
    PosEmbedTable pe = pos_embed_table(gh, gw, c.spatial_merge_size, side);
    e.pos_idx_host_.insert(e.pos_idx_host_.end(), pe.idx.begin(), pe.idx.end());
    e.pos_weight_host_.insert(e.pos_weight_host_.end(), pe.weight.begin(), pe.weight.end());
    RopeTables rt = vision_rope_tables(gh, gw, c.spatial_merge_size, c.head_dim());
    e.rope_cos_host_.insert(e.rope_cos_host_.end(), rt.cos.begin(), rt.cos.end());
    e.rope_sin_host_.insert(e.rope_sin_host_.end(), rt.sin.begin(), rt.sin.end());
  }

  return e;
}

bool VisionEncoder::is_output(const DeviceBuffer& buf) const {
  if (&buf == &embeds_) return true;
  for (const DeviceBuffer& d : deepstack_) {
    if (&buf == &d) return true;
  }
  return false;
}

Result<VisionEncoder> VisionEncoder::describe(const VisionConfig& config,
                                              std::vector<ImageGeometry> images) {
  return prepare(config, nullptr, std::move(images));
}

uint64_t VisionEncoder::carved_bytes(bool outputs) {
  uint64_t total = 0;
  // The lambda never fails: for_each_buffer's status is always ok here.
  (void)for_each_buffer([&](DeviceBuffer& buf, int64_t rows, int64_t cols, DType dtype) -> Status {
    if (is_output(buf) == outputs) {
      total += SharedRegion::carved_bytes(static_cast<uint64_t>(rows * cols) * dtype_size(dtype));
    }
    return Status::ok_status();
  });
  return total;
}

uint64_t VisionEncoder::work_bytes() {
  return carved_bytes(false);
}

uint64_t VisionEncoder::output_bytes() {
  return carved_bytes(true);
}

Result<VisionEncoder> VisionEncoder::create(const VisionConfig& config, Backend& backend,
                                            std::vector<ImageGeometry> images, SharedRegion* work,
                                            bool outputs_at_tail) {
  FERRY_ASSIGN_OR_RETURN(VisionEncoder e, prepare(config, &backend, std::move(images)));
  std::optional<SharedRegion::Carver> carve, tail;
  if (work != nullptr) {
    carve.emplace(work->carver());
    const uint64_t outputs = e.output_bytes();
    if (outputs_at_tail) {
      if (outputs > work->bytes()) {
        return make_error(ErrorCode::internal, "vision: the shared region cannot hold the outputs");
      }
      tail.emplace(work->carver(work->bytes() - outputs));
    }
  }
  FERRY_RETURN_IF_ERROR(
      e.for_each_buffer([&](DeviceBuffer& buf, int64_t rows, int64_t cols, DType dtype) -> Status {
        const bool output = e.is_output(buf);
        std::optional<SharedRegion::Carver>& from = output ? tail : carve;
        if (from) {
          // Sizes were checked when work_bytes / output_bytes laid the same buffers out.
          FERRY_ASSIGN_OR_RETURN(
              buf, from->take(static_cast<uint64_t>(rows * cols) * dtype_size(dtype)));
        } else {
          FERRY_ASSIGN_OR_RETURN(buf,
                                 allocate_matrix(backend, rows, cols, dtype, "vision activations"));
        }
        return Status::ok_status();
      }));
  return e;
}

uint64_t VisionEncoder::activation_bytes() const {
  uint64_t total = 0;
  for (const DeviceBuffer* d :
       {&pixels_, &pos_idx_, &pos_weight_, &rope_cos_, &rope_sin_, &segments_, &x_, &norm_, &qkv_,
        &attn_, &mlp_, &merger_mid_, &embeds_}) {
    total += d->bytes();
  }
  for (const DeviceBuffer& d : deepstack_) total += d.bytes();
  return total;
}

std::vector<int64_t> VisionEncoder::tokens_per_image() const {
  std::vector<int64_t> out;
  for (int64_t p : patches_per_image_) out.push_back(p / 4);
  return out;
}

std::vector<std::array<int64_t, 3>> VisionEncoder::merged_grids() const {
  std::vector<std::array<int64_t, 3>> out;
  const int64_t unit = config_.patch_size * config_.spatial_merge_size;
  for (const ImageGeometry& g : images_) out.push_back({1, g.height / unit, g.width / unit});
  return out;
}

TensorView VisionEncoder::hidden() const {
  return buffer_view(x_, DType::bf16, num_patches_, config_.hidden_size);
}

TensorView VisionEncoder::image_embeds() const {
  return buffer_view(embeds_, DType::bf16, num_tokens(), config_.out_hidden_size);
}

TensorView VisionEncoder::deepstack(int k) const {
  FERRY_CHECK(k >= 0 && k < num_deepstack(), "deepstack: index out of range");
  return buffer_view(deepstack_[static_cast<size_t>(k)], DType::bf16, num_tokens(),
                     config_.out_hidden_size);
}

Status VisionEncoder::upload_pixels(Stream& stream, std::span<const float> pixel_values) {
  pixels_host_.resize(pixel_values.size());  // the count is checked by the upload below
  round_pixels_bf16(pixel_values, pixels_host_);
  return upload_pixels(stream, std::span<const uint16_t>(pixels_host_));
}

Status VisionEncoder::upload_pixels(Stream& stream, std::span<const uint16_t> pixels_bf16) {
  const int64_t expected = num_patches_ * config_.patch_values();
  if (static_cast<int64_t>(pixels_bf16.size()) != expected) {
    return invalid("pixel_values has " + std::to_string(pixels_bf16.size()) + " values, expected " +
                   std::to_string(expected));
  }
  Backend& b = *backend_;
  b.copy_to_device(stream, pixels_.data(), pixels_bf16.data(), pixels_bf16.size_bytes());
  b.copy_to_device(stream, pos_idx_.data(), pos_idx_host_.data(),
                   pos_idx_host_.size() * sizeof(int32_t));
  b.copy_to_device(stream, pos_weight_.data(), pos_weight_host_.data(),
                   pos_weight_host_.size() * sizeof(float));
  b.copy_to_device(stream, rope_cos_.data(), rope_cos_host_.data(),
                   rope_cos_host_.size() * sizeof(float));
  b.copy_to_device(stream, rope_sin_.data(), rope_sin_host_.data(),
                   rope_sin_host_.size() * sizeof(float));
  b.copy_to_device(stream, segments_.data(), segments_host_.data(),
                   segments_host_.size() * sizeof(int32_t));
  uploaded_ = true;
  return Status::ok_status();
}

Status VisionEncoder::run_patch(Stream& stream, const WeightGroup& group, void* base) {
  if (!uploaded_) return invalid("run_patch before upload_pixels");
  const VisionConfig& c = config_;
  const int64_t n = num_patches_, h = c.hidden_size;
  const int64_t side = side_of(c.num_position_embeddings);
  FERRY_ASSIGN_OR_RETURN(TensorView w,
                         group_tensor(group, base, "proj.weight", h, c.patch_values()));
  FERRY_ASSIGN_OR_RETURN(TensorView bias, group_tensor(group, base, "proj.bias", 1, h));
  FERRY_ASSIGN_OR_RETURN(TensorView table, group_tensor(group, base, "pos_embed", side * side, h));
  Backend& b = *backend_;
  const TensorView x = hidden();
  const TensorView pe = buffer_view(norm_, DType::bf16, n, h);
  // Conv3d with kernel == stride is a Linear over the patchified rows of bf16-rounded pixels
  // (spec §3.2.1); the rounding was done on the host before the upload (round_pixels_bf16).
  const TensorView px = buffer_view(pixels_, DType::bf16, n, c.patch_values());
  FERRY_RETURN_IF_ERROR(b.run(stream, Linear{px, w, bias, x}));
  FERRY_RETURN_IF_ERROR(
      b.run(stream, PosEmbedInterp{table, buffer_view(pos_idx_, DType::i32, n, 4),
                                   buffer_view(pos_weight_, DType::f32, n, 4), pe}));
  return b.run(stream, Add{x, pe});
}

Status VisionEncoder::run_block(Stream& stream, int index, const WeightGroup& group, void* base) {
  const VisionConfig& c = config_;
  if (index < 0 || index >= c.depth) return invalid("block index out of range");
  const int64_t n = num_patches_, h = c.hidden_size, inter = c.intermediate_size;
  const int64_t hd = c.head_dim();
  const auto heads = static_cast<int>(c.num_heads);
  FERRY_ASSIGN_OR_RETURN(TensorView n1w, group_tensor(group, base, "norm1.weight", 1, h));
  FERRY_ASSIGN_OR_RETURN(TensorView n1b, group_tensor(group, base, "norm1.bias", 1, h));
  FERRY_ASSIGN_OR_RETURN(TensorView qkvw, group_tensor(group, base, "qkv.weight", 3 * h, h));
  FERRY_ASSIGN_OR_RETURN(TensorView qkvb, group_tensor(group, base, "qkv.bias", 1, 3 * h));
  FERRY_ASSIGN_OR_RETURN(TensorView pw, group_tensor(group, base, "proj.weight", h, h));
  FERRY_ASSIGN_OR_RETURN(TensorView pb, group_tensor(group, base, "proj.bias", 1, h));
  FERRY_ASSIGN_OR_RETURN(TensorView n2w, group_tensor(group, base, "norm2.weight", 1, h));
  FERRY_ASSIGN_OR_RETURN(TensorView n2b, group_tensor(group, base, "norm2.bias", 1, h));
  FERRY_ASSIGN_OR_RETURN(TensorView f1w, group_tensor(group, base, "fc1.weight", inter, h));
  FERRY_ASSIGN_OR_RETURN(TensorView f1b, group_tensor(group, base, "fc1.bias", 1, inter));
  FERRY_ASSIGN_OR_RETURN(TensorView f2w, group_tensor(group, base, "fc2.weight", h, inter));
  FERRY_ASSIGN_OR_RETURN(TensorView f2b, group_tensor(group, base, "fc2.bias", 1, h));

  Backend& b = *backend_;
  const auto eps = static_cast<float>(c.layer_norm_eps);
  const TensorView x = hidden();
  const TensorView nrm = buffer_view(norm_, DType::bf16, n, h);
  const TensorView qkv = buffer_view(qkv_, DType::bf16, n, 3 * h);
  const TensorView att = buffer_view(attn_, DType::bf16, n, h);
  const TensorView mlp = buffer_view(mlp_, DType::bf16, n, inter);
  const TensorView cos = buffer_view(rope_cos_, DType::f32, n, hd / 2);
  const TensorView sin = buffer_view(rope_sin_, DType::f32, n, hd / 2);
  const TensorView q = qkv.slice_cols(0, h), k = qkv.slice_cols(h, h), v = qkv.slice_cols(2 * h, h);

  // Attention half: x += proj(attn(rope(qkv(LN1(x))))), attention within each image.
  FERRY_RETURN_IF_ERROR(b.run(stream, LayerNorm{x, n1w, n1b, nrm, eps}));
  FERRY_RETURN_IF_ERROR(b.run(stream, Linear{nrm, qkvw, qkvb, qkv}));
  // q and k are adjacent column slices and rotate by the same per-row tables: one Rope over
  // 2·heads heads does exactly what one per slice does (each element's arithmetic is per head).
  FERRY_RETURN_IF_ERROR(b.run(stream, Rope{qkv.slice_cols(0, 2 * h), cos, sin, 2 * heads,
                                           static_cast<int>(hd), RopeMath::f32}));
  // One op for every image: segment s (image s's rows) attends only to itself.
  Attention a;
  a.q = q;
  a.kv[0] = KvSpan{k, v};
  a.num_spans = 1;
  a.out = att;
  a.num_heads = heads;
  a.num_kv_heads = heads;
  a.head_dim = static_cast<int>(hd);
  a.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  a.causal = false;
  a.segments = buffer_view(segments_, DType::i32, static_cast<int64_t>(images_.size()) + 1, 1);
  a.max_segment_rows = max_patches_;
  FERRY_RETURN_IF_ERROR(b.run(stream, a));
  FERRY_RETURN_IF_ERROR(b.run(stream, Linear{att, pw, pb, nrm}));
  FERRY_RETURN_IF_ERROR(b.run(stream, Add{x, nrm}));

  // MLP half: x += fc2(act(fc1(LN2(x)))).
  FERRY_RETURN_IF_ERROR(b.run(stream, LayerNorm{x, n2w, n2b, nrm, eps}));
  FERRY_RETURN_IF_ERROR(b.run(stream, Linear{nrm, f1w, f1b, mlp, block_act_}));
  FERRY_RETURN_IF_ERROR(b.run(stream, Linear{mlp, f2w, f2b, nrm}));
  return b.run(stream, Add{x, nrm});
}

namespace {

struct MergerWeights {
  TensorView norm_w, norm_b, fc1_w, fc1_b, fc2_w, fc2_b;
};

// Every tensor of a merger group, looked up before anything is enqueued.
Result<MergerWeights> merger_weights(const WeightGroup& group, void* base, int64_t norm_dim,
                                     int64_t wide, int64_t out) {
  MergerWeights m;
  FERRY_ASSIGN_OR_RETURN(m.norm_w, group_tensor(group, base, "norm.weight", 1, norm_dim));
  FERRY_ASSIGN_OR_RETURN(m.norm_b, group_tensor(group, base, "norm.bias", 1, norm_dim));
  FERRY_ASSIGN_OR_RETURN(m.fc1_w, group_tensor(group, base, "fc1.weight", wide, wide));
  FERRY_ASSIGN_OR_RETURN(m.fc1_b, group_tensor(group, base, "fc1.bias", 1, wide));
  FERRY_ASSIGN_OR_RETURN(m.fc2_w, group_tensor(group, base, "fc2.weight", out, wide));
  FERRY_ASSIGN_OR_RETURN(m.fc2_b, group_tensor(group, base, "fc2.bias", 1, out));
  return m;
}

}  // namespace

Status VisionEncoder::run_merger_impl(Stream& stream, const WeightGroup& group, void* base,
                                      bool postshuffle, TensorView out) {
  const int64_t n = num_patches_, t = num_tokens(), h = config_.hidden_size, wide = 4 * h;
  FERRY_ASSIGN_OR_RETURN(MergerWeights m, merger_weights(group, base, postshuffle ? wide : h, wide,
                                                         config_.out_hidden_size));
  const auto eps = static_cast<float>(config_.layer_norm_eps);
  Backend& b = *backend_;
  // [N, H] and [N/4, 4H] are the same bytes: the 4 rows of a 2x2 window side by side.
  if (postshuffle) {
    // Deepstack: regroup first, then LayerNorm over 4·hidden.
    FERRY_RETURN_IF_ERROR(b.run(stream, LayerNorm{hidden().reshaped(t, wide), m.norm_w, m.norm_b,
                                                  buffer_view(norm_, DType::bf16, t, wide), eps}));
  } else {
    // Final merger: LayerNorm per patch over hidden, then regroup.
    FERRY_RETURN_IF_ERROR(b.run(stream, LayerNorm{hidden(), m.norm_w, m.norm_b,
                                                  buffer_view(norm_, DType::bf16, n, h), eps}));
  }
  const TensorView in = buffer_view(norm_, DType::bf16, t, wide);
  const TensorView mid = buffer_view(merger_mid_, DType::bf16, t, wide);
  FERRY_RETURN_IF_ERROR(b.run(stream, Linear{in, m.fc1_w, m.fc1_b, mid, Activation::gelu_erf}));
  return b.run(stream, Linear{mid, m.fc2_w, m.fc2_b, out});
}

Status VisionEncoder::run_deepstack(Stream& stream, int k, const WeightGroup& group, void* base) {
  if (k < 0 || k >= num_deepstack()) return invalid("deepstack index out of range");
  return run_merger_impl(stream, group, base, /*postshuffle=*/true, deepstack(k));
}

Status VisionEncoder::run_merger(Stream& stream, const WeightGroup& group, void* base) {
  FERRY_RETURN_IF_ERROR(
      run_merger_impl(stream, group, base, /*postshuffle=*/false, image_embeds()));
  return check_outputs(stream);
}

// A NaN or Inf in any weight of the tower reaches every row of an image (it makes a column of
// every row non-finite, and the next norm or attention spreads that over the row), so the first
// row of each image of each output shows the damage, for a few KB read back.
Status VisionEncoder::check_outputs(Stream& stream) {
  const int64_t w = config_.out_hidden_size;
  const std::vector<int64_t> per_image = tokens_per_image();
  std::vector<uint16_t> rows(per_image.size() * static_cast<size_t>(w));
  for (int k = -1; k < num_deepstack(); ++k) {
    const TensorView out = k < 0 ? image_embeds() : deepstack(k);
    int64_t first = 0;
    for (size_t i = 0; i < per_image.size(); ++i) {
      const auto* row = static_cast<const uint16_t*>(out.data) + first * out.stride();
      backend_->copy_to_host(stream, rows.data() + i * static_cast<size_t>(w), row,
                             static_cast<size_t>(w) * sizeof(uint16_t));
      first += per_image[i];
    }
    FERRY_RETURN_IF_ERROR(backend_->synchronize(stream));
    if (!all_finite_bf16(rows)) {
      return nonfinite_error(k < 0 ? std::string("the vision encoder's output")
                                   : "the vision encoder's deepstack output " + std::to_string(k));
    }
  }
  return {};
}

namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

void round_pixels_bf16(std::span<const float> pixels, std::span<uint16_t> out) {
  FERRY_CHECK(out.size() == pixels.size(), "round_pixels_bf16: output size");
  std::transform(pixels.begin(), pixels.end(), out.begin(), f32_to_bf16);
}

int64_t pixel_value_count(const std::vector<ImageGeometry>& images, const VisionConfig& config) {
  const int64_t ps = config.patch_size;
  int64_t patches = 0;
  for (const ImageGeometry& g : images) patches += (g.height / ps) * (g.width / ps);
  return patches * config.patch_values();
}

void synthetic_pixel_values_into(uint64_t seed, const std::vector<ImageGeometry>& images,
                                 const VisionConfig& config, std::span<float> out) {
  FERRY_CHECK(static_cast<int64_t>(out.size()) == pixel_value_count(images, config),
              "synthetic_pixel_values_into: output size");
  const int64_t ps = config.patch_size, tp = config.temporal_patch_size;
  const int64_t ch = config.in_channels, merge = config.spatial_merge_size;
  const int64_t cols = config.patch_values();
  uint64_t state = seed;
  size_t first = 0;
  for (const ImageGeometry& g : images) {
    // One still frame of uint8 pixels, channel-major [C, H, W].
    std::vector<uint8_t> pixels(static_cast<size_t>(ch * g.height * g.width));
    for (size_t i = 0; i < pixels.size(); i += 8) {
      const uint64_t r = splitmix64(state);
      for (size_t j = 0; j < 8 && i + j < pixels.size(); ++j) {
        pixels[i + j] = static_cast<uint8_t>(r >> (8 * j));
      }
    }
    const std::vector<PatchCoord> order = window_order(g.height / ps, g.width / ps, merge);
    for (size_t r = 0; r < order.size(); ++r) {
      float* row = out.data() + first + r * static_cast<size_t>(cols);
      for (int64_t c = 0; c < ch; ++c) {
        for (int64_t tau = 0; tau < tp; ++tau) {  // the still image repeated in time
          for (int64_t py = 0; py < ps; ++py) {
            for (int64_t px = 0; px < ps; ++px) {
              const int64_t y = order[r].row * ps + py, x = order[r].col * ps + px;
              const uint8_t p = pixels[static_cast<size_t>((c * g.height + y) * g.width + x)];
              row[((c * tp + tau) * ps + py) * ps + px] = (static_cast<float>(p) - 127.5f) / 127.5f;
            }
          }
        }
      }
    }
    first += order.size() * static_cast<size_t>(cols);
  }
}

std::vector<float> synthetic_pixel_values(uint64_t seed, const std::vector<ImageGeometry>& images,
                                          const VisionConfig& config) {
  std::vector<float> out(static_cast<size_t>(pixel_value_count(images, config)));
  synthetic_pixel_values_into(seed, images, config, out);
  return out;
}

}  // namespace ferry
