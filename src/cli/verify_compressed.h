// `ferry verify` of a compressed checkpoint: every group decoded on the CPU with its checksum
// checked, and the decoded tensors (and those stored raw) scanned for NaN and Inf.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace ferry::cli {

struct CompressedVerifyReport {
  std::string path;
  size_t groups = 0;
  uint64_t compressed_bytes = 0;
  uint64_t decoded_bytes = 0;
  size_t tensors = 0;
  unsigned threads = 0;
  double seconds = 0.0;
  // One line each: a group whose bytes fail to decode or whose checksum fails (naming the group
  // and its tensor), or a tensor holding NaN or Inf.
  std::vector<std::string> damaged_groups;
  std::vector<std::string> nonfinite_tensors;
};

// Errors: the container does not parse (its metadata or table lies); a group whose bytes lie
// is a damaged group, not an error.
Result<CompressedVerifyReport> verify_compressed(const std::string& path, unsigned threads);

}  // namespace ferry::cli
