// Byte counts for people: "812.4 MiB", "2.31 GiB", "512 B" (binary units, as budgets are given).
#pragma once

#include <cstdint>
#include <string>

namespace ferry {

std::string binary_bytes(uint64_t bytes);

}  // namespace ferry
