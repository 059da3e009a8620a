#include "core/units.h"

#include <cstdio>

namespace ferry {

namespace {

std::string units_fmt(const char* format, double value) {
  char buf[32];
  std::snprintf(buf, sizeof buf, format, value);
  return buf;
}

}  // namespace

std::string binary_bytes(uint64_t bytes) {
  char buf[32];
  const auto b = static_cast<double>(bytes);
  if (bytes >= (uint64_t{1} << 30)) {
    std::snprintf(buf, sizeof buf, "%.2f GiB", b / double(uint64_t{1} << 30));
  } else if (bytes >= (uint64_t{1} << 20)) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", b / double(uint64_t{1} << 20));
  } else if (bytes >= (uint64_t{1} << 10)) {
    std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  } else {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  }
  return buf;
}

std::string human_params(int64_t n) {
  const auto d = static_cast<double>(n);
  if (n >= 1'000'000'000) return units_fmt("%.2fB", d / 1e9);
  if (n >= 1'000'000) return units_fmt("%.1fM", d / 1e6);
  if (n >= 10'000) return units_fmt("%.1fK", d / 1e3);
  return std::to_string(n);
}

std::string human_bytes(uint64_t n) {
  const auto d = static_cast<double>(n);
  if (n >= 1'000'000'000) return units_fmt("%.2f GB", d / 1e9);
  if (n >= 1'000'000) return units_fmt("%.1f MB", d / 1e6);
  if (n >= 10'000) return units_fmt("%.1f kB", d / 1e3);
  return std::to_string(n) + " B";
}

}  // namespace ferry
