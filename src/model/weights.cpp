// Weight groups: layout, lookup, the per-architecture dispatch and the binding check.
#include "model/weights.h"

#include <algorithm>
#include <map>
#include <set>

#include "model/arch_tables.h"

namespace ferry {
namespace {

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string tensor_string(DType dtype, const std::vector<int64_t>& shape) {
  return std::string(dtype_name(dtype)) + " " + shape_string(shape);
}

}  // namespace

const char* group_kind_name(GroupKind k) {
  switch (k) {
    case GroupKind::embedding:
      return "embedding";
    case GroupKind::vision_patch:
      return "vision_patch";
    case GroupKind::vision_block:
      return "vision_block";
    case GroupKind::vision_merger:
      return "vision_merger";
    case GroupKind::decoder_layer:
      return "decoder_layer";
    case GroupKind::lm_head:
      return "lm_head";
    case GroupKind::expert_in:
      return "expert_in";
    case GroupKind::expert_layer:
      return "expert_layer";
    case GroupKind::expert_out:
      return "expert_out";
  }
  return "unknown";
}

const char* group_module_name(GroupKind k) {
  switch (k) {
    case GroupKind::vision_patch:
    case GroupKind::vision_block:
    case GroupKind::vision_merger:
      return "vision";
    case GroupKind::embedding:
    case GroupKind::decoder_layer:
      return "text";
    case GroupKind::lm_head:
      return "lm_head";
    case GroupKind::expert_in:
    case GroupKind::expert_layer:
    case GroupKind::expert_out:
      return "expert";
  }
  return "unknown";
}

const char* layer_part_suffix(LayerPart p) {
  switch (p) {
    case LayerPart::whole:
      return "";
    case LayerPart::attention:
      return ".attn";
    case LayerPart::gate_up:
      return ".gate_up";
    case LayerPart::down:
      return ".down";
  }
  return "";
}

std::string layer_group_name(std::string_view layer_name, LayerPart part) {
  return std::string(layer_name) + layer_part_suffix(part);
}

std::string_view layer_of_group_name(std::string_view group_name) {
  for (LayerPart p : kLayerParts) {
    const std::string_view suffix = layer_part_suffix(p);
    if (group_name.size() > suffix.size() && group_name.ends_with(suffix)) {
      return group_name.substr(0, group_name.size() - suffix.size());
    }
  }
  return group_name;
}

int64_t WeightSpec::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

uint64_t WeightSpec::source_offset() const {
  if (source_row0 == 0 || shape.empty()) return 0;
  // bytes / shape[0] is one row's bytes (finish() checked the products).
  return static_cast<uint64_t>(source_row0) * (bytes / static_cast<uint64_t>(shape[0]));
}

int64_t WeightGroup::params() const {
  int64_t n = 0;
  for (const auto& t : tensors) n += t.numel();
  return n;
}

const WeightSpec* WeightGroup::find(std::string_view local_name) const {
  for (const auto& t : tensors)
    if (t.local_name == local_name) return &t;
  return nullptr;
}

TensorView WeightGroup::view(void* base, std::string_view local_name) const {
  const WeightSpec* t = find(local_name);
  FERRY_CHECK(t != nullptr, "group " + name + " has no tensor " + std::string(local_name));
  FERRY_CHECK(!t->shape.empty(), "tensor " + t->checkpoint_name + " is a scalar");
  int64_t rows = 1;
  int64_t cols = t->shape.back();
  if (t->shape.size() >= 2) {
    rows = t->shape[0];
    cols = t->numel() / rows;
  }
  return make_view(static_cast<std::byte*>(base) + t->offset, t->dtype, rows, cols);
}

LmHeadChunks lm_head_chunks(const TextConfig& t) {
  // Elements, not bytes: every tensor of a model has one dtype. The floor keeps tiny models from
  // splitting their heads into hundreds of chunks (their layers are a few thousand elements),
  // while they still split into a few, so the chunked head is exercised everywhere.
  const int64_t h = t.hidden_size, q = t.num_heads * t.head_dim;
  const int64_t kv = t.num_kv_heads * t.head_dim, ff = t.intermediate_size;
  const int64_t largest_part = std::max({h * (2 * q + 2 * kv), 2 * h * ff, h * ff});
  const int64_t layer = std::max(largest_part, kLmHeadChunkFloor);
  const int64_t head = t.vocab_size * h;
  LmHeadChunks c;
  if (t.vocab_size <= 0 || h <= 0) return c;
  c.count = static_cast<int>(std::max<int64_t>(1, (head + layer - 1) / layer));
  c.rows = (t.vocab_size + c.count - 1) / c.count;
  c.rows = (c.rows + kLmHeadRowUnit - 1) / kLmHeadRowUnit * kLmHeadRowUnit;
  c.count = static_cast<int>((t.vocab_size + c.rows - 1) / c.rows);  // rounding may spare one
  return c;
}

uint64_t ModelWeights::total_bytes() const {
  uint64_t n = 0;
  for (const auto& g : groups) n += g.bytes;
  return n;
}

int64_t ModelWeights::total_params() const {
  // Each checkpoint tensor once, whole: a tied head and the chunks of a head count once.
  std::set<std::string_view> seen;
  int64_t n = 0;
  for (const auto& g : groups)
    for (const auto& t : g.tensors)
      if (seen.insert(t.checkpoint_name).second) {
        int64_t e = 1;
        for (int64_t d : t.checkpoint_shape()) e *= d;
        n += e;
      }
  return n;
}

const WeightGroup* ModelWeights::find(std::string_view group_name) const {
  for (const auto& g : groups)
    if (g.name == group_name) return &g;
  return nullptr;
}

namespace arch {

GroupBuilder::GroupBuilder(std::string name, GroupKind kind, int layer, LayerPart part) {
  group_.name = std::move(name);
  group_.kind = kind;
  group_.layer = layer;
  group_.part = part;
}

void GroupBuilder::add(std::string local_name, std::string checkpoint_name,
                       std::vector<int64_t> shape) {
  WeightSpec s;
  s.local_name = std::move(local_name);
  s.checkpoint_name = std::move(checkpoint_name);
  s.shape = std::move(shape);
  group_.tensors.push_back(std::move(s));
}

void GroupBuilder::add_rows(std::string local_name, std::string checkpoint_name,
                            std::vector<int64_t> shape, int64_t row0, int64_t rows) {
  WeightSpec s;
  s.local_name = std::move(local_name);
  s.checkpoint_name = std::move(checkpoint_name);
  s.shape = shape;
  s.shape[0] = rows;
  s.source_shape = std::move(shape);
  s.source_row0 = row0;
  group_.tensors.push_back(std::move(s));
}

Result<WeightGroup> GroupBuilder::finish(DType dtype) && {
  uint64_t offset = 0;
  for (auto& t : group_.tensors) {
    t.dtype = dtype;
    uint64_t bytes = dtype_size(dtype);
    for (int64_t d : t.shape) {
      if (d < 1 || __builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes)) {
        return make_error(ErrorCode::format, "tensor " + t.checkpoint_name + ": shape " +
                                                 shape_string(t.shape) + " is not a valid size");
      }
    }
    t.offset = offset;
    t.bytes = bytes;
    uint64_t end = 0;
    if (__builtin_add_overflow(offset, bytes, &end) || end > (uint64_t{1} << 62)) {
      return make_error(ErrorCode::format, "group " + group_.name + " is too large");
    }
    offset = (end + kGroupAlignment - 1) / kGroupAlignment * kGroupAlignment;
  }
  group_.bytes = offset;
  return std::move(group_);
}

Result<DType> weight_dtype(const std::string& torch_dtype) {
  if (torch_dtype == "bfloat16") return DType::bf16;
  if (torch_dtype == "float16") return DType::f16;
  if (torch_dtype == "float32") return DType::f32;
  return make_error(ErrorCode::unsupported, "weights of dtype '" + torch_dtype + "'");
}

}  // namespace arch

