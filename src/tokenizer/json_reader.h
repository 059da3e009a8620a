// Reading tokenizer.json (internal to src/tokenizer): a checker of fields and types whose errors
// start with the file's label, and the readers of the pipeline's parts (tokenizer_pipeline.cpp)
// that tokenizer_json.cpp calls. The file is hostile input: unknown keys are refused (an unknown
// option could change the ids), every field's type is checked.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "core/status.h"
#include "format/strict_json.h"
#include "tokenizer/tokenizer_impl.h"

namespace ferry::tok {

constexpr int64_t kMaxId = (int64_t{1} << 24) - 1;  // 16.7M ids: far above any vocabulary
constexpr size_t kMaxTokenBytes = 4096;

class Reader {
 public:
  using json = nlohmann::json;
  explicit Reader(std::string label) : label_(std::move(label)) {}

  Error fail(const std::string& where, const std::string& what) const {
    return make_error(ErrorCode::format, label_ + ": " + where + ": " + what);
  }
  Error unsupported(const std::string& where, const std::string& what) const {
    return make_error(ErrorCode::unsupported, label_ + ": " + where + ": " + what);
  }

  Status keys(const json& o, const std::string& where, std::initializer_list<const char*> allowed,
              std::initializer_list<const char*> required = {}) const {
    if (!o.is_object()) return fail(where, "expected an object");
    for (const auto& [k, v] : o.items()) {
      bool known = false;
      for (const char* a : allowed) known = known || k == a;
      if (!known) return unsupported(where, "unknown key " + strict_json::quote(k));
    }
    for (const char* r : required) {
      if (!o.contains(r)) return fail(where, std::string("missing key '") + r + "'");
    }
    return Status();
  }

  Result<std::string> string(const json& o, const std::string& where, const char* key) const {
    const json& v = o.at(key);
    if (!v.is_string()) return fail(where, std::string("'") + key + "' must be a string");
    return v.get<std::string>();
  }

  // A bool field; `fallback` when absent.
  Result<bool> boolean(const json& o, const std::string& where, const char* key,
                       bool fallback) const {
    if (!o.contains(key)) return fallback;
    const json& v = o.at(key);
    if (!v.is_boolean()) return fail(where, std::string("'") + key + "' must be true or false");
    return v.get<bool>();
  }

  Result<std::string> type(const json& o, const std::string& where) const {
    if (!o.is_object() || !o.contains("type")) return fail(where, "expected an object with a type");
    return string(o, where, "type");
  }

  Result<int32_t> id(const json& v, const std::string& where) const {
    if (!v.is_number_integer()) return fail(where, "id must be an integer");
    const auto i = v.get<int64_t>();
    if (i < 0 || i > kMaxId) {
      return fail(where,
                  "id " + std::to_string(i) + " outside [0, " + std::to_string(kMaxId) + "]");
    }
    return static_cast<int32_t>(i);
  }

 private:
  std::string label_;
};

// The parts of the pipeline around the model (tokenizer_pipeline.cpp). The pre-tokenizer decides
// whether the vocabulary is byte-level (a final ByteLevel step) or SentencePiece text (none, or a
// Metaspace step); the decoder must match it.
Status read_normalizer(const Reader& r, const nlohmann::json& n, Normalizer& out);
Status read_pre_tokenizer(const Reader& r, const nlohmann::json& p, Tokenizer::Impl& t);
Status read_decoder(const Reader& r, const nlohmann::json& d, Tokenizer::Impl& t);
// TemplateProcessing's special-token ids are checked against the vocabulary later
// (check_template).
Status read_post_processor(const Reader& r, const nlohmann::json& p, Tokenizer::Impl& t);
Status check_template(const Reader& r, const Tokenizer::Impl& t);

}  // namespace ferry::tok
