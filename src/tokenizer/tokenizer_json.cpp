// tokenizer.json -> Tokenizer::Impl. The file is hostile input: every field read is type-checked,
// keys ferry does not know are refused (an unknown option could change the ids), sizes and ids
// are bounded, and the vocabulary, merges and added tokens are checked against each other.
#include <cstdio>
#include <initializer_list>
#include <optional>
#include <utility>

#include "format/mapped_file.h"
#include "format/strict_json.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/json_reader.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

namespace ferry {
namespace {

using json = nlohmann::json;
using strict_json::quote;
using tok::kMaxId;
using tok::kMaxTokenBytes;
using tok::Reader;

constexpr size_t kMaxFileBytes = size_t{512} << 20;
constexpr int kMaxDepth = 16;

struct ModelParts {
  std::vector<std::pair<std::string, int32_t>> vocab;
  std::vector<std::pair<std::string, std::string>> merges;
  bool ignore_merges = false;
  bool byte_fallback = false;
  bool fuse_unk = false;
  std::optional<std::string> unk_token;
  std::unordered_map<std::string, int32_t> ids;  // vocabulary text -> id (build_vocabulary)
};

Result<ModelParts> read_model(const Reader& r, const json& m, bool byte_level) {
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
      return r.unsupported(where, std::string(affix) + " (used by neither Qwen nor Llama)");
    }
  }
  if (m.contains("unk_token") && !m.at("unk_token").is_null() && !m.at("unk_token").is_string())
    return r.fail(where, "'unk_token' must be a string or null");
  ModelParts parts;
  if (m.contains("unk_token") && m.at("unk_token").is_string())
    parts.unk_token = m.at("unk_token").get<std::string>();
  FERRY_ASSIGN_OR_RETURN(parts.fuse_unk, r.boolean(m, where, "fuse_unk", false));
  FERRY_ASSIGN_OR_RETURN(parts.byte_fallback, r.boolean(m, where, "byte_fallback", false));
  if (parts.byte_fallback && byte_level)
    return r.unsupported(where, "byte_fallback with a ByteLevel pre-tokenizer");
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
// The byte a SentencePiece byte token "<0xNN>" stands for.
std::optional<uint8_t> byte_token_value(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return std::nullopt;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  const int hi = hex(text[3]), lo = hex(text[4]);
  if (hi < 0 || lo < 0) return std::nullopt;
  return static_cast<uint8_t>(hi * 16 + lo);
}

Status place(const Reader& r, Tokenizer::Impl& t, int32_t id, const std::string& text,
             const std::string& where) {
  const auto i = static_cast<size_t>(id);
  if (t.known[i] && t.token_text[i] != text) {
    return r.fail(where, "id " + std::to_string(id) + " is both " + quote(t.token_text[i]) +
                             " and " + quote(text));
  }
  t.known[i] = 1;
  t.token_text[i] = text;
  if (t.decoder.kind == DecoderSpec::Kind::byte_level) {
    auto bytes = tok::byte_level_to_bytes(text);
    // The ByteLevel decoder maps a token whose every character stands for a byte to those
    // bytes, and leaves any other token as its own UTF-8 text.
    t.decoded[i] = bytes ? std::move(*bytes) : text;
    return Status();
  }
  // SentencePiece: the replacement character is a space; a <0xNN> token is its byte when the
  // decoder has a ByteFallback step.
  t.decoded[i] = text;
  if (!t.decoder.replace_from.empty()) {
    std::string out;
    for (size_t p = 0; p < text.size();) {
      if (text.compare(p, t.decoder.replace_from.size(), t.decoder.replace_from) == 0) {
        out += t.decoder.replace_to;
        p += t.decoder.replace_from.size();
      } else {
        out += text[p++];
      }
    }
    t.decoded[i] = std::move(out);
  }
  if (auto b = byte_token_value(text); b && t.decoder.byte_fallback) {
    t.byte_token[i] = static_cast<int16_t>(*b);
    t.decoded[i] = std::string(1, static_cast<char>(*b));
  }
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
  t.byte_token.assign(n, -1);
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

// The initial symbols of a SentencePiece vocabulary: its one-character tokens, its <0xNN>
// tokens (with byte_fallback) and its unknown token.
Status char_symbols(const Reader& r, const ModelParts& parts, tok::CharSymbols& cs) {
  cs.byte_tokens.fill(-1);
  for (const auto& [token, id] : parts.vocab) {
    size_t pos = 0;
    if (auto cp = tok::next_code_point(token, pos); cp && pos == token.size()) {
      cs.chars.emplace(*cp, id);
    }
  }
  if (parts.byte_fallback) {
    for (unsigned b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      if (auto it = parts.ids.find(name); it != parts.ids.end()) cs.byte_tokens[b] = it->second;
    }
  }
  if (parts.unk_token) {
    auto it = parts.ids.find(*parts.unk_token);
    if (it == parts.ids.end()) {
      return r.fail("model", "unk_token " + quote(*parts.unk_token) + " is not in the vocabulary");
    }
    cs.unk = it->second;
  }
  cs.fuse_unk = parts.fuse_unk;
  return Status();
}

// The ids of a byte-level vocabulary's 256 one-byte tokens.
Result<std::array<int32_t, 256>> byte_token_ids(
    const Reader& r, const std::unordered_map<std::string, int32_t>& vocab) {
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
  return byte_ids;
}

Status build_bpe(const Reader& r, const ModelParts& parts, Tokenizer::Impl& t) {
  const std::unordered_map<std::string, int32_t>& vocab = parts.ids;
  std::array<int32_t, 256> byte_ids{};
  if (t.byte_level) {
    FERRY_ASSIGN_OR_RETURN(byte_ids, byte_token_ids(r, vocab));
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
      if (!t.byte_level) {
        bytes_to_id.emplace(token, id);
      } else if (auto bytes = tok::byte_level_to_bytes(token)) {
        bytes_to_id.emplace(std::move(*bytes), id);
      }
    }
  }
  std::optional<tok::CharSymbols> chars;
  if (!t.byte_level) FERRY_RETURN_IF_ERROR(char_symbols(r, parts, chars.emplace()));
  t.bpe.emplace(byte_ids, merges, merged, std::move(bytes_to_id), parts.ignore_merges,
                std::move(chars));
  return Status();
}

Status build_matchers(Tokenizer::Impl& t) {
  std::vector<tok::AddedToken> raw, normalized;
  std::vector<std::string> raw_patterns, normalized_patterns;
  for (const tok::AddedToken& a : t.added) {
    if (a.normalized) {
      FERRY_ASSIGN_OR_RETURN(std::string p, t.normalizer.apply(a.content));
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
    FERRY_RETURN_IF_ERROR(tok::read_normalizer(r, doc.at("normalizer"), impl->normalizer));
  }
  FERRY_RETURN_IF_ERROR(tok::read_pre_tokenizer(r, doc.at("pre_tokenizer"), *impl));
  FERRY_RETURN_IF_ERROR(tok::read_decoder(r, doc.at("decoder"), *impl));
  if (doc.contains("post_processor")) {
    FERRY_RETURN_IF_ERROR(tok::read_post_processor(r, doc.at("post_processor"), *impl));
  }
  FERRY_ASSIGN_OR_RETURN(ModelParts parts, read_model(r, doc.at("model"), impl->byte_level));
  FERRY_ASSIGN_OR_RETURN(impl->added, read_added(r, doc));
  doc = json();  // the parts are copied out: free the document before building the tables
  FERRY_RETURN_IF_ERROR(build_vocabulary(r, parts, *impl));
  FERRY_RETURN_IF_ERROR(build_bpe(r, parts, *impl));
  FERRY_RETURN_IF_ERROR(tok::check_template(r, *impl));
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
