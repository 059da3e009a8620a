// Element types: every dtype a safetensors file may name, and the few ferry computes in.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace ferry {

enum class DType : uint8_t {
  bool_,
  u8,
  i8,
  u16,
  i16,
  f16,
  bf16,
  u32,
  i32,
  f32,
  u64,
  i64,
  f64,
  f8_e4m3,
  f8_e5m2,
};

// Bytes per element.
size_t dtype_size(DType t);
// The safetensors spelling: "BF16", "F32", "I64", "F8_E4M3", ...
std::string_view dtype_name(DType t);
// Parses the safetensors spelling; nullopt for anything else.
std::optional<DType> parse_dtype(std::string_view name);

}  // namespace ferry
