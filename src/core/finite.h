// Non-finite values (NaN, ±Inf): counted in raw tensor bytes of any floating dtype (`ferry
// verify`), tested in host copies of activations (the cheap checks of `run`), and the error that
// names where they appeared.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>

#include "core/dtype.h"
#include "core/status.h"

namespace ferry {

struct NonFiniteCount {
  uint64_t nan = 0;
  uint64_t inf = 0;
  uint64_t first = std::numeric_limits<uint64_t>::max();  // element index of the first, if any

  uint64_t total() const { return nan + inf; }
};

// The floating dtypes (integers cannot hold a NaN or an Inf).
bool can_be_nonfinite(DType dtype);

// Over the whole elements of `dtype` in [data, data + bytes); integer dtypes have none. Element
// indexes count from `first_index`. Allocates nothing and owns nothing, so it may run under a
// SIGBUS guard (format/fault_guard.h). Reads unaligned data safely.
NonFiniteCount count_nonfinite(const std::byte* data, size_t bytes, DType dtype,
                               uint64_t first_index = 0);

bool all_finite_bf16(std::span<const uint16_t> values);
bool all_finite(std::span<const float> values);

// A `damaged` error: "non-finite values (NaN or Inf) in <where>: ... `ferry verify` ...".
Error nonfinite_error(const std::string& where);
// The message's ending after <where>, for a caller that names the damaged tensors instead.
std::string_view nonfinite_hint();

}  // namespace ferry
