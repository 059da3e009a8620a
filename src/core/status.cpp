#include "core/status.h"

namespace ferry {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::invalid_argument:
      return "invalid argument";
    case ErrorCode::io:
      return "io";
    case ErrorCode::format:
      return "format";
    case ErrorCode::unsupported:
      return "unsupported";
    case ErrorCode::out_of_memory:
      return "out of memory";
    case ErrorCode::backend:
      return "backend";
    case ErrorCode::internal:
      return "internal";
    case ErrorCode::interrupted:
      return "interrupted";
    case ErrorCode::damaged:
      return "damaged";
  }
  return "unknown";
}

std::string Error::to_string() const {
  // Its message already starts "interrupted by SIGINT".
  if (code == ErrorCode::interrupted) return message;
  return std::string(error_code_name(code)) + ": " + message;
}

void check_failed(const char* file, int line, const char* cond, const std::string& msg) {
  std::fprintf(stderr, "ferry: internal check failed at %s:%d: %s (%s)\n", file, line, cond,
               msg.c_str());
  std::abort();
}

}  // namespace ferry
