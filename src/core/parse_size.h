// Byte sizes on the command line: "5GB", "500MB", "2GiB", "4096" (decimal units unless "i").
#pragma once

#include <cstdint>
#include <string_view>

#include "core/status.h"

namespace ferry {

Result<uint64_t> parse_size(std::string_view text);

}  // namespace ferry
