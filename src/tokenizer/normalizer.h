// The normalizer step of a tokenizer.json: Unicode forms (utf8proc), Prepend and Replace (the
// SentencePiece layout of Llama-2's files: Prepend "▁", then every " " replaced by "▁"), alone
// or as a Sequence, applied in order.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/normalize.h"
#include "tokenizer/regex.h"

namespace ferry::tok {

struct NormalizerStep {
  enum class Kind { form, prepend, replace };
  Kind kind = Kind::form;
  NormalForm form = NormalForm::nfc;  // form
  std::string text;                   // prepend: what is put in front; replace: the replacement
  std::optional<Regex> pattern;       // replace: what is replaced (a literal or a regex)
};

class Normalizer {
 public:
  void add(NormalizerStep step) { steps_.push_back(std::move(step)); }
  bool empty() const { return steps_.empty(); }
  // Whether every step is a Unicode form (which leaves ASCII text as it is).
  bool unicode_only() const;

  // `text` (valid UTF-8) with every step applied. Prepend, as tokenizers', leaves empty text
  // empty.
  Result<std::string> apply(std::string_view text) const;

 private:
  std::vector<NormalizerStep> steps_;
};

// Every match of `pattern` in `text` replaced by `with`.
Result<std::string> replace_all(std::string_view text, const Regex& pattern, std::string_view with);

}  // namespace ferry::tok
