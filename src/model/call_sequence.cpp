#include "model/call_sequence.h"

#include <iterator>
#include <optional>
#include <sstream>
#include <string_view>

namespace ferry {

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::vision:
      return "vision";
    case Phase::prefill:
      return "prefill";
    case Phase::decode:
      return "decode";
    case Phase::expert:
      return "expert";
  }
  return "?";
}

namespace {

bool has_vision(Architecture a) {
  return a == Architecture::qwen3_vl || a == Architecture::alpamayo_r1;
}

class Builder {
 public:
  explicit Builder(const ModelWeights& weights) : weights_(weights) {}

  Status add(const std::string& name, Phase phase, int step) {
    for (size_t i = 0; i < weights_.groups.size(); ++i) {
      if (weights_.groups[i].name == name) {
        calls_.push_back(Call{static_cast<int>(i), phase, step});
        return {};
      }
    }
    return make_error(ErrorCode::internal, "call sequence: the model has no weight group " + name);
  }

  // Layers 0..layers-1 of a decoder stack, each as its three part groups in order.
  Status add_stack(const std::string& prefix, int64_t layers, Phase phase, int step) {
    for (int64_t l = 0; l < layers; ++l) {
      for (LayerPart part : kLayerParts) {
        FERRY_RETURN_IF_ERROR(add(layer_group_name(prefix + std::to_string(l), part), phase, step));
      }
    }
    return {};
  }

  // Every group of `kind`, in the weights' order; at least one.
  Status add_kind(GroupKind kind, Phase phase, int step) {
    bool any = false;
    for (size_t i = 0; i < weights_.groups.size(); ++i) {
      if (weights_.groups[i].kind == kind) {
        calls_.push_back(Call{static_cast<int>(i), phase, step});
        any = true;
      }
    }
    if (any) return {};
    return make_error(ErrorCode::internal, std::string("call sequence: the model has no ") +
                                               group_kind_name(kind) + " group");
  }

  std::vector<Call> take() { return std::move(calls_); }

 private:
  const ModelWeights& weights_;
  std::vector<Call> calls_;
};

Status add_vision(Builder& b, const VisionConfig& v) {
  FERRY_RETURN_IF_ERROR(b.add("vision.patch", Phase::vision, 0));
  for (int64_t block = 0; block < v.depth; ++block) {
    FERRY_RETURN_IF_ERROR(b.add("vision.blocks." + std::to_string(block), Phase::vision, 0));
    for (size_t k = 0; k < v.deepstack_visual_indexes.size(); ++k) {
      if (v.deepstack_visual_indexes[k] == block) {
        FERRY_RETURN_IF_ERROR(b.add("vision.deepstack." + std::to_string(k), Phase::vision, 0));
      }
    }
  }
  return b.add("vision.merger", Phase::vision, 0);
}

Status add_text_step(Builder& b, const TextConfig& t, Phase phase, int step) {
  FERRY_RETURN_IF_ERROR(b.add("text.embed", phase, step));
  FERRY_RETURN_IF_ERROR(b.add_stack("text.layers.", t.num_layers, phase, step));
  return b.add_kind(GroupKind::lm_head, phase, step);  // the head's row chunks, in order
}

}  // namespace

Result<std::vector<Call>> call_sequence(const ModelWeights& weights, const ModelConfig& config,
                                        const Workload& w) {
  FERRY_RETURN_IF_ERROR(validate_workload(w, config));
  Builder b(weights);
  if (has_vision(config.arch) && w.num_images > 0) {
    const VisionConfig& v = config.arch == Architecture::alpamayo_r1
                                ? std::get<AlpamayoConfig>(config.body).vlm.vision
                                : std::get<Qwen3VLConfig>(config.body).vision;
    FERRY_RETURN_IF_ERROR(add_vision(b, v));
  }
  const TextConfig& text = config.text();
  FERRY_RETURN_IF_ERROR(add_text_step(b, text, Phase::prefill, 0));
  const int64_t steps = decode_steps(config, w);
  for (int64_t s = 0; s < steps; ++s) {
    FERRY_RETURN_IF_ERROR(add_text_step(b, text, Phase::decode, static_cast<int>(s)));
  }
  if (config.arch == Architecture::alpamayo_r1) {
    const auto& ar = std::get<AlpamayoConfig>(config.body);
    for (int64_t s = 0; s < w.flow_steps; ++s) {
      const int step = static_cast<int>(s);
      FERRY_RETURN_IF_ERROR(b.add("expert.in", Phase::expert, step));
      FERRY_RETURN_IF_ERROR(
          b.add_stack("expert.layers.", ar.expert.num_layers, Phase::expert, step));
      FERRY_RETURN_IF_ERROR(b.add("expert.out", Phase::expert, step));
    }
  }
  return b.take();
}

