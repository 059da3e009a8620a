// Errors as values. Three tiers (see docs/architecture.md):
//   1. FERRY_CUDA_CHECK (backend/cuda) names the failing CUDA statement;
//   2. FERRY_CHECK: invariants of our own code, on in every build, abort with file:line;
//   3. Status / Result<T>: anything a user, a file or the machine can cause. Library code
//      returns these and never exits or asserts on user input.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace ferry {

enum class ErrorCode {
  invalid_argument,  // bad user input (flags, workload)
  io,                // open/read/write/mmap failed
  format,            // a checkpoint or config is malformed
  unsupported,       // well-formed but not something ferry runs
  out_of_memory,     // a budget or allocation cannot be met
  backend,           // a device runtime error
  internal,          // a broken invariant reported as a value
  interrupted,       // SIGINT/SIGTERM/SIGHUP stopped the work (core/interrupt.h)
  damaged,           // non-finite values where the weights should give finite ones
};

const char* error_code_name(ErrorCode code);

struct Error {
  ErrorCode code = ErrorCode::internal;
  std::string message;

  // "format: model.safetensors: tensor x: expected ..., got ..."
  std::string to_string() const;
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error e) : error_(std::move(e)) {}  // NOLINT(implicit): lets `return Error{...}` work
  static Status ok_status() { return Status(); }

  bool ok() const { return !error_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Error& error() const { return *error_; }

 private:
  std::optional<Error> error_;
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(implicit)
  Result(Error e) : v_(std::move(e)) {}      // NOLINT(implicit)

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  const Error& error() const { return std::get<Error>(v_); }
  Status status() const { return ok() ? Status() : Status(error()); }

  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Error> v_;
};

inline Error make_error(ErrorCode code, std::string message) {
  return Error{code, std::move(message)};
}

[[noreturn]] void check_failed(const char* file, int line, const char* cond,
                               const std::string& msg);

}  // namespace ferry

// Propagate an error from a Status- or Result-returning expression.
#define FERRY_CONCAT_INNER(a, b) a##b
#define FERRY_CONCAT(a, b) FERRY_CONCAT_INNER(a, b)
#define FERRY_RETURN_IF_ERROR(expr)                        \
  do {                                                     \
    auto&& ferry_status_ = (expr);                         \
    if (!ferry_status_.ok()) return ferry_status_.error(); \
  } while (0)
// FERRY_ASSIGN_OR_RETURN(auto x, make_x()); declares x from a Result or returns its error.
#define FERRY_ASSIGN_OR_RETURN(decl, expr) \
  FERRY_ASSIGN_OR_RETURN_IMPL(FERRY_CONCAT(ferry_result_, __LINE__), decl, expr)
#define FERRY_ASSIGN_OR_RETURN_IMPL(tmp, decl, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.error();                 \
  decl = std::move(tmp).value()

// Invariants of ferry's own code (never user input); stays on in release builds.
#define FERRY_CHECK(cond, msg)                                            \
  do {                                                                    \
    if (!(cond)) ::ferry::check_failed(__FILE__, __LINE__, #cond, (msg)); \
  } while (0)
