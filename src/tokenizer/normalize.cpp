#include "tokenizer/normalize.h"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>

namespace ferry::tok {

Result<std::string> normalize(std::string_view text, NormalForm form) {
  int options = UTF8PROC_STABLE;
  switch (form) {
    case NormalForm::nfc:
      options |= UTF8PROC_COMPOSE;
      break;
    case NormalForm::nfd:
      options |= UTF8PROC_DECOMPOSE;
      break;
    case NormalForm::nfkc:
      options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
      break;
    case NormalForm::nfkd:
      options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
      break;
  }
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                          static_cast<utf8proc_ssize_t>(text.size()), &out,
                                          static_cast<utf8proc_option_t>(options));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(out, &std::free);
  if (n < 0) {
    return make_error(ErrorCode::invalid_argument,
                      std::string("normalizer: ") + utf8proc_errmsg(n));
  }
  return std::string(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
}

Result<std::string> normalize_all(std::string_view text, const std::vector<NormalForm>& forms) {
  std::string s(text);
  for (NormalForm f : forms) {
    FERRY_ASSIGN_OR_RETURN(s, normalize(s, f));
  }
  return s;
}

}  // namespace ferry::tok