std::map<std::string, int64_t> calls_per_group(const std::vector<Call>& calls,
                                               const ModelWeights& weights) {
  std::map<std::string, int64_t> counts;
  for (const Call& c : calls) ++counts[weights.groups.at(static_cast<size_t>(c.group)).name];
  return counts;
}

namespace {

// "text.layers.12" -> ("text.layers.", 12); names without a trailing number -> nullopt.
std::optional<std::pair<std::string_view, long>> split_index(std::string_view name) {
  size_t i = name.size();
  while (i > 0 && name[i - 1] >= '0' && name[i - 1] <= '9') --i;
  if (i == name.size() || i == 0 || name[i - 1] != '.') return std::nullopt;
  return std::make_pair(name.substr(0, i), std::stol(std::string(name.substr(i))));
}

// Group names with each decoder layer's consecutive part groups (all of them, in order) as the
// layer's name: "text.layers.3.attn text.layers.3.gate_up text.layers.3.down" -> "text.layers.3".
std::vector<std::string> layer_names(const std::vector<const WeightGroup*>& groups) {
  std::vector<std::string> names;
  constexpr size_t kParts = std::size(kLayerParts);
  size_t i = 0;
  while (i < groups.size()) {
    const std::string_view layer = layer_of_group_name(groups[i]->name);
    bool whole_layer = layer != groups[i]->name && i + kParts <= groups.size();
    for (size_t k = 0; whole_layer && k < kParts; ++k) {
      whole_layer = groups[i + k]->part == kLayerParts[k] &&
                    layer_of_group_name(groups[i + k]->name) == layer;
    }
    if (whole_layer) {
      names.emplace_back(layer);
      i += kParts;
    } else {
      names.push_back(groups[i]->name);
      ++i;
    }
  }
  return names;
}

// The group names of one step, layers as one name and consecutive numbered runs collapsed:
// "text.layers.0..35".
std::string format_groups(const std::vector<const WeightGroup*>& groups) {
  const std::vector<std::string> names = layer_names(groups);
  std::ostringstream out;
  size_t i = 0;
  while (i < names.size()) {
    if (i > 0) out << ' ';
    const auto first = split_index(names[i]);
    size_t j = i + 1;
    if (first) {
      long last = first->second;
      while (j < names.size()) {
        const auto next = split_index(names[j]);
        if (!next || next->first != first->first || next->second != last + 1) break;
        last = next->second;
        ++j;
      }
      if (j - i > 1) {
        out << first->first << first->second << ".." << last;
        i = j;
        continue;
      }
    }
    out << names[i];
    i = j;
  }
  return out.str();
}

}  // namespace

std::string format_call_sequence(const std::vector<Call>& calls, const ModelWeights& weights) {
  // Split into (phase, step) runs, then merge consecutive steps with identical group lists.
  struct StepRun {
    Phase phase;
    int first_step, last_step;
    std::vector<int> groups;
  };
  std::vector<StepRun> runs;
  for (const Call& c : calls) {
    if (runs.empty() || runs.back().phase != c.phase || runs.back().last_step != c.step) {
      runs.push_back(StepRun{c.phase, c.step, c.step, {}});
    }
    runs.back().groups.push_back(c.group);
  }
  std::vector<StepRun> merged;
  for (StepRun& r : runs) {
    if (!merged.empty() && merged.back().phase == r.phase && merged.back().groups == r.groups &&
        merged.back().last_step + 1 == r.first_step) {
      merged.back().last_step = r.last_step;
    } else {
      merged.push_back(std::move(r));
    }
  }
  std::ostringstream out;
  for (const StepRun& r : merged) {
    std::vector<const WeightGroup*> gs;
    for (int g : r.groups) gs.push_back(&weights.groups.at(static_cast<size_t>(g)));
    std::string steps = r.first_step == r.last_step ? "step " + std::to_string(r.first_step)
                                                    : "steps " + std::to_string(r.first_step) +
                                                          ".." + std::to_string(r.last_step);
    std::string head = std::string(phase_name(r.phase)) + " " + steps;
    head.resize(std::max<size_t>(head.size(), 22), ' ');
    out << head << ": " << format_groups(gs) << '\n';
  }
  out << "total " << calls.size() << " calls\n";
  return out.str();
}

}  // namespace ferry
