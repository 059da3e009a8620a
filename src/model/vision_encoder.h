// The Qwen3-VL vision tower (spec §3): patch embed + interpolated position embedding, the ViT
// blocks with 2-D rotary attention restricted to each image, the deepstack mergers and the final
// merger. Every group invocation ENQUEUES ops on a stream; the group's bytes live at `base`
// (resident or a streaming slot: the encoder never keeps weight pointers across calls).
//
// Call order of one inference (the call sequence places these):
//   upload_pixels, run_patch, then for b in [0, depth): run_block(b) and, when
//   b == deepstack_visual_indexes[k], run_deepstack(k) right after it; finally run_merger.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"
#include "core/tensor.h"
#include "model/config.h"
#include "model/shared_region.h"
#include "model/weights.h"

namespace ferry {

// One image after resize, in pixels; both multiples of patch_size * spatial_merge_size (32).
struct ImageGeometry {
  int64_t height = 0;
  int64_t width = 0;
};

class VisionEncoder {
 public:
  // Checks the geometry against the config and allocates every activation buffer up front.
  // `work`: carve the working buffers (all but the image embeddings and deepstack features,
  // which the prefill reads) from the start of this region, shared with the text decoder's
  // activations (model/shared_region.h), instead of allocating them; `outputs_at_tail`: carve
  // the outputs too, from the region's last output_bytes() (which the caller keeps clear of the
  // text decoder's share), so that the whole region is idle once prefill has read them.
  static Result<VisionEncoder> create(const VisionConfig& config, Backend& backend,
                                      std::vector<ImageGeometry> images,
                                      SharedRegion* work = nullptr, bool outputs_at_tail = false);
  // The encoder's checks and geometry without any buffer (tokens_per_image, merged_grids and
  // work_bytes answer; nothing runs on it).
  static Result<VisionEncoder> describe(const VisionConfig& config,
                                        std::vector<ImageGeometry> images);
  // The bytes create() carves from `work` for its working buffers, and for its outputs.
  uint64_t work_bytes();
  uint64_t output_bytes();

  VisionEncoder(VisionEncoder&&) noexcept = default;
  VisionEncoder& operator=(VisionEncoder&&) noexcept = default;
  VisionEncoder(const VisionEncoder&) = delete;
  VisionEncoder& operator=(const VisionEncoder&) = delete;

  int64_t num_patches() const { return num_patches_; }     // Σ (h/16)·(w/16)
  int64_t num_tokens() const { return num_patches_ / 4; }  // after the 2×2 merge
  std::vector<int64_t> tokens_per_image() const;
  // (t = 1, h/32, w/32) per image: the merged grid get_rope_index walks (spec §2).
  std::vector<std::array<int64_t, 3>> merged_grids() const;
  const std::vector<ImageGeometry>& images() const { return images_; }

  // Enqueues the pixel upload and the host tables (position-embedding corners and weights,
  // rotary cos/sin, the images' row offsets). pixels_bf16: [num_patches, patch_values] in the
  // §3.1 order, already rounded to bf16 (round_pixels_bf16): the patch embedding reads them in
  // bf16 (spec §3.2.1), so the link carries half the bytes of f32 pixels. The host memory must
  // stay valid and unchanged until the stream has synchronized.
  Status upload_pixels(Stream& stream, std::span<const uint16_t> pixels_bf16);
  // The same from f32 pixel_values, rounded here into a host buffer of the encoder's.
  Status upload_pixels(Stream& stream, std::span<const float> pixel_values);
  // "vision.patch": x = bf16(patch·Wᵀ + b) + bilinear pos-embed (§3.2).
  Status run_patch(Stream& stream, const WeightGroup& group, void* base);
  // "vision.blocks.N" (§3.4).
  Status run_block(Stream& stream, int index, const WeightGroup& group, void* base);
  // "vision.deepstack.K": reads the CURRENT hidden state, so it must run right after block
  // deepstack_visual_indexes[k] (§3.4 step 7, §3.5).
  Status run_deepstack(Stream& stream, int k, const WeightGroup& group, void* base);
  // "vision.merger" (§3.5). Then reads back the first row of each image of every output
  // (synchronizing the stream) and returns a `damaged` error if one holds a NaN or Inf.
  Status run_merger(Stream& stream, const WeightGroup& group, void* base);

