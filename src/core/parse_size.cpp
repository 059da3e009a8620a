#include "core/parse_size.h"

#include <cctype>
#include <limits>
#include <string>

namespace ferry {

Result<uint64_t> parse_size(std::string_view text) {
  auto bad = [&] {
    std::string msg(1, '\'');
    msg.append(text);
    msg.append("' is not a size (e.g. 5GB, 500MB, 2GiB, 4096)");
    return make_error(ErrorCode::invalid_argument, std::move(msg));
  };
  size_t i = 0;
  uint64_t n = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    const auto digit = static_cast<uint64_t>(text[i] - '0');
    if (n > (std::numeric_limits<uint64_t>::max() - digit) / 10) return bad();
    n = n * 10 + digit;
    ++i;
  }
  if (i == 0) return bad();
  // An optional fraction ("2.5GiB"), up to 9 digits.
  uint64_t frac = 0, frac_scale = 1;
  if (i < text.size() && text[i] == '.') {
    ++i;
    const size_t start = i;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
      if (i - start >= 9) return bad();
      frac = frac * 10 + static_cast<uint64_t>(text[i] - '0');
      frac_scale *= 10;
      ++i;
    }
    if (i == start) return bad();
  }
  std::string unit;
  for (; i < text.size(); ++i)
    unit += static_cast<char>(std::toupper(static_cast<unsigned char>(text[i])));
  uint64_t mult = 0;
  if (unit.empty() || unit == "B")
    mult = 1;
  else if (unit == "KB" || unit == "K")
    mult = 1000;
  else if (unit == "MB" || unit == "M")
    mult = 1000 * 1000;
  else if (unit == "GB" || unit == "G")
    mult = 1000ull * 1000 * 1000;
  else if (unit == "TB" || unit == "T")
    mult = 1000ull * 1000 * 1000 * 1000;
  else if (unit == "KIB")
    mult = 1ull << 10;
  else if (unit == "MIB")
    mult = 1ull << 20;
  else if (unit == "GIB")
    mult = 1ull << 30;
  else if (unit == "TIB")
    mult = 1ull << 40;
  else
    return bad();
  if (n > std::numeric_limits<uint64_t>::max() / mult) return bad();
  // frac < frac_scale <= 1e9 and mult <= 2^40, so frac * mult fits.
  const uint64_t part = frac_scale > 1 ? frac * mult / frac_scale : 0;
  if (n * mult > std::numeric_limits<uint64_t>::max() - part) return bad();
  const uint64_t total = n * mult + part;
  if (total == 0) return make_error(ErrorCode::invalid_argument, "a size must be positive");
  return total;
}

}  // namespace ferry
