#include "core/finite.h"

#include <algorithm>
#include <cstring>

namespace ferry {
namespace {

// An element is non-finite when all its exponent bits are set; a NaN when its mantissa is not 0.
// The first pass only counts (branch-free, vectorizable); the second, for the rare tensor that
// has any, tells NaN from Inf and finds the first.
template <class U>
NonFiniteCount scan(const std::byte* data, size_t count, U exp_mask, U man_mask, uint64_t base) {
  auto load = [data](size_t i) {
    U x;
    std::memcpy(&x, data + i * sizeof(U), sizeof(U));
    return x;
  };
  // Counted in blocks into a counter as wide as an element, so that the compiler keeps as many
  // lanes per vector register as there are elements (a 64-bit counter would quarter them).
  constexpr size_t kBlock = size_t{1} << (8 * sizeof(U) > 16 ? 16 : 8 * sizeof(U) - 1);
  uint64_t bad = 0;
  for (size_t at = 0; at < count; at += kBlock) {
    const size_t end = std::min(count, at + kBlock);
    U in_block = 0;
    for (size_t i = at; i < end; ++i) in_block += (load(i) & exp_mask) == exp_mask ? U{1} : U{0};
    bad += in_block;
  }
  NonFiniteCount c;
  if (bad == 0) return c;
  for (size_t i = 0; i < count; ++i) {
    const U x = load(i);
    if ((x & exp_mask) != exp_mask) continue;
    if ((x & man_mask) != 0) {
      ++c.nan;
    } else {
      ++c.inf;
    }
    c.first = std::min<uint64_t>(c.first, base + i);
  }
  return c;
}

}  // namespace

bool can_be_nonfinite(DType dtype) {
  switch (dtype) {
    case DType::bf16:
    case DType::f16:
    case DType::f32:
    case DType::f64:
    case DType::f8_e4m3:
    case DType::f8_e5m2:
      return true;
    default:
      return false;
  }
}

NonFiniteCount count_nonfinite(const std::byte* data, size_t bytes, DType dtype,
                               uint64_t first_index) {
  const size_t n = bytes / dtype_size(dtype);
  switch (dtype) {
    case DType::bf16:
      return scan<uint16_t>(data, n, 0x7f80, 0x007f, first_index);
    case DType::f16:
      return scan<uint16_t>(data, n, 0x7c00, 0x03ff, first_index);
    case DType::f32:
      return scan<uint32_t>(data, n, 0x7f800000u, 0x007fffffu, first_index);
    case DType::f64:
      return scan<uint64_t>(data, n, 0x7ff0000000000000ull, 0x000fffffffffffffull, first_index);
    case DType::f8_e4m3:  // the "fn" variant: no Inf, NaN is S.1111.111
      return scan<uint8_t>(data, n, 0x7f, 0x7f, first_index);
    case DType::f8_e5m2:
      return scan<uint8_t>(data, n, 0x7c, 0x03, first_index);
    default:
      return {};
  }
}

bool all_finite_bf16(std::span<const uint16_t> values) {
  // Four values per 64-bit word (this runs on every decode step's logits): a lane whose
  // exponent bits are all set becomes 0 after the xor, and a zero lane borrows into its top bit
  // when 1 is subtracted from every lane (a borrow can only make a lane above a zero lane look
  // zero too, which does not change "any").
  constexpr uint64_t kExp = 0x7f807f807f807f80ull;
  constexpr uint64_t kOnes = 0x0001000100010001ull;
  constexpr uint64_t kTops = 0x8000800080008000ull;
  const size_t words = values.size() / 4;
  uint64_t bad = 0;
  for (size_t i = 0; i < words; ++i) {
    uint64_t x;
    std::memcpy(&x, values.data() + 4 * i, sizeof x);
    const uint64_t v = (x & kExp) ^ kExp;
    bad |= (v - kOnes) & ~v & kTops;
  }
  for (size_t i = 4 * words; i < values.size(); ++i)
    bad |= (values[i] & 0x7f80u) == 0x7f80u ? 1u : 0u;
  return bad == 0;
}

bool all_finite(std::span<const float> values) {
  uint32_t bad = 0;
  for (float f : values) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    bad |= (u & 0x7f800000u) == 0x7f800000u ? 1u : 0u;
  }
  return bad == 0;
}

std::string_view nonfinite_hint() {
  return ": the weights are likely damaged; `ferry verify` on the checkpoint finds them";
}

Error nonfinite_error(const std::string& where) {
  return make_error(ErrorCode::damaged,
                    "non-finite values (NaN or Inf) in " + where + std::string(nonfinite_hint()));
}

}  // namespace ferry
