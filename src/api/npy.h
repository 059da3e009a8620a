// Minimal .npy (format 1.0) writer for --dump-logits / --dump-inputs and the image dumps:
// little-endian f4, i4, i8 and u1. Atomic: the file at `path` is the old one or the complete new
// one (format/atomic_write.h). And a reader for small numeric inputs (--ego-history).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
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

struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<double> values;  // C order
};

// Parses .npy bytes (format 1.0, 2.0 or 3.0) of little-endian floats (f2 is refused, f4, f8) or
// integers (i1..i8, u1..u8) in C order, into doubles. Hostile input: the header is parsed
// strictly, and a shape with more than `max_values` elements or bytes that do not match it is an
// error starting with `label`.
Result<NpyArray> parse_npy(std::string_view bytes, const std::string& label, size_t max_values);
Result<NpyArray> read_npy(const std::string& path, size_t max_values);

}  // namespace ferry
