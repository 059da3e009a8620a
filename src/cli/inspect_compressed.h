// What `ferry inspect` prints for a compressed checkpoint (model/compressed_checkpoint.h): the
// ratio of every group, of every module (vision, text, lm_head, expert) and of the whole model,
// and whether the container binds to the model of the config.json beside it. Pure printers,
// apart from gather_compressed_inspect.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace ferry::cli {

struct CompressedInspectGroup {
  std::string name;
  std::string module;
  uint64_t decoded_bytes = 0;
  uint64_t compressed_bytes = 0;
  bool coded = false;
};

struct CompressedInspectModule {
  std::string module;
  size_t groups = 0;
  uint64_t decoded_bytes = 0;
  uint64_t compressed_bytes = 0;
};

struct CompressedInspectReport {
  std::string path;
  std::string codec;          // "ferry-bf16-exponent-rans v1"
  uint64_t file_bytes = 0;    // the page cache the checkpoint needs
  uint64_t raw_bytes = 0;     // the source checkpoint's tensor bytes
  uint64_t stored_bytes = 0;  // tensors stored raw (no group holds them)
  size_t tensors = 0;
  std::vector<CompressedInspectGroup> groups;
  std::vector<CompressedInspectModule> modules;  // in order of first appearance
  uint64_t decoded_bytes = 0;                    // all groups
  uint64_t compressed_bytes = 0;
  std::string binding;  // "ok", what open_compressed_model found, or "no config.json"
};

// `path`: the folder or its model.safetensors. Errors: the container does not parse.
Result<CompressedInspectReport> gather_compressed_inspect(const std::string& path);

std::string format_compressed_text(const CompressedInspectReport& r);
std::string format_compressed_json(const CompressedInspectReport& r);

}  // namespace ferry::cli
