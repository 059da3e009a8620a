// What `ferry inspect` prints: a checkpoint's tensors grouped by weight group (through the
// architecture's name table when config.json is recognized, else by name prefix up to the
// layer index), per-module and total parameters and bytes. Pure functions, tested apart from
// the file reader.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/units.h"
#include "model/config.h"

namespace ferry::cli {

struct InspectTensor {
  std::string name;
  DType dtype = DType::bf16;
  std::vector<int64_t> shape;
  uint64_t bytes = 0;
  std::string file;  // shard file name
};

struct InspectGroup {
  std::string name;    // "text.layers.3", or a name prefix "model.layers.3"
  std::string module;  // "vision", "text", "lm_head", "expert"; or a prefix "model.layers"
  int64_t params = 0;
  uint64_t bytes = 0;
  std::vector<size_t> tensors;  // indexes into InspectReport::tensors
};

struct InspectTotal {
  std::string module;
  int64_t params = 0;
  uint64_t bytes = 0;
};

struct InspectReport {
  std::string path;
  size_t files = 0;
  std::string architecture;  // empty when none was recognised: grouped by prefix
  std::string note;          // why no table was used, if none was
  std::string binding;       // "ok" or what binding found (only with a table)
  std::vector<InspectTensor> tensors;
  std::vector<InspectGroup> groups;   // table order, then unbound tensors by prefix
  std::vector<InspectTotal> modules;  // in order of first appearance
  int64_t total_params = 0;
  uint64_t total_bytes = 0;
};

// Groups `report.tensors` (already filled) through `config`'s table, or by prefix if null.
void group_report(InspectReport& report, const ModelConfig* config);

// The prefix group of a tensor name: up to and including the first numeric component
// ("model.layers.3.mlp.up_proj.weight" -> "model.layers.3"), else all but the last component.
std::string prefix_group(const std::string& tensor_name);

std::string format_text(const InspectReport& report, bool list_tensors);
std::string format_json(const InspectReport& report, bool list_tensors);

}  // namespace ferry::cli