Result<ModelWeights> describe_weights(const ModelConfig& config) {
  switch (config.arch) {
    case Architecture::qwen3:
    case Architecture::llama:
      return arch::describe_qwen3(config);
    case Architecture::qwen3_vl:
      return arch::describe_qwen3_vl(config);
    case Architecture::alpamayo_r1:
      return arch::describe_alpamayo(config);
  }
  return make_error(ErrorCode::internal, "describe_weights: unknown architecture");
}

bool is_pack_padding(std::string_view name, DType dtype, size_t rank) {
  return dtype == DType::u8 && rank == 1 && name.size() > kPackPaddingPrefix.size() &&
         name.substr(0, kPackPaddingPrefix.size()) == kPackPaddingPrefix;
}

Status bind_tensors(const ModelWeights& weights, const std::vector<TensorMeta>& tensors,
                    std::string_view label) {
  std::map<std::string_view, const TensorMeta*> have;
  for (const auto& t : tensors) have.emplace(t.name, &t);
  std::set<std::string_view> wanted;
  std::vector<std::string> problems;
  size_t missing = 0, mismatched = 0, unexpected = 0;
  constexpr size_t kShow = 5;  // of each kind, then a count
  for (const auto& g : weights.groups) {
    for (const auto& spec : g.tensors) {
      if (!wanted.insert(spec.checkpoint_name).second) continue;  // a tied tensor, seen already
      auto it = have.find(spec.checkpoint_name);
      if (it == have.end()) {
        if (missing++ < kShow) problems.push_back("tensor " + spec.checkpoint_name + ": missing");
        continue;
      }
      const TensorMeta& t = *it->second;
      if (t.dtype != spec.dtype || t.shape != spec.checkpoint_shape()) {
        if (mismatched++ < kShow) {
          problems.push_back("tensor " + spec.checkpoint_name + ": expected " +
                             tensor_string(spec.dtype, spec.checkpoint_shape()) + ", got " +
                             tensor_string(t.dtype, t.shape));
        }
      }
    }
  }
  std::set<std::string_view> ignored(weights.ignored.begin(), weights.ignored.end());
  for (const auto& t : tensors) {
    if (wanted.count(t.name) || ignored.count(t.name)) continue;
    if (is_pack_padding(t.name, t.dtype, t.shape.size())) continue;
    if (unexpected++ < kShow) problems.push_back("tensor " + t.name + ": unexpected");
  }
  if (problems.empty()) return Status();
  std::string msg = std::string(label) + ": ";
  for (size_t i = 0; i < problems.size(); ++i) msg += (i ? "; " : "") + problems[i];
  auto more = [&](size_t n, const char* what) {
    if (n > kShow) msg += "; " + std::to_string(n - kShow) + " more " + what;
  };
  more(missing, "missing");
  more(mismatched, "mismatched");
  more(unexpected, "unexpected");
  return make_error(ErrorCode::format, msg);
}

Status check_runnable_dtypes(const ModelWeights& weights) {
  for (const WeightGroup& g : weights.groups) {
    for (const WeightSpec& t : g.tensors) {
      if (t.dtype != DType::bf16) {
        return make_error(ErrorCode::unsupported,
                          "tensor " + t.checkpoint_name + " is " +
                              std::string(dtype_name(t.dtype)) +
                              ": ferry runs BF16 weights only (the config's dtype)");
      }
    }
  }
  return {};
}

}  // namespace ferry
