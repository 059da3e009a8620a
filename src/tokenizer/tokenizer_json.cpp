// tokenizer.json -> Tokenizer::Impl. The file is hostile input: every field read is type-checked,
// keys ferry does not know are refused (an unknown option could change the ids), sizes and ids
// are bounded, and the vocabulary, merges and added tokens are checked against each other.
#include <initializer_list>
#include <utility>

#include "format/mapped_file.h"
#include "format/strict_json.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer_impl.h"

namespace ferry {
namespace {

using json = nlohmann::json;
using strict_json::quote;

constexpr size_t kMaxFileBytes = size_t{512} << 20;
constexpr int kMaxDepth = 16;
constexpr int64_t kMaxId = (int64_t{1} << 24) - 1;  // 16.7M ids: far above any vocabulary
constexpr size_t kMaxTokenBytes = 4096;
// GPT-2's pre-tokenizer pattern, used by ByteLevel when use_regex is true.
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class Reader {
 public:
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
      if (!known) return unsupported(where, "unknown key " + quote(k));
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

Status read_normalizer(const Reader& r, const json& n, std::vector<tok::NormalForm>& out) {
  if (n.is_null()) return Status();
  FERRY_ASSIGN_OR_RETURN(std::string type, r.type(n, "normalizer"));
  if (type == "Sequence") {
    FERRY_RETURN_IF_ERROR(r.keys(n, "normalizer", {"type", "normalizers"}, {"normalizers"}));
    if (!n.at("normalizers").is_array())
      return r.fail("normalizer", "'normalizers' must be a list");
    for (const json& item : n.at("normalizers")) {
      if (item.is_null()) return r.fail("normalizer", "null inside a Sequence");
      FERRY_RETURN_IF_ERROR(read_normalizer(r, item, out));
    }
    return Status();
  }
  FERRY_RETURN_IF_ERROR(r.keys(n, "normalizer " + type, {"type"}));
  if (type == "NFC") {
    out.push_back(tok::NormalForm::nfc);
  } else if (type == "NFD") {
    out.push_back(tok::NormalForm::nfd);
  } else if (type == "NFKC") {
    out.push_back(tok::NormalForm::nfkc);
  } else if (type == "NFKD") {
    out.push_back(tok::NormalForm::nfkd);
  } else {
    return r.unsupported("normalizer",
                         "type " + quote(type) + " (ferry knows NFC, NFD, NFKC, NFKD)");
  }
  return Status();
}

Status read_byte_level_options(const Reader& r, const json& o, const std::string& where,
                               bool* prefix_space, bool* use_regex) {
  FERRY_RETURN_IF_ERROR(
      r.keys(o, where, {"type", "add_prefix_space", "trim_offsets", "use_regex"}));
  FERRY_ASSIGN_OR_RETURN(bool prefix, r.boolean(o, where, "add_prefix_space", true));
  FERRY_ASSIGN_OR_RETURN(bool regex, r.boolean(o, where, "use_regex", true));
  FERRY_RETURN_IF_ERROR(r.boolean(o, where, "trim_offsets", true));  // offsets only
  if (prefix_space != nullptr) *prefix_space = prefix;
  if (use_regex != nullptr) *use_regex = regex;
  return Status();
}

// Flattens Sequences; every step lands in `steps`.
Status collect_pre_tokenizers(const Reader& r, const json& p, std::vector<const json*>& steps) {
  FERRY_ASSIGN_OR_RETURN(std::string type, r.type(p, "pre_tokenizer"));
  if (type != "Sequence") {
    steps.push_back(&p);
    return Status();
  }
  FERRY_RETURN_IF_ERROR(r.keys(p, "pre_tokenizer", {"type", "pretokenizers"}, {"pretokenizers"}));
  if (!p.at("pretokenizers").is_array())
    return r.fail("pre_tokenizer", "'pretokenizers' must be a list");
  for (const json& item : p.at("pretokenizers")) {
    FERRY_RETURN_IF_ERROR(collect_pre_tokenizers(r, item, steps));
  }
  return Status();
}

Status read_split(const Reader& r, const json& s, Tokenizer::Impl& t) {
  const std::string where = "pre_tokenizer Split";
  FERRY_RETURN_IF_ERROR(
      r.keys(s, where, {"type", "pattern", "behavior", "invert"}, {"pattern", "behavior"}));
  const json& pattern = s.at("pattern");
  if (!pattern.is_object() || pattern.size() != 1 ||
      !(pattern.contains("Regex") || pattern.contains("String"))) {
    return r.fail(where, "pattern must be {\"Regex\": ...} or {\"String\": ...}");
  }
  const bool literal = pattern.contains("String");
  FERRY_ASSIGN_OR_RETURN(std::string text, r.string(pattern, where, literal ? "String" : "Regex"));
  FERRY_ASSIGN_OR_RETURN(std::string behavior, r.string(s, where, "behavior"));
  FERRY_ASSIGN_OR_RETURN(bool invert, r.boolean(s, where, "invert", false));
  if (behavior != "Isolated" && behavior != "Removed") {
    return r.unsupported(where, "behavior " + quote(behavior) + " (ferry knows Isolated, Removed)");
  }
  const std::string compiled = literal ? text : tok::onig_compatible_pattern(text);
  FERRY_ASSIGN_OR_RETURN(tok::Regex regex, tok::Regex::compile(compiled, where, literal));
  t.splits.push_back(SplitStep{std::move(regex), behavior == "Removed", invert});
  return Status();
}

Status read_pre_tokenizer(const Reader& r, const json& p, Tokenizer::Impl& t) {
  if (p.is_null()) return r.unsupported("pre_tokenizer", "none (ferry needs ByteLevel)");
  std::vector<const json*> steps;
  FERRY_RETURN_IF_ERROR(collect_pre_tokenizers(r, p, steps));
  for (size_t i = 0; i < steps.size(); ++i) {
    const json& s = *steps[i];
    const std::string type = s.at("type").get<std::string>();
    const bool last = i + 1 == steps.size();
    if (type == "Split") {
      FERRY_RETURN_IF_ERROR(read_split(r, s, t));
    } else if (type == "ByteLevel" && last) {
      bool use_regex = false;
      FERRY_RETURN_IF_ERROR(
          read_byte_level_options(r, s, "pre_tokenizer ByteLevel", &t.prefix_space, &use_regex));
      if (use_regex) {
        FERRY_ASSIGN_OR_RETURN(t.byte_level_regex,
                               tok::Regex::compile(kGpt2Pattern, "ByteLevel regex"));
      }
      return Status();
    } else if (type == "ByteLevel") {
      return r.unsupported("pre_tokenizer", "ByteLevel before another step");
    } else {
      return r.unsupported("pre_tokenizer",
                           "type " + quote(type) + " (ferry knows Split, ByteLevel)");
    }
  }
  return r.unsupported("pre_tokenizer", "no ByteLevel step (ferry reads byte-level BPE only)");
}

Status read_post_and_decoder(const Reader& r, const json& doc) {
  for (const char* key : {"post_processor", "decoder"}) {
    if (!doc.contains(key)) continue;
    const json& v = doc.at(key);
    if (v.is_null() && std::string(key) == "post_processor") continue;
    FERRY_ASSIGN_OR_RETURN(std::string type, r.type(v, key));
    if (type != "ByteLevel") {
      return r.unsupported(key, "type " + quote(type) + " (ferry knows ByteLevel)");
    }
    FERRY_RETURN_IF_ERROR(read_byte_level_options(r, v, key, nullptr, nullptr));
  }
  if (!doc.contains("decoder")) return r.unsupported("decoder", "none (ferry needs ByteLevel)");
  return Status();
}

struct ModelParts {
  std::vector<std::pair<std::string, int32_t>> vocab;
  std::vector<std::pair<std::string, std::string>> merges;
  bool ignore_merges = false;
  std::unordered_map<std::string, int32_t> ids;  // vocabulary text -> id (build_vocabulary)
};

Result<ModelParts> read_model(const Reader& r, const json& m) {
  const std::string where = "model";
  FERRY_ASSIGN_OR_RETURN(std::string type, r.type(m, where));
  if (type != "BPE") return r.unsupported(where, "type " + quote(type) + " (ferry reads BPE)");
  FERRY_RETURN_IF_ERROR(
      r.keys(m, where,
             {"type", "dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix",
              "fuse_unk", "byte_fallback", "ignore_merges", "vocab", "merges"},
             {"vocab", "merges"}));
  if (m.contains("dropout") && !m.at("dropout").is_null()) {
    return r.unsupported(where, "dropout (encoding would be random)");
  }
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (m.contains(affix) && !m.at(affix).is_null() &&
        !(m.at(affix).is_string() && m.at(affix).get<std::string>().empty())) {
      return r.unsupported(where, std::string(affix) + " (not used by byte-level BPE)");
    }
  }
  if (m.contains("unk_token") && !m.at("unk_token").is_null() && !m.at("unk_token").is_string())
    return r.fail(where, "'unk_token' must be a string or null");
  FERRY_RETURN_IF_ERROR(r.boolean(m, where, "fuse_unk", false));
  FERRY_ASSIGN_OR_RETURN(bool byte_fallback, r.boolean(m, where, "byte_fallback", false));
  if (byte_fallback) return r.unsupported(where, "byte_fallback (not used by byte-level BPE)");
  ModelParts parts;
  FERRY_ASSIGN_OR_RETURN(parts.ignore_merges, r.boolean(m, where, "ignore_merges", false));

  const json& vocab = m.at("vocab");
  if (!vocab.is_object()) return r.fail(where, "'vocab' must be an object");
  parts.vocab.reserve(vocab.size());
  for (const auto& [token, id] : vocab.items()) {
    if (token.empty() || token.size() > kMaxTokenBytes)
      return r.fail("model.vocab", "token " + quote(token) + " is empty or too long");
    FERRY_ASSIGN_OR_RETURN(int32_t i, r.id(id, "model.vocab " + quote(token)));
    parts.vocab.emplace_back(token, i);
  }
  const json& merges = m.at("merges");
  if (!merges.is_array()) return r.fail(where, "'merges' must be a list");
  parts.merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& e = merges[i];
    const std::string at = "model.merges[" + std::to_string(i) + "]";
    if (e.is_string()) {
      const std::string& s = e.get_ref<const std::string&>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
        return r.fail(at, quote(s) + " is not two tokens separated by one space");
      parts.merges.emplace_back(s.substr(0, space), s.substr(space + 1));
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      parts.merges.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
    } else {
      return r.fail(at, "a merge is \"left right\" or [left, right]");
    }
  }
  return parts;
}

Result<std::vector<tok::AddedToken>> read_added(const Reader& r, const json& doc) {
  std::vector<tok::AddedToken> out;
  if (!doc.contains("added_tokens")) return out;
  const json& list = doc.at("added_tokens");
  if (!list.is_array()) return r.fail("added_tokens", "must be a list");
  for (size_t i = 0; i < list.size(); ++i) {
    const json& a = list[i];
    const std::string at = "added_tokens[" + std::to_string(i) + "]";
    FERRY_RETURN_IF_ERROR(
        r.keys(a, at, {"id", "content", "single_word", "lstrip", "rstrip", "normalized", "special"},
               {"id", "content"}));
    tok::AddedToken t;
    FERRY_ASSIGN_OR_RETURN(t.id, r.id(a.at("id"), at));
    FERRY_ASSIGN_OR_RETURN(t.content, r.string(a, at, "content"));
    if (t.content.empty() || t.content.size() > kMaxTokenBytes)
      return r.fail(at, "content is empty or longer than " + std::to_string(kMaxTokenBytes));
    FERRY_ASSIGN_OR_RETURN(t.single_word, r.boolean(a, at, "single_word", false));
    FERRY_ASSIGN_OR_RETURN(t.lstrip, r.boolean(a, at, "lstrip", false));
    FERRY_ASSIGN_OR_RETURN(t.rstrip, r.boolean(a, at, "rstrip", false));
    FERRY_ASSIGN_OR_RETURN(t.special, r.boolean(a, at, "special", false));
    FERRY_ASSIGN_OR_RETURN(t.normalized, r.boolean(a, at, "normalized", !t.special));
    out.push_back(std::move(t));
  }
  return out;
}

// Puts text `text` at `id` in the per-id tables; refuses a second text for one id.
Status place(const Reader& r, Tokenizer::Impl& t, int32_t id, const std::string& text,
             const std::string& where) {
  const auto i = static_cast<size_t>(id);
  if (t.known[i] && t.token_text[i] != text) {
    return r.fail(where, "id " + std::to_string(id) + " is both " + quote(t.token_text[i]) +
                             " and " + quote(text));
  }
  t.known[i] = 1;
  t.token_text[i] = text;
  auto bytes = tok::byte_level_to_bytes(text);
  // The ByteLevel decoder maps a token whose every character stands for a byte to those bytes,
  // and leaves any other token as its own UTF-8 text.
  t.decoded[i] = bytes ? std::move(*bytes) : text;
  return Status();
}

// Fills the per-id tables and parts.ids (vocabulary text -> id), and checks the added tokens
// against the vocabulary and each other.
Status build_vocabulary(const Reader& r, ModelParts& parts, Tokenizer::Impl& t) {
  int64_t top = -1;
  for (const auto& [token, id] : parts.vocab) top = std::max<int64_t>(top, id);
  for (const auto& a : t.added) top = std::max<int64_t>(top, a.id);
  const auto n = static_cast<size_t>(top + 1);
  t.token_text.assign(n, std::string());
  t.decoded.assign(n, std::string());
  t.known.assign(n, 0);
  t.special.assign(n, 0);
  parts.ids.reserve(parts.vocab.size() + t.added.size());
  for (const auto& [token, id] : parts.vocab) {
    if (t.known[static_cast<size_t>(id)]) {
      return r.fail("model.vocab", "id " + std::to_string(id) + " is given to two tokens");
    }
    FERRY_RETURN_IF_ERROR(place(r, t, id, token, "model.vocab"));
    parts.ids.emplace(token, id);
  }
  std::unordered_map<int32_t, bool> added_ids;
  std::unordered_map<std::string, bool> added_contents;
  for (const tok::AddedToken& a : t.added) {
    const std::string where = "added token " + quote(a.content);
    if (!added_ids.emplace(a.id, true).second)
      return r.fail(where, "id " + std::to_string(a.id) + " is given to two added tokens");
    if (!added_contents.emplace(a.content, true).second) return r.fail(where, "listed twice");
    if (auto v = parts.ids.find(a.content); v != parts.ids.end() && v->second != a.id) {
      return r.fail(where, "id " + std::to_string(a.id) + " but the vocabulary has it at " +
                               std::to_string(v->second));
    }
    FERRY_RETURN_IF_ERROR(place(r, t, a.id, a.content, where));
    t.special[static_cast<size_t>(a.id)] = a.special ? 1 : 0;
  }
  return Status();
}

Status build_bpe(const Reader& r, const ModelParts& parts, Tokenizer::Impl& t) {
  const std::unordered_map<std::string, int32_t>& vocab = parts.ids;
  std::array<int32_t, 256> byte_ids{};
  const auto& stand_in = tok::byte_to_code_point();
  for (unsigned b = 0; b < 256; ++b) {
    std::string s;
    tok::append_utf8(s, stand_in[b]);
    auto it = vocab.find(s);
    if (it == vocab.end()) {
      return r.fail("model.vocab", "no token for byte " + std::to_string(b) + " (" + quote(s) +
                                       "): a byte-level vocabulary has all 256");
    }
    byte_ids[b] = it->second;
  }
  std::vector<tok::BpeMerge> merges;
  std::vector<int32_t> merged;
  merges.reserve(parts.merges.size());
  merged.reserve(parts.merges.size());
  for (size_t i = 0; i < parts.merges.size(); ++i) {
    const auto& [left, right] = parts.merges[i];
    auto a = vocab.find(left), b = vocab.find(right), ab = vocab.find(left + right);
    for (auto [it, text] : {std::pair{a, &left}, std::pair{b, &right}}) {
      if (it == vocab.end())
        return r.fail("model.merges[" + std::to_string(i) + "]",
                      quote(*text) + " is not in the vocabulary");
    }
    if (ab == vocab.end()) {
      return r.fail("model.merges[" + std::to_string(i) + "]",
                    "the merged token " + quote(left + right) + " is not in the vocabulary");
    }
    merges.push_back({a->second, b->second});
    merged.push_back(ab->second);
  }
  std::unordered_map<std::string, int32_t> bytes_to_id;
  if (parts.ignore_merges) {
    for (const auto& [token, id] : parts.vocab) {
      if (auto bytes = tok::byte_level_to_bytes(token)) bytes_to_id.emplace(std::move(*bytes), id);
    }
  }
  t.bpe.emplace(byte_ids, merges, merged, std::move(bytes_to_id), parts.ignore_merges);
  return Status();
}

Status build_matchers(Tokenizer::Impl& t) {
  std::vector<tok::AddedToken> raw, normalized;
  std::vector<std::string> raw_patterns, normalized_patterns;
  for (const tok::AddedToken& a : t.added) {
    if (a.normalized) {
      FERRY_ASSIGN_OR_RETURN(std::string p, tok::normalize_all(a.content, t.normalizer));
      normalized.push_back(a);
      normalized_patterns.push_back(std::move(p));
    } else {
      raw.push_back(a);
      raw_patterns.push_back(a.content);
    }
  }
  t.raw_matcher = tok::AddedMatcher(raw, raw_patterns);
  t.normalized_matcher = tok::AddedMatcher(normalized, normalized_patterns);
  return Status();
}

}  // namespace

