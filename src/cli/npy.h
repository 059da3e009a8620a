// Minimal .npy (format 1.0) writer for --dump-logits / --dump-inputs and the image dumps:
// little-endian f4, i4, i8 and u1. Atomic: the file at `path` is the old one or the complete new
// one (format/atomic_write.h).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"

namespace ferry {

Status write_npy(const std::string& path, std::span<const float> data, std::vector<int64_t> shape);
Status write_npy(const std::string& path, std::span<const int32_t> data,
                 std::vector<int64_t> shape);
Status write_npy(const std::string& path, std::span<const int64_t> data,
                 std::vector<int64_t> shape);
Status write_npy(const std::string& path, std::span<const uint8_t> data,
                 std::vector<int64_t> shape);

}  // namespace ferry
