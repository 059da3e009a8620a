#include "cli/size_arg.h"

#include <cctype>
#include <limits>
#include <string>

namespace ferry::cli {

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
  if (n == 0) return make_error(ErrorCode::invalid_argument, "a size must be positive");
  if (n > std::numeric_limits<uint64_t>::max() / mult) return bad();
  return n * mult;
}

}  // namespace ferry::cli
