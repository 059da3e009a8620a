// The parts of tokenizer.json around the BPE model: normalizer, pre-tokenizer, decoder and
// post-processor (json_reader.h).
#include <string>
#include <vector>

#include "tokenizer/json_reader.h"
#include "tokenizer/utf8.h"

namespace ferry::tok {
namespace {

using json = nlohmann::json;
using strict_json::quote;

// GPT-2's pre-tokenizer pattern, used by ByteLevel when use_regex is true.
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// A {"String": s} or {"Regex": r} pattern (Split, Replace) compiled; `literal` tells which.
Result<Regex> read_pattern(const Reader& r, const json& pattern, const std::string& where,
                           bool* literal = nullptr) {
  if (!pattern.is_object() || pattern.size() != 1 ||
      !(pattern.contains("Regex") || pattern.contains("String"))) {
    return r.fail(where, "pattern must be {\"Regex\": ...} or {\"String\": ...}");
  }
  const bool is_literal = pattern.contains("String");
  FERRY_ASSIGN_OR_RETURN(std::string text,
                         r.string(pattern, where, is_literal ? "String" : "Regex"));
  if (text.empty()) return r.fail(where, "empty pattern");
  if (literal != nullptr) *literal = is_literal;
  const std::string compiled = is_literal ? text : onig_compatible_pattern(text);
  return Regex::compile(compiled, where, is_literal);
}

Status read_normalizer_step(const Reader& r, const json& n, const std::string& type,
                            Normalizer& out) {
  NormalizerStep step;
  if (type == "Prepend") {
    FERRY_RETURN_IF_ERROR(r.keys(n, "normalizer Prepend", {"type", "prepend"}, {"prepend"}));
    step.kind = NormalizerStep::Kind::prepend;
    FERRY_ASSIGN_OR_RETURN(step.text, r.string(n, "normalizer Prepend", "prepend"));
    out.add(std::move(step));
    return Status();
  }
  if (type == "Replace") {
    const std::string where = "normalizer Replace";
    FERRY_RETURN_IF_ERROR(r.keys(n, where, {"type", "pattern", "content"}, {"pattern", "content"}));
    step.kind = NormalizerStep::Kind::replace;
    FERRY_ASSIGN_OR_RETURN(step.pattern, read_pattern(r, n.at("pattern"), where));
    FERRY_ASSIGN_OR_RETURN(step.text, r.string(n, where, "content"));
    out.add(std::move(step));
    return Status();
  }
  FERRY_RETURN_IF_ERROR(r.keys(n, "normalizer " + type, {"type"}));
  if (type == "NFC") {
    step.form = NormalForm::nfc;
  } else if (type == "NFD") {
    step.form = NormalForm::nfd;
  } else if (type == "NFKC") {
    step.form = NormalForm::nfkc;
  } else if (type == "NFKD") {
    step.form = NormalForm::nfkd;
  } else {
    return r.unsupported("normalizer", "type " + quote(type) +
                                           " (ferry knows NFC, NFD, NFKC, NFKD, Prepend, Replace)");
  }
  out.add(std::move(step));
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

// Flattens Sequences; every step lands in `steps`. `list_key` names a Sequence's list.
Status collect_steps(const Reader& r, const json& p, const std::string& where, const char* list_key,
                     std::vector<const json*>& steps) {
  FERRY_ASSIGN_OR_RETURN(std::string type, r.type(p, where));
  if (type != "Sequence") {
    steps.push_back(&p);
    return Status();
  }
  FERRY_RETURN_IF_ERROR(r.keys(p, where, {"type", list_key}, {list_key}));
  if (!p.at(list_key).is_array()) {
    return r.fail(where, std::string("'") + list_key + "' must be a list");
  }
  for (const json& item : p.at(list_key)) {
    if (item.is_null()) return r.fail(where, "null inside a Sequence");
    FERRY_RETURN_IF_ERROR(collect_steps(r, item, where, list_key, steps));
  }
  return Status();
}

Status read_split(const Reader& r, const json& s, Tokenizer::Impl& t) {
  const std::string where = "pre_tokenizer Split";
  FERRY_RETURN_IF_ERROR(
      r.keys(s, where, {"type", "pattern", "behavior", "invert"}, {"pattern", "behavior"}));
  FERRY_ASSIGN_OR_RETURN(Regex regex, read_pattern(r, s.at("pattern"), where));
  FERRY_ASSIGN_OR_RETURN(std::string behavior, r.string(s, where, "behavior"));
  FERRY_ASSIGN_OR_RETURN(bool invert, r.boolean(s, where, "invert", false));
  if (behavior != "Isolated" && behavior != "Removed") {
    return r.unsupported(where, "behavior " + quote(behavior) + " (ferry knows Isolated, Removed)");
  }
  t.splits.push_back(SplitStep{std::move(regex), behavior == "Removed", invert});
  return Status();
}

// Metaspace's prepend scheme: prepend_scheme (tokenizers 0.15 on) or the older add_prefix_space.
Result<MetaspaceStep::Prepend> prepend_scheme(const Reader& r, const json& s,
                                              const std::string& where) {
  if (s.contains("prepend_scheme")) {
    FERRY_ASSIGN_OR_RETURN(std::string scheme, r.string(s, where, "prepend_scheme"));
    if (scheme == "always") return MetaspaceStep::Prepend::always;
    if (scheme == "first") return MetaspaceStep::Prepend::first;
    if (scheme == "never") return MetaspaceStep::Prepend::never;
    return r.fail(where, "prepend_scheme " + quote(scheme) + " (always, first or never)");
  }
  FERRY_ASSIGN_OR_RETURN(bool prefix, r.boolean(s, where, "add_prefix_space", true));
  return prefix ? MetaspaceStep::Prepend::always : MetaspaceStep::Prepend::never;
}

// The replacement character of a Metaspace step: exactly one character.
Result<std::string> replacement_char(const Reader& r, const json& s, const std::string& where) {
  FERRY_ASSIGN_OR_RETURN(std::string rep, r.string(s, where, "replacement"));
  size_t pos = 0;
  if (rep.empty() || !next_code_point(rep, pos) || pos != rep.size()) {
    return r.fail(where, "replacement must be one character, got " + quote(rep));
  }
  return rep;
}

Status read_metaspace(const Reader& r, const json& s, Tokenizer::Impl& t) {
  const std::string where = "pre_tokenizer Metaspace";
  FERRY_RETURN_IF_ERROR(r.keys(
      s, where, {"type", "replacement", "prepend_scheme", "split", "add_prefix_space", "str_rep"},
      {"replacement"}));
  MetaspaceStep m;
  FERRY_ASSIGN_OR_RETURN(m.replacement, replacement_char(r, s, where));
  if (s.contains("str_rep")) {
    FERRY_ASSIGN_OR_RETURN(std::string str_rep, r.string(s, where, "str_rep"));
    if (str_rep != m.replacement) return r.fail(where, "str_rep differs from replacement");
  }
  FERRY_ASSIGN_OR_RETURN(m.prepend, prepend_scheme(r, s, where));
  FERRY_ASSIGN_OR_RETURN(m.split, r.boolean(s, where, "split", true));
  t.metaspace = std::move(m);
  return Status();
}

// A decoder Sequence as Llama-2's files write it: Replace, ByteFallback, Fuse, Strip, each at
// most once and in that order (Replace and ByteFallback optional; Strip only after Fuse, which
// makes it act on the whole text).
Status read_piece_decoders(const Reader& r, const std::vector<const json*>& steps, DecoderSpec& d) {
  const std::string where = "decoder";
  int stage = 0;  // the next allowed: 0 Replace, 1 ByteFallback, 2 Fuse, 3 Strip, 4 nothing
  bool fused = false;
  d.kind = DecoderSpec::Kind::pieces;
  for (const json* sp : steps) {
    const json& s = *sp;
    const std::string type = s.at("type").get<std::string>();
    const std::string at = where + " " + type;
    if (type == "Replace" && stage <= 0) {
      FERRY_RETURN_IF_ERROR(r.keys(s, at, {"type", "pattern", "content"}, {"pattern", "content"}));
      const json& pattern = s.at("pattern");
      if (!pattern.is_object() || !pattern.contains("String") || pattern.size() != 1) {
        return r.unsupported(at, "only a {\"String\": ...} pattern");
      }
      FERRY_ASSIGN_OR_RETURN(d.replace_from, r.string(pattern, at, "String"));
      FERRY_ASSIGN_OR_RETURN(d.replace_to, r.string(s, at, "content"));
      if (d.replace_from.empty()) return r.fail(at, "empty pattern");
      stage = 1;
    } else if (type == "ByteFallback" && stage <= 1) {
      FERRY_RETURN_IF_ERROR(r.keys(s, at, {"type"}));
      d.byte_fallback = true;
      stage = 2;
    } else if (type == "Fuse" && stage <= 2) {
      FERRY_RETURN_IF_ERROR(r.keys(s, at, {"type"}));
      fused = true;
      stage = 3;
    } else if (type == "Strip" && fused && stage == 3) {
      FERRY_RETURN_IF_ERROR(r.keys(s, at, {"type", "content", "start", "stop"}));
      FERRY_ASSIGN_OR_RETURN(std::string content, r.string(s, at, "content"));
      if (content.size() != 1) return r.unsupported(at, "content other than one ASCII character");
      d.strip_char = content[0];
      for (const char* k : {"start", "stop"}) {
        if (!s.contains(k) || !s.at(k).is_number_unsigned() || s.at(k).get<uint64_t>() > 1024)
          return r.fail(at, std::string("'") + k + "' must be a count in [0, 1024]");
      }
      if (s.at("stop").get<uint64_t>() != 0) return r.unsupported(at, "stop other than 0");
      d.strip_left = static_cast<size_t>(s.at("start").get<uint64_t>());
      stage = 4;
    } else {
      return r.unsupported(
          where, "step " + quote(type) +
                     " here (ferry knows Replace, ByteFallback, Fuse, Strip after Fuse, in order)");
    }
  }
  return Status();
}

// One TemplateProcessing template (single or pair): its items; `single` holds exactly one A.
Result<std::vector<TemplateItem>> read_template(const Reader& r, const json& items,
                                                const json& specials, const std::string& where,
                                                bool single) {
  if (!items.is_array()) return r.fail(where, "must be a list");
  std::vector<TemplateItem> out;
  int sequences = 0;
  for (const json& item : items) {
    if (!item.is_object() || item.size() != 1) {
      return r.fail(where, "an item is {\"SpecialToken\": ...} or {\"Sequence\": ...}");
    }
    const bool is_seq = item.contains("Sequence");
    if (!is_seq && !item.contains("SpecialToken")) {
      return r.fail(where, "an item is {\"SpecialToken\": ...} or {\"Sequence\": ...}");
    }
    const json& body = item.at(is_seq ? "Sequence" : "SpecialToken");
    FERRY_RETURN_IF_ERROR(r.keys(body, where, {"id", "type_id"}, {"id"}));
    FERRY_ASSIGN_OR_RETURN(std::string id, r.string(body, where, "id"));
    TemplateItem t;
    if (is_seq) {
      if (id != "A" && (single || id != "B")) return r.fail(where, "sequence " + quote(id));
      if (id == "A") ++sequences;
      t.sequence = true;
    } else {
      if (!specials.contains(id)) return r.fail(where, quote(id) + " is not in special_tokens");
      const json& ids = specials.at(id).at("ids");
      for (const json& v : ids) {
        FERRY_ASSIGN_OR_RETURN(int32_t i, r.id(v, where + " " + quote(id)));
        t.ids.push_back(i);
      }
    }
    out.push_back(std::move(t));
  }
  if (single && sequences != 1) return r.fail(where, "must hold the sequence A exactly once");
  return out;
}

Status read_template_processing(const Reader& r, const json& p, Tokenizer::Impl& t) {
  const std::string where = "post_processor TemplateProcessing";
  FERRY_RETURN_IF_ERROR(
      r.keys(p, where, {"type", "single", "pair", "special_tokens"}, {"single", "special_tokens"}));
  const json& specials = p.at("special_tokens");
  if (!specials.is_object()) return r.fail(where, "'special_tokens' must be an object");
  for (const auto& [name, s] : specials.items()) {
    const std::string at = where + " special_tokens " + quote(name);
    FERRY_RETURN_IF_ERROR(r.keys(s, at, {"id", "ids", "tokens"}, {"ids"}));
    if (!s.at("ids").is_array() || s.at("ids").size() > 64) {
      return r.fail(at, "'ids' must be a list of at most 64 ids");
    }
  }
  FERRY_ASSIGN_OR_RETURN(t.single_template,
                         read_template(r, p.at("single"), specials, where + " single", true));
  if (p.contains("pair")) {
    FERRY_RETURN_IF_ERROR(
        read_template(r, p.at("pair"), specials, where + " pair", false).status());
  }
  t.has_template = true;
  return Status();
}

}  // namespace

Status read_normalizer(const Reader& r, const json& n, Normalizer& out) {
  if (n.is_null()) return Status();
  std::vector<const json*> steps;
  FERRY_RETURN_IF_ERROR(collect_steps(r, n, "normalizer", "normalizers", steps));
  for (const json* s : steps) {
    FERRY_RETURN_IF_ERROR(read_normalizer_step(r, *s, s->at("type").get<std::string>(), out));
  }
  return Status();
}

Status read_pre_tokenizer(const Reader& r, const json& p, Tokenizer::Impl& t) {
  t.byte_level = false;
  if (p.is_null()) return Status();  // SentencePiece text, taken whole
  std::vector<const json*> steps;
  FERRY_RETURN_IF_ERROR(collect_steps(r, p, "pre_tokenizer", "pretokenizers", steps));
  for (size_t i = 0; i < steps.size(); ++i) {
    const json& s = *steps[i];
    const std::string type = s.at("type").get<std::string>();
    const bool last = i + 1 == steps.size();
    if (type == "Split") {
      FERRY_RETURN_IF_ERROR(read_split(r, s, t));
    } else if ((type == "ByteLevel" || type == "Metaspace") && !last) {
      return r.unsupported("pre_tokenizer", type + " before another step");
    } else if (type == "Metaspace") {
      return read_metaspace(r, s, t);
    } else if (type == "ByteLevel") {
      t.byte_level = true;
      bool use_regex = false;
      FERRY_RETURN_IF_ERROR(
          read_byte_level_options(r, s, "pre_tokenizer ByteLevel", &t.prefix_space, &use_regex));
      if (use_regex) {
        FERRY_ASSIGN_OR_RETURN(t.byte_level_regex, Regex::compile(kGpt2Pattern, "ByteLevel regex"));
      }
    } else {
      return r.unsupported("pre_tokenizer",
                           "type " + quote(type) + " (ferry knows Split, ByteLevel, Metaspace)");
    }
  }
  return Status();
}

Status read_decoder(const Reader& r, const json& d, Tokenizer::Impl& t) {
  if (d.is_null()) return r.unsupported("decoder", "none");
  std::vector<const json*> steps;
  FERRY_RETURN_IF_ERROR(collect_steps(r, d, "decoder", "decoders", steps));
  const std::string first = steps.front()->at("type").get<std::string>();
  if (t.byte_level) {
    if (steps.size() != 1 || first != "ByteLevel") {
      return r.unsupported(
          "decoder",
          "type " + quote(first) + " with a ByteLevel pre-tokenizer (ferry knows ByteLevel)");
    }
    t.decoder.kind = DecoderSpec::Kind::byte_level;
    return read_byte_level_options(r, *steps.front(), "decoder", nullptr, nullptr);
  }
  if (first == "ByteLevel") {
    return r.unsupported("decoder", "ByteLevel without a ByteLevel pre-tokenizer");
  }
  if (steps.size() == 1 && first == "Metaspace") {
    const std::string where = "decoder Metaspace";
    const json& s = *steps.front();
    FERRY_RETURN_IF_ERROR(r.keys(
        s, where, {"type", "replacement", "prepend_scheme", "split", "add_prefix_space", "str_rep"},
        {"replacement"}));
    t.decoder.kind = DecoderSpec::Kind::metaspace;
    FERRY_ASSIGN_OR_RETURN(t.decoder.replace_from, replacement_char(r, s, where));
    t.decoder.replace_to = " ";
    FERRY_ASSIGN_OR_RETURN(MetaspaceStep::Prepend prepend, prepend_scheme(r, s, where));
    t.decoder.drop_first = prepend != MetaspaceStep::Prepend::never;
    return Status();
  }
  return read_piece_decoders(r, steps, t.decoder);
}

Status read_post_processor(const Reader& r, const json& p, Tokenizer::Impl& t) {
  if (p.is_null()) return Status();
  std::vector<const json*> steps;
  FERRY_RETURN_IF_ERROR(collect_steps(r, p, "post_processor", "processors", steps));
  for (const json* s : steps) {
    const std::string type = s->at("type").get<std::string>();
    if (type == "ByteLevel") {
      // Offsets only (trim_offsets): the ids are unchanged.
      FERRY_RETURN_IF_ERROR(read_byte_level_options(r, *s, "post_processor", nullptr, nullptr));
    } else if (type == "TemplateProcessing" && !t.has_template) {
      FERRY_RETURN_IF_ERROR(read_template_processing(r, *s, t));
    } else {
      return r.unsupported("post_processor",
                           "type " + quote(type) + " (ferry knows ByteLevel, TemplateProcessing)");
    }
  }
  return Status();
}

Status check_template(const Reader& r, const Tokenizer::Impl& t) {
  for (const TemplateItem& item : t.single_template) {
    for (int32_t id : item.ids) {
      if (static_cast<size_t>(id) >= t.known.size() || !t.known[static_cast<size_t>(id)]) {
        return r.fail("post_processor", "special id " + std::to_string(id) + " names no token");
      }
    }
  }
  return Status();
}

}  // namespace ferry::tok
