// The Alpamayo-R1 action expert (spec §6): action_in_proj, the 36 expert decoder layers that read
// the text model's KV cache, and action_out_proj with the Euler update of flow matching.
//
// One inference: begin(seed), then for step in [0, num_steps): run_in(step), run_layer(ℓ) for
// every layer, run_out(step), finish_step(step). The residual stream is fp32 (§6.3). finish_step
// synchronizes the stream and updates x on the host; actions() is valid after the last step.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"
#include "core/tensor.h"
#include "model/config.h"
#include "model/flow_matching.h"
#include "model/weights.h"

namespace ferry {

// What one expert layer reads of the text model.
struct ExpertLayerContext {
  // The TEXT model's layer-ℓ cache: bf16 [rows >= cache_len, kv_heads·head_dim]. Read only.
  TensorView k_cache, v_cache;
  int64_t cache_len = 0;
  // Cache rows [0, offset) are visible (offset <= cache_len: the prompt up to and including
  // <|traj_future_start|>); the expert's own 64 tokens are always visible, non-causally.
  int64_t offset = 0;
  // Positions of the expert tokens: rope_pos0 + j in all three M-RoPE rows (§6.3 step 1).
  int64_t rope_pos0 = 0;
};

// Precision of action_in_proj's Fourier frequencies f_k = logspace(0, log10(max_freq), n/2).
// The reference builds these buffers with torch.logspace inside from_pretrained(dtype=bf16), so
// they are most likely bf16 (spec §8.1: 1, 1.671875, 2.78125, 4.65625, 7.75, ...), and the
// release checkpoint does not carry them. ferry computes them in fp32 and, by default, rounds them
// to bf16; `f32` keeps the fp32 values. Dump the loaded reference buffers to settle it.
enum class FourierFreqs : uint8_t { bf16_rounded, f32 };

struct ExpertOptions {
  FourierFreqs fourier_freqs = FourierFreqs::bf16_rounded;
};

// The n/2 Fourier frequencies (n = num_fourier_feats), in fp32 or rounded to bf16.
std::vector<float> fourier_frequencies(int64_t num_fourier_feats, double max_freq,
                                       FourierFreqs precision);
// Feature rows F [tokens, (dims + 1)·n] f32 (spec §6.2): for each token, φ(x[token, d]) for every
// action dim d, then φ(t); φ(u) = √2·[sin α_0.., cos α_0..] with α_k = ((u·f_k)·2)·π in fp32.
void fourier_features(std::span<const float> x, int64_t tokens, int64_t dims, float t,
                      std::span<const float> freqs, std::span<float> out);

// Local tensor names of the expert groups (as model/arch_alpamayo.cpp binds them). "expert.in":
// trunk.{0,3,6,...}.{weight,bias} (the MLPEncoder Linears), trunk.{2,5,...}.weight (its
// RMSNorms), norm.{weight,bias} (the final LayerNorm). "expert.layers.N": the text-layer names.
// "expert.out": norm, action_out_proj.{weight,bias}.
class ActionExpert {
 public:
  static Result<ActionExpert> create(const AlpamayoConfig& config, Backend& backend,
                                     ExpertOptions options = {});

  ActionExpert(ActionExpert&&) noexcept = default;
  ActionExpert& operator=(ActionExpert&&) noexcept = default;
  ActionExpert(const ActionExpert&) = delete;
  ActionExpert& operator=(const ActionExpert&) = delete;

  // Seeded noise x0 [num_waypoints, 2] f32 and the Euler time grid (§6.4, §7.7).
  void begin(uint64_t seed);
  // Like begin, with a given x0 (tests).
  void begin_with(std::vector<float> x0);

