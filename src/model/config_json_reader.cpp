#include "model/config_json_reader.h"

#include <cmath>
#include <limits>
#include <optional>

namespace ferry::config_json {

std::string show(const json& v) {
  std::string s;
  try {
    s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  } catch (...) {
    return "<unprintable>";
  }
  if (s.size() > 48) s = s.substr(0, 45) + "...";
  return s;
}

bool nesting_within(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return false;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return true;
}

std::string Obj::where(std::string_view key) const {
  if (path_.empty()) return std::string(key);
  if (key.empty()) return path_;
  return path_ + "." + std::string(key);
}

Error Obj::error(std::string_view key, const std::string& message) const {
  return make_error(ErrorCode::format, label_ + ": " + where(key) + ": " + message);
}

Error Obj::error_here(const std::string& message) const {
  if (path_.empty()) return make_error(ErrorCode::format, label_ + ": " + message);
  return make_error(ErrorCode::format, label_ + ": " + path_ + ": " + message);
}

const json* Obj::get(std::string_view key) const {
  if (!j_->is_object()) return nullptr;
  auto it = j_->find(key);
  if (it == j_->end() || it->is_null()) return nullptr;
  return &*it;
}

Result<int64_t> Obj::to_integer(std::string_view key, const json& v, int64_t min,
                                int64_t max) const {
  auto describe = [&]() {
    if (min == 1) return std::string("expected a positive integer");
    if (min == 0) return std::string("expected a non-negative integer");
    return "expected an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  };
  int64_t value = 0;
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return error(key, "expected at most " + std::to_string(max) + ", got " + show(v));
    }
    value = static_cast<int64_t>(u);
  } else if (v.is_number_integer()) {
    value = v.get<int64_t>();
  } else {
    return error(key, describe() + ", got " + show(v));
  }
  if (value < min) return error(key, describe() + ", got " + show(v));
  if (value > max) {
    return error(key, "expected at most " + std::to_string(max) + ", got " + show(v));
  }
  return value;
}

Result<double> Obj::to_number(std::string_view key, const json& v, double min, double max) const {
  if (!v.is_number()) return error(key, "expected a number, got " + show(v));
  double d = v.get<double>();
  if (!std::isfinite(d) || d < min || d > max) {
    std::string range = "expected a number in [" + show(json(min)) + ", " + show(json(max)) + "]";
    if (min > 0 && max == std::numeric_limits<double>::max()) range = "expected a positive number";
    return error(key, range + ", got " + show(v));
  }
  return d;
}

Result<int64_t> Obj::integer(std::string_view key, int64_t min, int64_t max) const {
  const json* v = get(key);
  if (v == nullptr) return error(key, "missing");
  return to_integer(key, *v, min, max);
}

Result<int64_t> Obj::integer_or(std::string_view key, int64_t fallback, int64_t min,
                                int64_t max) const {
  const json* v = get(key);
  if (v == nullptr) return fallback;
  return to_integer(key, *v, min, max);
}

Result<double> Obj::number(std::string_view key, double min, double max) const {
  const json* v = get(key);
  if (v == nullptr) return error(key, "missing");
  return to_number(key, *v, min, max);
}

Result<double> Obj::number_or(std::string_view key, double fallback, double min, double max) const {
  const json* v = get(key);
  if (v == nullptr) return fallback;
  return to_number(key, *v, min, max);
}

Result<bool> Obj::boolean_or(std::string_view key, bool fallback) const {
  const json* v = get(key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) return error(key, "expected true or false, got " + show(*v));
  return v->get<bool>();
}

Result<std::string> Obj::string(std::string_view key) const {
  const json* v = get(key);
  if (v == nullptr) return error(key, "missing");
  if (!v->is_string()) return error(key, "expected a string, got " + show(*v));
  return v->get<std::string>();
}

Result<std::string> Obj::string_or(std::string_view key, std::string fallback) const {
  if (get(key) == nullptr) return fallback;
  return string(key);
}

Result<std::vector<int64_t>> Obj::int_list(std::string_view key, int64_t min, int64_t max,
                                           size_t max_len) const {
  const json* v = get(key);
  if (v == nullptr) return error(key, "missing");
  if (!v->is_array()) return error(key, "expected a list of integers, got " + show(*v));
  if (v->size() > max_len) {
    return error(key, "expected at most " + std::to_string(max_len) + " entries, got " +
                          std::to_string(v->size()));
  }
  std::vector<int64_t> out;
  for (size_t i = 0; i < v->size(); ++i) {
    FERRY_ASSIGN_OR_RETURN(
        int64_t x, to_integer(std::string(key) + "[" + std::to_string(i) + "]", (*v)[i], min, max));
    out.push_back(x);
  }
  return out;
}

Result<Obj> Obj::object(std::string_view key) const {
  const json* v = get(key);
  if (v == nullptr) return error(key, "missing");
  if (!v->is_object()) return error(key, "expected an object, got " + show(*v));
  return Obj(v, where(key), label_);
}

Result<std::optional<Obj>> Obj::object_opt(std::string_view key) const {
  if (get(key) == nullptr) return std::optional<Obj>();
  FERRY_ASSIGN_OR_RETURN(Obj o, object(key));
  return std::optional<Obj>(std::move(o));
}

}  // namespace ferry::config_json
