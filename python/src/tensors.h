// The tensor handles ferry.Checkpoint and ferry.Model give out: each holds the checkpoint, so
// the mapping outlives every handle and every export.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <string>

#include "format/safetensors.h"

namespace ferry::python {

namespace py = pybind11;

struct TensorRef {
  std::shared_ptr<const Checkpoint> checkpoint;
  const Checkpoint::Entry* entry = nullptr;

  py::tuple shape() const;
  uintptr_t data_ptr() const;
  py::object dlpack(const py::object& stream, const py::object& max_version,
                    const py::object& dl_device, const py::object& copy) const;
};

struct CheckpointRef {
  std::shared_ptr<const Checkpoint> checkpoint;
};

// KeyError when the checkpoint has no such tensor.
TensorRef tensor_of(const std::shared_ptr<const Checkpoint>& checkpoint, const std::string& name);
py::list tensor_names(const Checkpoint& checkpoint);

}  // namespace ferry::python
