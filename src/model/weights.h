// Weight groups: the unit of residency and of one transfer (a transformer block, an embedding,
// a merger, a head). Each architecture binds every checkpoint tensor to a group through one
// table (model/arch_*.cpp); the group lays its tensors out flat at 256-byte aligned offsets, the
// same offsets in a streaming slot and in the resident region, so a result never depends on
// where a group lives.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"
#include "model/config.h"

namespace ferry {

inline constexpr uint64_t kGroupAlignment = 256;

enum class GroupKind {
  embedding,      // token embedding
  vision_patch,   // patch embed + position table
  vision_block,   // one ViT block
  vision_merger,  // final merger or a deepstack merger
  decoder_layer,  // one LM decoder layer
  lm_head,        // final norm + LM head, or one row chunk of it (norm in chunk 0)
  expert_in,      // action_in_proj
  expert_layer,   // one action-expert decoder layer
  expert_out,     // expert final norm + action_out_proj
};
const char* group_kind_name(GroupKind k);

// Which part of a decoder layer a group holds. A layer is three groups, each one transfer and one
// call, so that a streaming slot holds the largest part (the MLP's gate and up projections)
// instead of a whole layer: the ring costs less than half the device memory, and that memory
// keeps weights resident instead. The ops and their order are those of the whole layer, so the
// split changes no result. Groups that are not decoder layers are `whole`.
enum class LayerPart : uint8_t {
  whole,
  attention,  // input norm, q/k/v (+ q/k norms), o: the attention half up to o_proj
  gate_up,    // post-attention norm, gate and up (one GEMM), SwiGLU
  down,       // down_proj (and the residual add that completes the layer)
};
// ".attn", ".gate_up", ".down"; "" for whole.
const char* layer_part_suffix(LayerPart p);
inline constexpr LayerPart kLayerParts[] = {LayerPart::attention, LayerPart::gate_up,
                                            LayerPart::down};
// The module a group belongs to, for per-module totals: "vision", "text", "lm_head", "expert".
const char* group_module_name(GroupKind k);

struct WeightSpec {
  std::string checkpoint_name;  // "vlm.model.language_model.layers.3.self_attn.q_proj.weight"
  std::string local_name;       // "q_proj" (unique inside the group)
  DType dtype = DType::bf16;
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // inside the group, kGroupAlignment-aligned
  uint64_t bytes = 0;
  // A row range of a larger checkpoint tensor (an LM head split into streamable chunks): the
  // checkpoint tensor is `source_shape` (empty: `shape`, the whole tensor) and this spec holds its
  // rows [source_row0, source_row0 + shape[0]).
  std::vector<int64_t> source_shape;
  int64_t source_row0 = 0;

  int64_t numel() const;
  // The shape the checkpoint's tensor has (what binding checks).
  const std::vector<int64_t>& checkpoint_shape() const {
    return source_shape.empty() ? shape : source_shape;
  }
  // Where this spec's bytes start inside the checkpoint tensor's data.
  uint64_t source_offset() const;
};

struct WeightGroup {
  std::string name;  // "text.layers.3.attn", "vision.blocks.0", "text.head.0"
  GroupKind kind = GroupKind::decoder_layer;
  int layer = -1;  // block index for per-layer groups; chunk index for LM head chunks
  LayerPart part = LayerPart::whole;
  std::vector<WeightSpec> tensors;
  uint64_t bytes = 0;  // total, padded

  int64_t params() const;  // elements of all its tensors
  const WeightSpec* find(std::string_view local_name) const;
  // A 2-D view of a tensor in a group whose bytes start at `base`. 1-D tensors are [1, n];
  // higher-rank ones are flattened to [shape[0], rest] (a conv kernel to [out, in·k·k·k]).
  TensorView view(void* base, std::string_view local_name) const;
};

// Every weight group of a model, in execution order, with the checkpoint names bound.
struct ModelWeights {
  std::vector<WeightGroup> groups;
  // Checkpoint tensors the model does not load but tolerates when present: non-learned buffers
  // the model recomputes from config (Alpamayo's action_in_proj Fourier `freqs`).
  std::vector<std::string> ignored;

  uint64_t total_bytes() const;
  int64_t total_params() const;  // a tensor referenced by two groups (tied head) counts once
  const WeightGroup* find(std::string_view group_name) const;
};

// The name of a decoder layer's group for `part`: "text.layers.3" + ".attn".
std::string layer_group_name(std::string_view layer_name, LayerPart part);
// The layer a group name belongs to: "text.layers.3.gate_up" -> "text.layers.3"; a name without a
// part suffix is returned as it is.
std::string_view layer_of_group_name(std::string_view group_name);

// How the LM head is split along its rows: `count` chunks of `rows` rows (the last may be
// shorter), each no larger than the largest part of a decoder layer (LayerPart: q, k, v and o;
// gate and up; down) or kLmHeadChunkFloor elements, whichever is larger; rows a multiple of
// kLmHeadRowUnit. A function of the config alone: every plan, and
// the all-resident run, computes the logits in the same chunks, so they are bit-identical.
inline constexpr int64_t kLmHeadRowUnit = 64;
inline constexpr int64_t kLmHeadChunkFloor = int64_t{2} << 20;
struct LmHeadChunks {
  int count = 1;
  int64_t rows = 0;
};
LmHeadChunks lm_head_chunks(const TextConfig& t);

// The architecture's name table: every tensor the model needs, grouped, laid out.
Result<ModelWeights> describe_weights(const ModelConfig& config);

// One tensor as a checkpoint lists it (name, dtype, shape): what binding checks.
struct TensorMeta {
  std::string name;
  DType dtype = DType::bf16;
  std::vector<int64_t> shape;
};
// The tensors `ferry pack` writes into the gaps between weight groups (a safetensors file has
// no holes): 1-D U8 tensors named "ferry.pad.N". Binding tolerates them; nothing loads them.
inline constexpr std::string_view kPackPaddingPrefix = "ferry.pad.";
bool is_pack_padding(std::string_view name, DType dtype, size_t rank);

// The check bind_checkpoint does, on a plain list. Errors name every missing, mismatched and
// unexpected tensor (up to a few of each, then a count); `label` prefixes the message.
Status bind_tensors(const ModelWeights& weights, const std::vector<TensorMeta>& tensors,
                    std::string_view label = "checkpoint");

class Checkpoint;
// Checks that every tensor the table names is in the checkpoint with the expected dtype and
// shape ("tensor X: expected BF16 [4096, 4096], got BF16 [4096, 1024]"), and that the checkpoint
// has no tensor the table does not name.
Status bind_checkpoint(const ModelWeights& weights, const Checkpoint& checkpoint);

// Before binding: a tensor whose dtype in the checkpoint differs from the one the config's dtype
// gives it is a `format` error that names both and where each comes from.
Status check_checkpoint_dtypes(const ModelConfig& config, const ModelWeights& weights,
                               const Checkpoint& checkpoint);

// The models run BF16 weights only: an error naming the first tensor of another dtype (a config
// that says float16 or float32), raised before anything is loaded.
Status check_runnable_dtypes(const ModelWeights& weights);

}  // namespace ferry