Result<Tokenizer> Tokenizer::from_json(std::string_view text, std::string_view label) {
  const Reader r{std::string(label)};
  if (text.size() > kMaxFileBytes) return r.fail("file", "larger than 512 MiB");
  FERRY_ASSIGN_OR_RETURN(json doc, strict_json::parse(text, kMaxDepth, label, "JSON"));
  FERRY_RETURN_IF_ERROR(r.keys(doc, "top level",
                               {"version", "truncation", "padding", "added_tokens", "normalizer",
                                "pre_tokenizer", "post_processor", "decoder", "model"},
                               {"model", "pre_tokenizer", "decoder"}));
  if (doc.contains("truncation") && !doc.at("truncation").is_null())
    return r.unsupported("truncation", "set (ferry never cuts a text short)");
  if (doc.contains("version") && !doc.at("version").is_string())
    return r.fail("version", "must be a string");
  // padding only shapes batches; it does not change one text's ids.
  auto impl = std::make_unique<Impl>();
  if (doc.contains("normalizer")) {
    FERRY_RETURN_IF_ERROR(read_normalizer(r, doc.at("normalizer"), impl->normalizer));
  }
  FERRY_RETURN_IF_ERROR(read_pre_tokenizer(r, doc.at("pre_tokenizer"), *impl));
  FERRY_RETURN_IF_ERROR(read_post_and_decoder(r, doc));
  FERRY_ASSIGN_OR_RETURN(ModelParts parts, read_model(r, doc.at("model")));
  FERRY_ASSIGN_OR_RETURN(impl->added, read_added(r, doc));
  doc = json();  // the parts are copied out: free the document before building the tables
  FERRY_RETURN_IF_ERROR(build_vocabulary(r, parts, *impl));
  FERRY_RETURN_IF_ERROR(build_bpe(r, parts, *impl));
  impl->text_to_id = std::move(parts.ids);
  for (const tok::AddedToken& a : impl->added) impl->text_to_id.emplace(a.content, a.id);
  FERRY_RETURN_IF_ERROR(build_matchers(*impl));
  return Tokenizer(std::move(impl));
}

Result<Tokenizer> Tokenizer::load(const std::string& path) {
  FERRY_ASSIGN_OR_RETURN(MappedFile file, MappedFile::open(path));
  const auto bytes = file.bytes();
  return from_json(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()),
                   path);
}

Result<Tokenizer> Tokenizer::load_dir(const std::string& dir) {
  return load(dir + "/tokenizer.json");
}

}  // namespace ferry
