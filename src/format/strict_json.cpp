#include "format/strict_json.h"

#include <cstdint>
#include <exception>
#include <utility>
#include <vector>

namespace ferry::strict_json {
namespace {

using json = nlohmann::json;

// Builds a json DOM from SAX events, refusing duplicate keys and nesting beyond max_depth.
class StrictBuilder {
 public:
  explicit StrictBuilder(int max_depth) : max_depth_(max_depth) {}

  bool null() { return put(json(nullptr)); }
  bool boolean(bool v) { return put(json(v)); }
  bool number_integer(json::number_integer_t v) { return put(json(v)); }
  bool number_unsigned(json::number_unsigned_t v) { return put(json(v)); }
  bool number_float(json::number_float_t v, const json::string_t&) { return put(json(v)); }
  bool string(json::string_t& v) { return put(json(std::move(v))); }
  bool binary(json::binary_t&) { return fail("binary values are not JSON"); }
  bool start_object(std::size_t) { return open(json::object()); }
  bool start_array(std::size_t) { return open(json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(json::string_t& k) {
    json* top = stack_.back();
    if (top->contains(k)) {
      std::string where = keys_.size() > 1 && !keys_[keys_.size() - 2].empty()
                              ? " in " + quote(keys_[keys_.size() - 2])
                              : "";
      return fail("duplicate key " + quote(k) + where);
    }
    keys_.back() = std::move(k);
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    return fail(std::string("not valid JSON (") + e.what() + ")");
  }

  json& root() { return root_; }
  const std::string& error() const { return error_; }

 private:
  bool fail(std::string msg) {
    if (error_.empty()) error_ = std::move(msg);
    return false;
  }
  // Places a value where the parser is: root, end of the open array, or under the pending key.
  json* place(json&& v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    json* top = stack_.back();
    if (top->is_array()) {
      top->push_back(std::move(v));
      return &top->back();
    }
    json& slot = (*top)[keys_.back()];
    slot = std::move(v);
    return &slot;
  }
  bool put(json&& v) {
    place(std::move(v));
    return true;
  }
  bool open(json&& container) {
    if (static_cast<int>(stack_.size()) >= max_depth_)
      return fail("nested deeper than " + std::to_string(max_depth_) + " levels");
    stack_.push_back(place(std::move(container)));
    keys_.emplace_back();
    return true;
  }
  bool close() {
    stack_.pop_back();
    keys_.pop_back();
    return true;
  }

  int max_depth_;
  json root_;
  std::vector<json*> stack_;
  std::vector<std::string> keys_;  // pending key of each open container (unused for arrays)
  std::string error_;
};

}  // namespace

std::optional<size_t> find_invalid_utf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;  // no overlong forms
      if (c == 0xED) hi = 0x9F;  // no UTF-16 surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;  // no overlong forms
      if (c == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
    } else {
      return i;
    }
    if (n - i < len) return i;
    if (s[i + 1] < lo || s[i + 1] > hi) return i;
    for (size_t k = 2; k < len; ++k)
      if (s[i + k] < 0x80 || s[i + k] > 0xBF) return i;
    i += len;
  }
  return std::nullopt;
}

Result<nlohmann::json> parse(std::string_view text, int max_depth, std::string_view label,
                             std::string_view what) {
  auto prefix = [&] { return std::string(label) + ": " + std::string(what) + ": "; };
  if (auto bad = find_invalid_utf8(text))
    return make_error(ErrorCode::format,
                      prefix() + "not valid UTF-8 at byte " + std::to_string(*bad));
  StrictBuilder builder(max_depth);
  bool ok = false;
  try {
    ok = json::sax_parse(text.data(), text.data() + text.size(), &builder);
  } catch (const std::exception& e) {
    return make_error(ErrorCode::format, prefix() + "not valid JSON (" + e.what() + ")");
  }
  if (!ok) {
    const std::string& msg = builder.error();
    return make_error(ErrorCode::format, prefix() + (msg.empty() ? "not valid JSON" : msg));
  }
  return std::move(builder.root());
}

std::string quote(std::string_view s) {
  constexpr size_t kMax = 120;
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < kMax; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == 0) {
      out += "\\0";
    } else if (c < 0x20 || c == 0x7F) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > kMax) out += "...";
  out += "'";
  return out;
}

}  // namespace ferry::strict_json
