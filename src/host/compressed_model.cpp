#include "host/compressed_model.h"

#include <utility>

#include "model/config_json.h"

namespace ferry {
namespace {

Error model_error(const std::string& dir, const std::string& what) {
  return make_error(ErrorCode::format, dir + ": compressed checkpoint: " + what);
}

// Each tensor of group g that the table places in g lies at the offset the layout gives it.
Status check_offsets(const std::string& dir, const ModelWeights& weights,
                     const ContainerTable& table) {
  std::map<std::string_view, const ContainerTensor*> by_name;
  for (const ContainerTensor& t : table.tensors) by_name.emplace(t.name, &t);
  for (size_t g = 0; g < weights.groups.size(); ++g) {
    for (const WeightSpec& s : weights.groups[g].tensors) {
      const ContainerTensor* t = by_name.at(s.checkpoint_name);  // bound: present
      if (s.bytes == 0) continue;
      if (t->stored) {
        return model_error(dir, "tensor " + s.checkpoint_name + " of group " +
                                    weights.groups[g].name + " is stored outside the groups");
      }
      const uint64_t src = s.source_offset();
      for (const TensorPiece& p : t->pieces) {
        if (p.group != g || src < p.source || src - p.source >= p.bytes) continue;
        const uint64_t at = p.offset + (src - p.source);
        if (at != s.offset || s.bytes > p.bytes - (src - p.source)) {
          return model_error(dir, "tensor " + s.checkpoint_name + " lies at byte " +
                                      std::to_string(at) + " of group " + weights.groups[g].name +
                                      ", the model's layout puts it at " +
                                      std::to_string(s.offset));
        }
      }
    }
  }
  return Status::ok_status();
}

}  // namespace

Result<CompressedModel> open_compressed_model(const std::string& dir) {
  FERRY_ASSIGN_OR_RETURN(ModelConfig config, load_config(dir));
  FERRY_ASSIGN_OR_RETURN(ModelWeights weights, describe_weights(config));
  FERRY_ASSIGN_OR_RETURN(OpenContainer opened, open_container(dir));
  auto container = std::make_shared<const OpenContainer>(std::move(opened));
  const ContainerTable& table = container->table;
  if (table.groups.size() != weights.groups.size()) {
    return model_error(dir, std::to_string(table.groups.size()) + " groups, the model has " +
                                std::to_string(weights.groups.size()));
  }
  for (size_t g = 0; g < table.groups.size(); ++g) {
    if (table.groups[g].name != weights.groups[g].name) {
      return model_error(dir, "group #" + std::to_string(g) + " is " + table.groups[g].name +
                                  ", the model's is " + weights.groups[g].name);
    }
  }
  FERRY_RETURN_IF_ERROR(
      bind_tensors(weights, container_tensor_metas(table), dir + ": compressed checkpoint"));
  FERRY_RETURN_IF_ERROR(check_offsets(dir, weights, table));
  FERRY_ASSIGN_OR_RETURN(CompressedGroups groups,
                         CompressedGroups::make(weights, container->group_bytes, container));
  return CompressedModel{std::move(config), std::move(weights), std::move(container),
                         std::move(groups)};
}

}  // namespace ferry
