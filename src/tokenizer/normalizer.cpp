#include "tokenizer/normalizer.h"

namespace ferry::tok {

bool Normalizer::unicode_only() const {
  for (const NormalizerStep& s : steps_) {
    if (s.kind != NormalizerStep::Kind::form) return false;
  }
  return true;
}

Result<std::string> replace_all(std::string_view text, const Regex& pattern,
                                std::string_view with) {
  FERRY_ASSIGN_OR_RETURN(std::vector<Span> found, pattern.find_all(text));
  if (found.empty()) return std::string(text);
  std::string out;
  out.reserve(text.size() + found.size() * with.size());
  size_t prev = 0;
  for (const Span& m : found) {
    out.append(text.substr(prev, m.begin - prev));
    out.append(with);
    prev = m.end;
  }
  out.append(text.substr(prev));
  return out;
}

Result<std::string> Normalizer::apply(std::string_view text) const {
  std::string s(text);
  for (const NormalizerStep& step : steps_) {
    switch (step.kind) {
      case NormalizerStep::Kind::form: {
        FERRY_ASSIGN_OR_RETURN(s, normalize(s, step.form));
        break;
      }
      case NormalizerStep::Kind::prepend:
        if (!s.empty()) s.insert(0, step.text);
        break;
      case NormalizerStep::Kind::replace: {
        FERRY_ASSIGN_OR_RETURN(s, replace_all(s, *step.pattern, step.text));
        break;
      }
    }
  }
  return s;
}

}  // namespace ferry::tok