  TensorView hidden() const;          // [num_patches, hidden] bf16: the residual stream
  TensorView image_embeds() const;    // [num_tokens, out_hidden] bf16, prompt order
  TensorView deepstack(int k) const;  // [num_tokens, out_hidden] bf16
  int num_deepstack() const { return static_cast<int>(deepstack_.size()); }
  // Device bytes of every activation and table buffer it allocated (for budgets).
  uint64_t activation_bytes() const;

 private:
  Status check_outputs(Stream& stream);
  VisionEncoder() = default;
  // The carved bytes of the output buffers (true) or of the others.
  uint64_t carved_bytes(bool outputs);
  // Checks and geometry, no buffers (backend may be null: work_bytes).
  static Result<VisionEncoder> prepare(const VisionConfig& config, Backend* backend,
                                       std::vector<ImageGeometry> images);
  // The image embeddings and deepstack features: read by the prefill, never shared.
  bool is_output(const DeviceBuffer& buf) const;
  // Calls f(buffer, rows, cols, dtype) for every device buffer, in one fixed order.
  template <class F>
  Status for_each_buffer(F&& f);
  // A merger: LayerNorm (over hidden per patch, or over 4·hidden after regrouping when
  // `postshuffle`), fc1 with erf GELU, fc2 into `out` [T, out_hidden].
  Status run_merger_impl(Stream& stream, const WeightGroup& group, void* base, bool postshuffle,
                         TensorView out);

  VisionConfig config_;
  Backend* backend_ = nullptr;  // not owned
  Activation block_act_ = Activation::gelu_tanh;
  bool uploaded_ = false;
  std::vector<ImageGeometry> images_;
  std::vector<int64_t> patches_per_image_;
  int64_t num_patches_ = 0;

  // Host tables, kept alive until the stream synchronizes after upload_pixels.
  std::vector<int32_t> pos_idx_host_;   // [N, 4]
  std::vector<float> pos_weight_host_;  // [N, 4]
  std::vector<float> rope_cos_host_;    // [N, head_dim/2]
  std::vector<float> rope_sin_host_;    // [N, head_dim/2]
  std::vector<int32_t> segments_host_;  // [images + 1]: first patch row of each image, then N
  std::vector<uint16_t> pixels_host_;   // the f32 upload's pixels rounded to bf16
  int64_t max_patches_ = 0;             // patches of the largest image

  // Device buffers (N = num_patches, T = N/4, H = hidden).
  DeviceBuffer pixels_;                  // [N, patch_values] bf16
  DeviceBuffer pos_idx_;                 // [N, 4] i32
  DeviceBuffer pos_weight_;              // [N, 4] f32
  DeviceBuffer rope_cos_;                // [N, head_dim/2] f32
  DeviceBuffer rope_sin_;                // [N, head_dim/2] f32
  DeviceBuffer segments_;                // [images + 1, 1] i32: attention stays within an image
  DeviceBuffer x_;                       // [N, H] bf16: the residual stream
  DeviceBuffer norm_;                    // [N, H] = [T, 4H] bf16: norm outputs, branch outputs
  DeviceBuffer qkv_;                     // [N, 3H] bf16
  DeviceBuffer attn_;                    // [N, H] bf16
  DeviceBuffer mlp_;                     // [N, intermediate] bf16
  DeviceBuffer merger_mid_;              // [T, 4H] bf16: merger fc1 output
  DeviceBuffer embeds_;                  // [T, out_hidden] bf16
  std::vector<DeviceBuffer> deepstack_;  // each [N/4, out_hidden] bf16
};

// Deterministic test images: seeded uint8 pixels (splitmix64), normalized (x − 127.5)/127.5 and
// patchified in the §3.1 order, each still image repeated in time (τ = 0 and 1 identical).
// Returns [Σ patches, patch_values] f32.
std::vector<float> synthetic_pixel_values(uint64_t seed, const std::vector<ImageGeometry>& images,
                                          const VisionConfig& config);
// The number of floats synthetic_pixel_values produces for `images`.
int64_t pixel_value_count(const std::vector<ImageGeometry>& images, const VisionConfig& config);
// The same values written into `out` (exactly pixel_value_count floats).
void synthetic_pixel_values_into(uint64_t seed, const std::vector<ImageGeometry>& images,
                                 const VisionConfig& config, std::span<float> out);
// pixel_values rounded to bf16 (round to nearest even, core/bf16.h), as the patch embedding's
// cast does on the device: what upload_pixels sends. `out` holds exactly pixels.size() values.
void round_pixels_bf16(std::span<const float> pixels, std::span<uint16_t> out);

}  // namespace ferry
