#include "core/dtype.h"

#include <array>
#include <utility>

namespace ferry {
namespace {
struct DTypeInfo {
  DType type;
  std::string_view name;
  size_t size;
};
constexpr std::array<DTypeInfo, 15> kInfo = {{
    {DType::bool_, "BOOL", 1},
    {DType::u8, "U8", 1},
    {DType::i8, "I8", 1},
    {DType::u16, "U16", 2},
    {DType::i16, "I16", 2},
    {DType::f16, "F16", 2},
    {DType::bf16, "BF16", 2},
    {DType::u32, "U32", 4},
    {DType::i32, "I32", 4},
    {DType::f32, "F32", 4},
    {DType::u64, "U64", 8},
    {DType::i64, "I64", 8},
    {DType::f64, "F64", 8},
    {DType::f8_e4m3, "F8_E4M3", 1},
    {DType::f8_e5m2, "F8_E5M2", 1},
}};
const DTypeInfo& info(DType t) {
  for (const auto& i : kInfo)
    if (i.type == t) return i;
  return kInfo[0];  // unreachable for valid enum values
}
}  // namespace

size_t dtype_size(DType t) {
  return info(t).size;
}
std::string_view dtype_name(DType t) {
  return info(t).name;
}
std::optional<DType> parse_dtype(std::string_view name) {
  for (const auto& i : kInfo)
    if (i.name == name) return i.type;
  return std::nullopt;
}

}  // namespace ferry
