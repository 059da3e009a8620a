// Unicode normalization (utf8proc) for the tokenizer's normalizer step.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace ferry::tok {

enum class NormalForm { nfc, nfd, nfkc, nfkd };

// `text` (valid UTF-8) in the given form.
Result<std::string> normalize(std::string_view text, NormalForm form);

// Applies each form in turn (an empty list leaves the text as it is).
Result<std::string> normalize_all(std::string_view text, const std::vector<NormalForm>& forms);

}  // namespace ferry::tok
