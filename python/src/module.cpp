// ferry._ferry: the compiled half of the `ferry` package (python/ferry/__init__.py is the other).
#include <pybind11/pybind11.h>

#include "binding.h"
#if defined(FERRY_HAVE_CUDA)
#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#endif

namespace ferry::python {

namespace {
PyObject* g_error = nullptr;  // ferry.Error, owned by the module
}  // namespace

void raise(const Error& error) {
  const std::string message = error.to_string();
  PyObject* type = g_error != nullptr ? g_error : PyExc_RuntimeError;
  if (error.code == ErrorCode::invalid_argument) type = PyExc_ValueError;
  if (error.code == ErrorCode::io) type = PyExc_OSError;
  PyErr_SetString(type, message.c_str());
  throw py::error_already_set();
}

void add_errors(py::module_& m) {
  // A raw reference kept for the process (a static py::object would be released after the
  // interpreter is gone).
  g_error = PyErr_NewException("ferry.Error", PyExc_RuntimeError, nullptr);
  if (g_error == nullptr) throw py::error_already_set();
  m.attr("Error") = py::handle(g_error);
}

}  // namespace ferry::python

PYBIND11_MODULE(_ferry, m) {
  m.doc() = "ferry: run models larger than GPU memory, on a VRAM budget, bit-exact";
#if defined(FERRY_HAVE_CUDA)
  ferry::register_backend(ferry::BackendKind::cuda, ferry::cuda_backend_factory());
  m.attr("cuda") = true;
#else
  m.attr("cuda") = false;
#endif
  ferry::python::add_errors(m);
  ferry::python::add_tensors(m);
  ferry::python::add_model(m);
}
