// The Qwen3 / Qwen3-VL text model (spec §1–§2): token embedding, decoder layers for prefill and
// decode over one KV cache, final norm + LM head on the last position.
//
// One forward step: begin_step(ids, positions) (uploads ids, positions and the step's cache rows,
// builds the rotary tables), run_embed ("text.embed"), run_layer(ℓ) for each of layer ℓ's part
// groups in order ("text.layers.ℓ.attn", ".gate_up", ".down") for every layer, run_head
// ("text.head.K"). Each enqueues ops on the stream; the group's bytes live at
// `base`, and no weight pointer is kept across calls. A prefill step may carry image embeddings
// and deepstack features (set_visual), which apply to that step only.
//
// A layer's ops read where the step sits in the cache from device memory (the cache rows to
// write, the first query's position) and attend over the cache's whole capacity, so a decode
// step's run_layer enqueues the same ops at every step: the executor may record it once and
// replay it (decode_layer_is_replayable).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"
#include "core/tensor.h"
#include "model/config.h"
#include "model/kv_cache.h"
#include "model/shared_region.h"
#include "model/weights.h"

namespace ferry {

// Qwen3-VL inputs of a prefill: rows of `image_embeds` replace the embeddings at `rows` (the
// <|image_pad|> positions, in order), and deepstack[k] is added at those rows after layer k.
struct VisualInjection {
  TensorView image_embeds;            // [n, hidden] bf16 (device)
  std::vector<TensorView> deepstack;  // each [n, hidden] bf16 (device)
  std::vector<int32_t> rows;          // [n] prompt positions
};

class ActivationLayout;  // text_decoder.cpp

class TextDecoder {
 public:
  // max_step_tokens: the longest step (the prompt); cache_capacity: prompt + generated tokens.
  // `activations`: carve the activation buffers from this region (shared with the vision
  // tower's working buffers, model/shared_region.h) instead of allocating them.
  static Result<TextDecoder> create(const TextConfig& config, Backend& backend,
                                    int64_t max_step_tokens, int64_t cache_capacity,
                                    SharedRegion* activations = nullptr);
  // The bytes of the activation buffers create() lays out for multi-token steps, in the shared
  // region when one is given (the KV cache and the single-token buffers apart).
  static uint64_t activation_bytes(const TextConfig& config, int64_t max_step_tokens);

  // The multi-token activations, which single-token steps never touch: idle from the first step
  // of one token after the last longer one. Empty when every step is one token (one layout).
  struct LentBytes {
    void* data = nullptr;
    uint64_t bytes = 0;
  };
  LentBytes idle_after_prefill() const;

  TextDecoder(TextDecoder&&) noexcept = default;
  TextDecoder& operator=(TextDecoder&&) noexcept = default;
  TextDecoder(const TextDecoder&) = delete;
  TextDecoder& operator=(const TextDecoder&) = delete;

  // Empties the cache and zeroes its bytes (so every cache byte is defined and a cache hash is
  // reproducible run to run).
  void reset(Stream& stream);

  // Starts a step of ids.size() tokens at cache row cache().length(), which then advances.
  // positions: [n, 3] (t, h, w) per token (rope_index.h). Host memory is copied; it need not
  // outlive the call.
  Status begin_step(Stream& stream, std::span<const int32_t> ids,
                    std::span<const int32_t> positions);
  // Image embeddings and deepstack features for the current step (call after begin_step).
  Status set_visual(Stream& stream, VisualInjection visual);

  Status run_embed(Stream& stream, const WeightGroup& group, void* base);
  // One part of layer `layer` (group.part says which); the parts must come in order.
  Status run_layer(Stream& stream, int layer, const WeightGroup& group, void* base);
  Status run_head(Stream& stream, const WeightGroup& group, void* base);

  // Synchronizes the stream and reads the last logits' raw bf16 bits.
  Status read_logits(Stream& stream, std::vector<uint16_t>& raw);

  TensorView logits() const;  // [1, vocab] bf16
  // [step tokens, hidden] bf16: the residual stream of this step (complete after run_head).
  TensorView hidden() const;
  const KvCache& cache() const { return cache_; }
  KvCache& cache() { return cache_; }
  int64_t step_tokens() const { return step_tokens_; }
  int64_t step_pos0() const { return step_pos0_; }
  const TextConfig& config() const { return config_; }
  Backend& backend() const { return *backend_; }

 private:
  TextDecoder() = default;
  void layout_step(ActivationLayout& c, const TextConfig& config, int64_t max_step_tokens);
  void layout_head(ActivationLayout& c, const TextConfig& config);
  // Points the step views at the single-token buffers (tokens == 1) or the large ones.
  void bind_step(int64_t tokens);
  // Whether layer `layer`'s MLP output is still in proj_, not yet added to x_ (the next layer's
  // input norm or the head adds it, in one op with the norm). Derived from the layer index and
  // the step's visual inputs, never tracked: a replayed layer runs no host code, so state that
  // run_layer set would go stale from the second decode step on.
  bool mlp_output_pending(int layer) const;
  // The layer's parts: the MLP output of the layer before joins the residual, attention up to
  // o_proj (its output in proj_); the residual add, post-attention norm, gate|up and SwiGLU (act_);
  // down_proj (proj_) and, where nothing defers it, the residual add.
  Status run_attention(Stream& stream, int layer, const WeightGroup& group, void* base);
  Status run_gate_up(Stream& stream, const WeightGroup& group, void* base);
  Status run_down(Stream& stream, int layer, const WeightGroup& group, void* base);

  TextConfig config_;
  Backend* backend_ = nullptr;  // not owned
  int64_t max_tokens_ = 0;
  int64_t step_tokens_ = 0;
  int64_t step_pos0_ = 0;
  bool visual_active_ = false;
  VisualInjection visual_;
  KvCache cache_;

  // Host staging; stays unchanged until the stream synchronizes (the head's read does).
  std::vector<int32_t> ids_host_;
  std::vector<int32_t> pos_host_;
  std::vector<int32_t> rows_host_;
  std::vector<int32_t> kv_rows_host_;

  HostBuffer logits_host_;  // page-locked staging of read_logits
  DeviceBuffer arena_;      // the step views below for steps of up to max_tokens_, 256-byte offsets
  DeviceBuffer single_;  // the same for one-token steps, and the head's views (empty: one layout)
  TensorView ids_;       // [max, 1] i32
  TensorView pos_;       // [max, 3] i32
  TensorView cos_;       // [max, head_dim/2] f32
  TensorView sin_;       // [max, head_dim/2] f32
  TensorView rows_;      // [max, 1] i32 image rows
  TensorView
      kv_rows_;      // [max, 1] i32 cache rows of this step's tokens (row 0: the first's position)
  TensorView x_;     // [max, hidden] bf16 residual
  TensorView norm_;  // [max, hidden] bf16
  TensorView qkv_;   // [max, (heads + 2·kv_heads)·head_dim] bf16: q | k | v
  TensorView attn_;  // [max, heads·head_dim] bf16
  TensorView proj_;  // [max, hidden] bf16 (o_proj, down_proj outputs)
  TensorView gate_up_;  // [max, 2·intermediate] bf16: gate | up
  TensorView act_;      // [max, intermediate] bf16
  TensorView head_in_;  // [1, hidden] bf16
  TensorView logits_;   // [1, vocab] bf16
};

// FNV-1a 64 over bytes: the logits hash `ferry run` prints (over the bf16 logits as produced).
uint64_t fnv1a64(const void* data, size_t bytes);

}  // namespace ferry
