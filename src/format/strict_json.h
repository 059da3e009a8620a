// Strict JSON for hostile headers (internal to src/format): UTF-8 checked byte by byte, duplicate
// keys rejected at every depth (nlohmann::json alone keeps the last one silently), and nesting
// bounded so a deep input costs nothing.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace ferry::strict_json {

// Offset of the first byte that does not start or continue a well-formed UTF-8 sequence
// (overlong forms, surrogates and code points above U+10FFFF are ill-formed); nullopt if none.
std::optional<size_t> find_invalid_utf8(std::string_view text);

// Parses one JSON value. Errors (ErrorCode::format) start with `label`, e.g.
// "model.safetensors: header: duplicate key 'x'". `what` names the text ("header", "index").
Result<nlohmann::json> parse(std::string_view text, int max_depth, std::string_view label,
                             std::string_view what);

// A short, printable rendering of a possibly long or binary string for error messages.
std::string quote(std::string_view s);

}  // namespace ferry::strict_json
