// What the parts of the ferry._ferry module share: ferry's errors as Python exceptions, and the
// functions that add each part's classes.
#pragma once

#include <pybind11/pybind11.h>

#include <utility>

#include "core/status.h"

namespace ferry::python {

namespace py = pybind11;

// Raises `error` as a Python exception with its one-line message: invalid_argument as
// ValueError, io as OSError, the rest as ferry.Error (a RuntimeError).
[[noreturn]] void raise(const Error& error);

inline void check(const Status& s) {
  if (!s.ok()) raise(s.error());
}
template <class T>
T check(Result<T> r) {
  if (!r.ok()) raise(r.error());
  return std::move(r).value();
}

void add_errors(py::module_& m);
void add_tensors(py::module_& m);
void add_model(py::module_& m);

}  // namespace ferry::python
