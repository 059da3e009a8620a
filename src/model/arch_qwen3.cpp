// Qwen3 / Llama name table (transformers Qwen3ForCausalLM, LlamaForCausalLM): one decoder layer,
// also used by Qwen3-VL's language model and Alpamayo's action expert.
#include <algorithm>
#include <string>

#include "model/arch_tables.h"

namespace ferry::arch {

Status append_decoder_layer(ModelWeights& w, const TextConfig& t, const std::string& layer_name,
                            GroupKind kind, int layer, const std::string& prefix, DType dtype) {
  const int64_t h = t.hidden_size;
  const int64_t q = t.num_heads * t.head_dim;
  const int64_t kv = t.num_kv_heads * t.head_dim;
  const int64_t ff = t.intermediate_size;
  auto builder = [&](LayerPart part) {
    return GroupBuilder(layer_group_name(layer_name, part), kind, layer, part);
  };
  // Layout order inside each part: q, k, v adjacent and gate, up adjacent, so each set is one GEMM.
  GroupBuilder a = builder(LayerPart::attention);
  a.add("input_layernorm", prefix + "input_layernorm.weight", {h});
  a.add("q_proj", prefix + "self_attn.q_proj.weight", {q, h});
  a.add("k_proj", prefix + "self_attn.k_proj.weight", {kv, h});
  a.add("v_proj", prefix + "self_attn.v_proj.weight", {kv, h});
  if (t.qk_norm) {
    a.add("q_norm", prefix + "self_attn.q_norm.weight", {t.head_dim});
    a.add("k_norm", prefix + "self_attn.k_norm.weight", {t.head_dim});
  }
  a.add("o_proj", prefix + "self_attn.o_proj.weight", {h, q});
  GroupBuilder g = builder(LayerPart::gate_up);
  g.add("post_attention_layernorm", prefix + "post_attention_layernorm.weight", {h});
  g.add("gate_proj", prefix + "mlp.gate_proj.weight", {ff, h});
  g.add("up_proj", prefix + "mlp.up_proj.weight", {ff, h});
  GroupBuilder d = builder(LayerPart::down);
  d.add("down_proj", prefix + "mlp.down_proj.weight", {h, ff});
  for (GroupBuilder* b : {&a, &g, &d}) {
    FERRY_ASSIGN_OR_RETURN(WeightGroup group, std::move(*b).finish(dtype));
    w.groups.push_back(std::move(group));
  }
  return Status();
}

Status append_text_model(ModelWeights& w, const TextConfig& t, const std::string& model_prefix,
                         const std::string& lm_head_name) {
  FERRY_ASSIGN_OR_RETURN(DType dtype, weight_dtype(t.dtype));
  const std::string embed_name = model_prefix + "embed_tokens.weight";
  GroupBuilder embed("text.embed", GroupKind::embedding);
  embed.add("embed_tokens", embed_name, {t.vocab_size, t.hidden_size});
  FERRY_ASSIGN_OR_RETURN(WeightGroup eg, std::move(embed).finish(dtype));
  w.groups.push_back(std::move(eg));
  for (int i = 0; i < t.num_layers; ++i) {
    const std::string n = std::to_string(i);
    FERRY_RETURN_IF_ERROR(append_decoder_layer(w, t, "text.layers." + n, GroupKind::decoder_layer,
                                               i, model_prefix + "layers." + n + ".", dtype));
  }
  // A tied head reads the embedding tensor: the checkpoint has no lm_head.weight.
  const std::string head_name = t.tie_word_embeddings ? embed_name : lm_head_name;
  const LmHeadChunks chunks = lm_head_chunks(t);
  for (int k = 0; k < chunks.count; ++k) {
    const int64_t row0 = k * chunks.rows;
    const int64_t rows = std::min(chunks.rows, t.vocab_size - row0);
    GroupBuilder head("text.head." + std::to_string(k), GroupKind::lm_head, k);
    if (k == 0) head.add("norm", model_prefix + "norm.weight", {t.hidden_size});
    head.add_rows("lm_head", head_name, {t.vocab_size, t.hidden_size}, row0, rows);
    FERRY_ASSIGN_OR_RETURN(WeightGroup hg, std::move(head).finish(dtype));
    w.groups.push_back(std::move(hg));
  }
  return Status();
}

Result<ModelWeights> describe_qwen3(const ModelConfig& c) {
  ModelWeights w;
  FERRY_RETURN_IF_ERROR(append_text_model(w, c.text(), "model.", "lm_head.weight"));
  return w;
}

}  // namespace ferry::arch
