// Opening a compressed checkpoint (`ferry pack --compress`, model/compressed_checkpoint.h) as a
// model: its config and weight table, and the file-backed CompressedGroups the executor reads
// (each group's compressed bytes a span into the container's mapping, which `keep` holds).
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "host/compressed_groups.h"
#include "model/compressed_checkpoint.h"
#include "model/config.h"
#include "model/weights.h"

namespace ferry {

struct CompressedModel {
  ModelConfig config;
  ModelWeights weights;
  std::shared_ptr<const OpenContainer> container;  // also held by `groups`
  CompressedGroups groups;
};

// `dir`: the folder (config.json beside model.safetensors). Checks, beyond open_container: the
// container's groups are the model's, in order, each decoding to the size of its layout; its
// tensor table binds to the model (every tensor present with its dtype and shape, none
// unexpected); and every tensor the table places in a group lies there at the offset the
// model's layout gives it. A `format` error naming the group or tensor otherwise.
Result<CompressedModel> open_compressed_model(const std::string& dir);

}  // namespace ferry
