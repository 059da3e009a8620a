// Internal to config_json*.cpp: typed, bounds-checked field access on a parsed JSON object, with
// errors that name the field by its dotted path ("text_config.num_attention_heads").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace ferry::config_json {

using json = nlohmann::json;

// A short printable rendering of a value for messages (never throws).
std::string show(const json& v);

// Rejects JSON nested deeper than `max_depth` before nlohmann (recursive) ever sees it.
bool nesting_within(std::string_view text, int max_depth);

class Obj {
 public:
  Obj(const json* j, std::string path, std::string label)
      : j_(j), path_(std::move(path)), label_(std::move(label)) {}

  // "text_config.hidden_size" for key "hidden_size".
  std::string where(std::string_view key) const;
  Error error(std::string_view key, const std::string& message) const;
  Error error_here(const std::string& message) const;

  // The value, or nullptr when absent or JSON null.
  const json* get(std::string_view key) const;
  bool has(std::string_view key) const { return get(key) != nullptr; }

  Result<int64_t> integer(std::string_view key, int64_t min, int64_t max) const;
  Result<int64_t> integer_or(std::string_view key, int64_t fallback, int64_t min,
                             int64_t max) const;
  // A finite number in [min, max]; integers are accepted.
  Result<double> number(std::string_view key, double min, double max) const;
  Result<double> number_or(std::string_view key, double fallback, double min, double max) const;
  Result<bool> boolean_or(std::string_view key, bool fallback) const;
  Result<std::string> string(std::string_view key) const;
  Result<std::string> string_or(std::string_view key, std::string fallback) const;
  Result<std::vector<int64_t>> int_list(std::string_view key, int64_t min, int64_t max,
                                        size_t max_len) const;
  // A nested object (required / optional).
  Result<Obj> object(std::string_view key) const;
  Result<std::optional<Obj>> object_opt(std::string_view key) const;

  const json& raw() const { return *j_; }
  const std::string& path() const { return path_; }
  const std::string& label() const { return label_; }

 private:
  Result<int64_t> to_integer(std::string_view key, const json& v, int64_t min, int64_t max) const;
  Result<double> to_number(std::string_view key, const json& v, double min, double max) const;

  const json* j_;
  std::string path_;
  std::string label_;
};

}  // namespace ferry::config_json