  // "expert.in": host Fourier features of (x, t_step), then the action_in_proj MLP and LayerNorm
  // into the fp32 residual stream.
  Status run_in(Stream& stream, int step, const WeightGroup& group, void* base);
  // "expert.layers.N.attn", ".gate_up", ".down" (group.part), in order: one decoder layer over
  // the 64 tokens; keys = text cache rows [0, offset) then the expert's own 64 rows (the context
  // matters to the attention part only). Never writes the text cache.
  Status run_layer(Stream& stream, int layer, const WeightGroup& group, void* base,
                   const ExpertLayerContext& context);
  // "expert.out": final norm, action_out_proj → velocity v (bf16), and its copy to the host.
  Status run_out(Stream& stream, int step, const WeightGroup& group, void* base);
  // The host half of a step: synchronizes the stream, then x += Δ_step · v in fp32.
  Status finish_step(Stream& stream, int step);
  // Rotary tables for positions rope_pos0 + j (uploads and builds them; a no-op when they are
  // already built for rope_pos0). run_layer calls it too; calling it before the first layer keeps
  // the layers free of host copies, so that they can be recorded and replayed (graphs).
  Status prepare_rope(Stream& stream, int64_t rope_pos0);

  int num_steps() const { return static_cast<int>(grid_.deltas.size()); }
  int64_t num_tokens() const { return tokens_; }
  // [num_waypoints·2] normalized (accel, curvature); after the last step, the sampled actions.
  std::span<const float> actions() const { return x_; }
  // [num_waypoints·2] the velocity of the last run_out (bf16 values as floats).
  std::span<const float> last_velocity() const { return v_host_; }
  TensorView residual() const;  // [tokens, hidden] f32 (debugging and tests)
  // Device bytes of every activation buffer it allocated (for budgets).
  uint64_t activation_bytes() const;

 private:
  // The layer's parts (LayerPart): attention up to o_proj (into o_); the residual add, norm,
  // gate|up and SwiGLU (act_); down_proj and the residual add.
  Status run_attention(Stream& stream, const WeightGroup& group, void* base,
                       const ExpertLayerContext& context);
  Status run_gate_up(Stream& stream, const WeightGroup& group, void* base);
  Status run_down(Stream& stream, const WeightGroup& group, void* base);
  ActionExpert() = default;

  AlpamayoConfig config_;
  ExpertOptions options_;
  Backend* backend_ = nullptr;  // not owned
  std::vector<float> freqs_;    // n/2 Fourier frequencies
  int64_t tokens_ = 0;          // num_waypoints (64)
  TimeGrid grid_;
  std::vector<float> x_;              // [tokens, 2] f32, the flow state
  std::vector<float> features_host_;  // [tokens, 3·num_fourier_feats] f32
  std::vector<int32_t> pos_host_;     // [tokens, 3]
  std::vector<uint16_t> v_raw_;       // [tokens, 2] bf16 bits read back
  std::vector<float> v_host_;
  int64_t rope_pos0_ = -1;
  bool rope_ready_ = false;

  DeviceBuffer features_;  // [tokens, 60] f32
  DeviceBuffer mlp_a_;     // [tokens, in_hidden] bf16
  DeviceBuffer mlp_b_;     // [tokens, in_hidden] bf16
  DeviceBuffer enc_;       // [tokens, hidden] bf16 (last trunk Linear output)
  DeviceBuffer h_;         // [tokens, hidden] f32 residual
  DeviceBuffer norm_;      // [tokens, hidden] f32
  DeviceBuffer qkv_;       // [tokens, (heads + 2·kv_heads)·head_dim] bf16: q | own keys | values
  DeviceBuffer attn_;      // [tokens, heads·head_dim] bf16
  DeviceBuffer o_;         // [tokens, hidden] bf16
  DeviceBuffer gate_up_;   // [tokens, 2·intermediate] bf16: gate | up
  DeviceBuffer act_;       // [tokens, intermediate] bf16
  DeviceBuffer pos_;       // [tokens, 3] i32
  DeviceBuffer cos_;       // [tokens, head_dim/2] f32
  DeviceBuffer sin_;       // [tokens, head_dim/2] f32
  DeviceBuffer velocity_;  // [tokens, 2] bf16
};

}  // namespace ferry
