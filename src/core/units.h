// Counts for people: bytes in binary units as budgets are given ("812.4 MiB", "2.31 GiB"), and
// in decimal units as sizes on disk are ("1.15 GB"); parameter counts ("7.58B").
#pragma once

#include <cstdint>
#include <string>

namespace ferry {

std::string binary_bytes(uint64_t bytes);
// "1.15 GB", "8.9 MB", "512 B" (decimal units).
std::string human_bytes(uint64_t n);
// "576.4M", "7.58B", "512", "1.2K".
std::string human_params(int64_t n);

}  // namespace ferry
