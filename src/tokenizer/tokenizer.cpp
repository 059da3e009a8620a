#include "tokenizer/tokenizer.h"

#include "format/strict_json.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

namespace ferry {
namespace {

// Positions inside a pre-token are int32; no prompt comes near this.
constexpr size_t kMaxTextBytes = size_t{1} << 30;

// The pieces of `text` after one Split step: matches and the stretches between them, kept or
// dropped by the step's behavior; empty pieces are left out.
Status apply_split(const SplitStep& s, std::string_view text, std::vector<std::string_view>& out) {
  FERRY_ASSIGN_OR_RETURN(std::vector<tok::Span> found, s.regex.find_all(text));
  auto emit = [&](size_t b, size_t e, bool is_match) {
    if (e <= b) return;
    if (s.remove_matches && is_match != s.invert) return;
    out.push_back(text.substr(b, e - b));
  };
  size_t prev = 0;
  for (const tok::Span& m : found) {
    emit(prev, m.begin, false);
    emit(m.begin, m.end, true);
    prev = m.end;
  }
  emit(prev, text.size(), false);
  return Status();
}

bool is_ascii(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

namespace {

// Metaspace on one piece: spaces to the replacement, the replacement put in front as the scheme
// says, then (split) cut before every replacement; appends the pieces' ids.
void encode_metaspace(const MetaspaceStep& m, const tok::Bpe& bpe, std::string_view piece,
                      bool first, std::vector<int32_t>& out) {
  std::string s;
  s.reserve(piece.size() + m.replacement.size());
  for (char c : piece) {
    if (c == ' ') {
      s += m.replacement;
    } else {
      s += c;
    }
  }
  const bool prepend = m.prepend == MetaspaceStep::Prepend::always ||
                       (m.prepend == MetaspaceStep::Prepend::first && first);
  if (prepend && s.compare(0, m.replacement.size(), m.replacement) != 0) s.insert(0, m.replacement);
  if (!m.split) {
    bpe.encode(s, out);
    return;
  }
  size_t begin = 0;
  for (size_t at = s.find(m.replacement, 1); at != std::string::npos;
       at = s.find(m.replacement, at + 1)) {
    bpe.encode(std::string_view(s).substr(begin, at - begin), out);
    begin = at;
  }
  bpe.encode(std::string_view(s).substr(begin), out);
}

}  // namespace

Status Tokenizer::Impl::encode_plain(std::string_view text, bool at_start,
                                     std::vector<int32_t>& out) const {
  std::vector<std::string_view> pieces{text};
  std::vector<std::string_view> next;
  for (const SplitStep& s : splits) {
    next.clear();
    for (std::string_view p : pieces) FERRY_RETURN_IF_ERROR(apply_split(s, p, next));
    pieces.swap(next);
  }
  if (!byte_level) {
    // The first piece starts the text only if no Split step dropped what came before it.
    bool first = at_start && !pieces.empty() && pieces.front().data() == text.data();
    for (std::string_view p : pieces) {
      if (metaspace) {
        encode_metaspace(*metaspace, *bpe, p, first, out);
      } else {
        bpe->encode(p, out);
      }
      first = false;
    }
    return Status();
  }
  std::string prefixed;
  for (std::string_view p : pieces) {
    // ByteLevel's add_prefix_space gives every piece that lacks one a leading space.
    if (p.empty()) continue;
    if (prefix_space && p.front() != ' ') {
      prefixed.resize(p.size() + 1);
      prefixed[0] = ' ';
      p.copy(prefixed.data() + 1, p.size());
      p = prefixed;
    }
    if (!byte_level_regex) {
      bpe->encode(p, out);
      continue;
    }
    FERRY_ASSIGN_OR_RETURN(std::vector<tok::Span> found, byte_level_regex->find_all(p));
    size_t prev = 0;
    for (const tok::Span& m : found) {
      if (m.begin > prev) bpe->encode(p.substr(prev, m.begin - prev), out);
      bpe->encode(p.substr(m.begin, m.end - m.begin), out);
      prev = m.end;
    }
    if (prev < p.size()) bpe->encode(p.substr(prev), out);
  }
  return Status();
}

Result<std::vector<int32_t>> Tokenizer::encode(std::string_view text, bool add_special) const {
  if (text.size() > kMaxTextBytes) {
    return make_error(
        ErrorCode::invalid_argument,
        "tokenize: text of " + std::to_string(text.size()) + " bytes (at most 1 GiB)");
  }
  if (auto bad = strict_json::find_invalid_utf8(text)) {
    return make_error(ErrorCode::invalid_argument,
                      "tokenize: text is not valid UTF-8 at byte " + std::to_string(*bad));
  }
  const Impl& t = *impl_;
  std::vector<int32_t> ids;
  std::vector<tok::Segment> raw;
  t.raw_matcher.split(text, raw);
  std::vector<tok::Segment> normalized;
  for (size_t i = 0; i < raw.size(); ++i) {
    tok::Segment& seg = raw[i];
    if (seg.id >= 0) {
      ids.push_back(seg.id);
      continue;
    }
    // Unicode forms leave ASCII as it is; Prepend and Replace do not.
    if (!t.normalizer.empty() && !(t.normalizer.unicode_only() && is_ascii(seg.text))) {
      FERRY_ASSIGN_OR_RETURN(seg.text, t.normalizer.apply(seg.text));
    }
    normalized.clear();
    t.normalized_matcher.split(seg.text, normalized);
    for (size_t j = 0; j < normalized.size(); ++j) {
      const tok::Segment& n = normalized[j];
      if (n.id >= 0) {
        ids.push_back(n.id);
      } else {
        // Empty stretches are left out of both splits: the first pieces start the text.
        FERRY_RETURN_IF_ERROR(t.encode_plain(n.text, i == 0 && j == 0, ids));
      }
    }
  }
  if (!add_special || !t.has_template) return ids;
  std::vector<int32_t> wrapped;
  wrapped.reserve(ids.size() + 4);
  for (const TemplateItem& item : t.single_template) {
    if (item.sequence) {
      wrapped.insert(wrapped.end(), ids.begin(), ids.end());
    } else {
      wrapped.insert(wrapped.end(), item.ids.begin(), item.ids.end());
    }
  }
  return wrapped;
}

std::vector<int32_t> Tokenizer::template_prefix() const {
  std::vector<int32_t> out;
  for (const TemplateItem& item : impl_->single_template) {
    if (item.sequence) break;
    out.insert(out.end(), item.ids.begin(), item.ids.end());
  }
  return out;
}

Result<std::string_view> Tokenizer::token_bytes(int32_t id) const {
  const Impl& t = *impl_;
  if (id < 0 || static_cast<size_t>(id) >= t.known.size() || !t.known[static_cast<size_t>(id)]) {
    return make_error(ErrorCode::invalid_argument, "token id " + std::to_string(id) +
                                                       " is not in the vocabulary (" +
                                                       std::to_string(t.known.size()) + " ids)");
  }
  return std::string_view(t.decoded[static_cast<size_t>(id)]);
}

Result<std::string> Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  if (impl_->decoder.kind != DecoderSpec::Kind::byte_level) {
    // SentencePiece: the stream's pieces are the decode (one code path for both).
    StreamDecoder stream(*this, skip_special);
    std::string text;
    for (int32_t id : ids) {
      FERRY_ASSIGN_OR_RETURN(std::string piece, stream.push(id));
      text += piece;
    }
    return text + stream.finish();
  }
  std::string bytes;
  for (int32_t id : ids) {
    FERRY_ASSIGN_OR_RETURN(std::string_view b, token_bytes(id));
    if (!(skip_special && is_special(id))) bytes.append(b);
  }
  std::string text;
  text.reserve(bytes.size());
  tok::append_utf8_lossy(bytes, /*hold_tail=*/false, text);
  return text;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  auto it = impl_->text_to_id.find(std::string(token));
  if (it == impl_->text_to_id.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string_view> Tokenizer::id_to_token(int32_t id) const {
  const Impl& t = *impl_;
  if (id < 0 || static_cast<size_t>(id) >= t.known.size() || !t.known[static_cast<size_t>(id)])
    return std::nullopt;
  return std::string_view(t.token_text[static_cast<size_t>(id)]);
}

int64_t Tokenizer::vocab_size() const {
  return static_cast<int64_t>(impl_->known.size());
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < impl_->special.size() &&
         impl_->special[static_cast<size_t>(id)] != 0;
}

namespace {

// ByteFallback's rule for a run of byte tokens: its bytes if they are UTF-8, else one U+FFFD
// per byte (not per broken sequence, as tokenizers' ByteFallback decoder does).
void flush_byte_run(std::string& run, std::string& out) {
  if (run.empty()) return;
  if (!strict_json::find_invalid_utf8(run)) {
    out += run;
  } else {
    for (size_t i = 0; i < run.size(); ++i) out += "\xEF\xBF\xBD";
  }
  run.clear();
}

}  // namespace

Result<std::string> StreamDecoder::push(int32_t id) {
  FERRY_ASSIGN_OR_RETURN(std::string_view b, tokenizer_->token_bytes(id));
  if (skip_special_ && tokenizer_->is_special(id)) return std::string();
  const Tokenizer::Impl& t = *tokenizer_->impl_;
  if (t.decoder.kind == DecoderSpec::Kind::byte_level) {
    pending_.append(b);
    std::string text;
    const size_t used = tok::append_utf8_lossy(pending_, /*hold_tail=*/true, text);
    pending_.erase(0, used);
    return text;
  }
  const auto i = static_cast<size_t>(id);
  const bool first = pushed_++ == 0;
  if (t.byte_token[i] >= 0) {
    pending_.push_back(static_cast<char>(t.byte_token[i]));
    return std::string();
  }
  std::string text;
  flush_byte_run(pending_, text);
  if (t.decoder.kind == DecoderSpec::Kind::metaspace && first && t.decoder.drop_first) {
    // The Metaspace decoder drops the replacement characters of the first token.
    const std::string& raw = t.token_text[i];
    const std::string& rep = t.decoder.replace_from;
    for (size_t p = 0; p < raw.size();) {
      if (raw.compare(p, rep.size(), rep) == 0) {
        p += rep.size();
      } else {
        text += raw[p++];
      }
    }
  } else {
    text.append(b);
  }
  return strip(std::move(text));
}

std::string StreamDecoder::strip(std::string text) {
  const DecoderSpec& d = tokenizer_->impl_->decoder;
  size_t cut = 0;
  while (!started_ && cut < text.size()) {
    if (stripped_ < d.strip_left && text[cut] == d.strip_char) {
      ++stripped_;
      ++cut;
    } else {
      started_ = true;
    }
  }
  text.erase(0, cut);
  return text;
}

std::string StreamDecoder::finish() {
  std::string text;
  if (tokenizer_->impl_->decoder.kind != DecoderSpec::Kind::byte_level) {
    flush_byte_run(pending_, text);
    return strip(std::move(text));
  }
  tok::append_utf8_lossy(pending_, /*hold_tail=*/false, text);
  pending_.clear();
  return text;
}

}  // namespace ferry
