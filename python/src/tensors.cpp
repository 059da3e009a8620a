// ferry.Checkpoint and ferry.Tensor: a checkpoint's tensors, exported through DLPack without a
// copy (dlpack_export.h).
#include <pybind11/stl.h>

#include <memory>
#include <string>

#include "binding.h"
#include "dlpack_abi.h"
#include "dlpack_export.h"
#include "tensors.h"

namespace ferry::python {

namespace {

// __dlpack__'s max_version: None (legacy), or (major, minor).
dlpack::ExportRequest parse_request(const py::object& stream, const py::object& max_version,
                                    const py::object& dl_device, const py::object& copy) {
  if (!stream.is_none()) {
    throw py::value_error("__dlpack__: stream must be None for a CPU tensor");
  }
  dlpack::ExportRequest r;
  r.versioned = false;
  if (!max_version.is_none()) {
    const auto v = max_version.cast<std::pair<int64_t, int64_t>>();
    if (v.first >= 1) {
      r.versioned = true;
      r.minor = v.first > 1 || v.second >= 1 ? 1 : 0;
    }
  }
  if (!dl_device.is_none()) {
    const auto d = dl_device.cast<std::pair<int64_t, int64_t>>();
    if (d.first != dlpack::kDLCPU || d.second != 0) {
      PyErr_SetString(PyExc_BufferError,
                      "__dlpack__: checkpoint tensors are in host memory (kDLCPU, 0); another "
                      "device needs a copy by the consumer");
      throw py::error_already_set();
    }
  }
  r.copy = !copy.is_none() && copy.cast<bool>();
  return r;
}

}  // namespace

py::tuple TensorRef::shape() const {
  py::tuple t(entry->info->shape.size());
  for (size_t i = 0; i < entry->info->shape.size(); ++i) t[i] = entry->info->shape[i];
  return t;
}

uintptr_t TensorRef::data_ptr() const {
  return reinterpret_cast<uintptr_t>(checkpoint->data(*entry).data());
}

py::object TensorRef::dlpack(const py::object& stream, const py::object& max_version,
                             const py::object& dl_device, const py::object& copy) const {
  const dlpack::ExportRequest request = parse_request(stream, max_version, dl_device, copy);
  Result<PyObject*> capsule = dlpack::export_tensor(checkpoint, *entry, request);
  if (!capsule.ok()) {
    if (capsule.error().code == ErrorCode::unsupported) {
      PyErr_SetString(PyExc_BufferError, capsule.error().to_string().c_str());
      throw py::error_already_set();
    }
    raise(capsule.error());
  }
  return py::reinterpret_steal<py::object>(*capsule);
}

TensorRef tensor_of(const std::shared_ptr<const Checkpoint>& checkpoint, const std::string& name) {
  const Checkpoint::Entry* e = checkpoint->find(name);
  if (e == nullptr) throw py::key_error("no tensor named '" + name + "' in " + checkpoint->dir());
  return TensorRef{checkpoint, e};
}

py::list tensor_names(const Checkpoint& checkpoint) {
  py::list names;
  for (const auto& e : checkpoint.entries()) names.append(e.info->name);
  return names;
}

void add_tensors(py::module_& m) {
  py::class_<TensorRef>(m, "Tensor",
                        "A tensor of a mapped checkpoint; __dlpack__ exports it read-only, "
                        "without a copy")
      .def_property_readonly("name", [](const TensorRef& t) { return t.entry->info->name; })
      .def_property_readonly(
          "dtype", [](const TensorRef& t) { return std::string(dtype_name(t.entry->info->dtype)); })
      .def_property_readonly("shape", &TensorRef::shape)
      .def_property_readonly("nbytes", [](const TensorRef& t) { return t.entry->info->bytes; })
      .def_property_readonly("data_ptr", &TensorRef::data_ptr,
                             "The tensor's address in the checkpoint's mapping")
      .def("__dlpack__", &TensorRef::dlpack, py::arg("stream") = py::none(),
           py::arg("max_version") = py::none(), py::arg("dl_device") = py::none(),
           py::arg("copy") = py::none())
      .def("__dlpack_device__", [](const TensorRef&) { return py::make_tuple(dlpack::kDLCPU, 0); })
      .def("__repr__", [](const TensorRef& t) {
        std::string shape;
        for (int64_t d : t.entry->info->shape)
          shape += (shape.empty() ? "" : ", ") + std::to_string(d);
        return "ferry.Tensor('" + t.entry->info->name + "', " +
               std::string(dtype_name(t.entry->info->dtype)) + ", [" + shape + "])";
      });

  py::class_<CheckpointRef>(m, "Checkpoint", "A checkpoint's safetensors files, mapped read-only")
      .def(py::init([](const std::string& path) {
             Result<Checkpoint> c = [&] {
               py::gil_scoped_release release;
               return Checkpoint::open(path);
             }();
             return CheckpointRef{std::make_shared<const Checkpoint>(check(std::move(c)))};
           }),
           py::arg("path"))
      .def(
          "tensor",
          [](const CheckpointRef& c, const std::string& name) {
            return tensor_of(c.checkpoint, name);
          },
          py::arg("name"))
      .def("names", [](const CheckpointRef& c) { return tensor_names(*c.checkpoint); })
      .def("__len__", [](const CheckpointRef& c) { return c.checkpoint->entries().size(); })
      .def("__contains__",
           [](const CheckpointRef& c, const std::string& name) {
             return c.checkpoint->find(name) != nullptr;
           })
      .def_property_readonly("path", [](const CheckpointRef& c) { return c.checkpoint->dir(); })
      .def_property_readonly("nbytes",
                             [](const CheckpointRef& c) { return c.checkpoint->total_bytes(); });

  m.def("_live_exports", &dlpack::live_exports,
        "DLPack exports whose deleter has not run yet (for leak tests)");
}

}  // namespace ferry::python
