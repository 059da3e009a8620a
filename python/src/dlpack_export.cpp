#include "dlpack_export.h"

#include <atomic>
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dlpack_abi.h"
#include "format/fault_guard.h"

namespace ferry::dlpack {

namespace {

std::atomic<int64_t> g_live{0};

constexpr const char* kVersionedName = "dltensor_versioned";
constexpr const char* kLegacyName = "dltensor";

// What one export owns; freed by the deleter the consumer (or the capsule) calls.
struct Export {
  std::shared_ptr<const Checkpoint> keep;  // the mapping lives while the export does
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  std::vector<std::byte> copy;  // copy=True: the bytes, owned here
  DLManagedTensorVersioned versioned{};
  DLManagedTensor legacy{};

  Export() { ++g_live; }
  ~Export() { --g_live; }
  Export(const Export&) = delete;
  Export& operator=(const Export&) = delete;
};

void delete_versioned(DLManagedTensorVersioned* self) {
  delete static_cast<Export*>(self->manager_ctx);
}

void delete_legacy(DLManagedTensor* self) {
  delete static_cast<Export*>(self->manager_ctx);
}

// A capsule destroyed unconsumed still owns its tensor; a consumer renames the capsules it
// takes ("used_dltensor..."), and then the deleter is theirs to call.
template <class Managed>
void destroy_capsule(PyObject* capsule, const char* name) {
  if (!PyCapsule_IsValid(capsule, name)) return;  // consumed (renamed)
  PyObject *type = nullptr, *value = nullptr, *trace = nullptr;
  PyErr_Fetch(&type, &value, &trace);
  auto* m = static_cast<Managed*>(PyCapsule_GetPointer(capsule, name));
  if (m != nullptr && m->deleter != nullptr) m->deleter(m);
  PyErr_Restore(type, value, trace);
}

void destroy_versioned(PyObject* capsule) {
  destroy_capsule<DLManagedTensorVersioned>(capsule, kVersionedName);
}

void destroy_legacy(PyObject* capsule) {
  destroy_capsule<DLManagedTensor>(capsule, kLegacyName);
}

// DLPack's name for a safetensors dtype; fp8 needs DLPack 1.1.
std::optional<DLDataType> dl_type(DType t, bool fp8_known) {
  const auto bits = static_cast<uint8_t>(dtype_size(t) * 8);
  switch (t) {
    case DType::bool_:
      return DLDataType{kDLBool, 8, 1};
    case DType::u8:
    case DType::u16:
    case DType::u32:
    case DType::u64:
      return DLDataType{kDLUInt, bits, 1};
    case DType::i8:
    case DType::i16:
    case DType::i32:
    case DType::i64:
      return DLDataType{kDLInt, bits, 1};
    case DType::f16:
    case DType::f32:
    case DType::f64:
      return DLDataType{kDLFloat, bits, 1};
    case DType::bf16:
      return DLDataType{kDLBfloat, 16, 1};
    case DType::f8_e4m3:
      if (fp8_known) return DLDataType{kDLFloat8_e4m3fn, 8, 1};
      return std::nullopt;
    case DType::f8_e5m2:
      if (fp8_known) return DLDataType{kDLFloat8_e5m2, 8, 1};
      return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace

Result<PyObject*> export_tensor(const std::shared_ptr<const Checkpoint>& checkpoint,
                                const Checkpoint::Entry& entry, const ExportRequest& request) {
  const TensorInfo& info = *entry.info;
  const bool fp8_known = request.versioned && request.minor >= 1;
  const std::optional<DLDataType> type = dl_type(info.dtype, fp8_known);
  if (!type) {
    return make_error(ErrorCode::unsupported,
                      info.name + ": DLPack " + (request.versioned ? "1.0" : "before 1.0") +
                          " has no code for " + std::string(dtype_name(info.dtype)) +
                          " (fp8 needs a consumer of DLPack 1.1)");
  }
  auto e = std::make_unique<Export>();
  e->keep = checkpoint;
  e->shape = info.shape;
  e->strides.assign(info.shape.size(), 1);
  for (size_t i = info.shape.size(); i-- > 1;) e->strides[i - 1] = e->strides[i] * info.shape[i];
  const std::span<const std::byte> bytes = checkpoint->data(entry);
  void* data = const_cast<std::byte*>(bytes.data());  // read-only: the flag says so
  if (request.copy) {
    e->copy.resize(bytes.size());
    if (!bytes.empty()) {
      FERRY_RETURN_IF_ERROR(
          guarded_copy(e->copy.data(), bytes.data(), bytes.size(), checkpoint->mapping(entry)));
    }
    data = e->copy.data();
  }
  DLTensor t{};
  t.data = data;
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = static_cast<int32_t>(e->shape.size());
  t.dtype = *type;
  t.shape = e->shape.data();
  t.strides = e->strides.data();
  t.byte_offset = 0;
  PyObject* capsule = nullptr;
  if (request.versioned) {
    DLManagedTensorVersioned& m = e->versioned;
    m.version = DLPackVersion{1, request.minor >= 1 ? 1u : 0u};
    m.manager_ctx = e.get();
    m.deleter = delete_versioned;
    m.flags = request.copy ? DLPACK_FLAG_BITMASK_IS_COPIED : DLPACK_FLAG_BITMASK_READ_ONLY;
    m.dl_tensor = t;
    capsule = PyCapsule_New(&m, kVersionedName, destroy_versioned);
  } else {
    DLManagedTensor& m = e->legacy;
    m.dl_tensor = t;
    m.manager_ctx = e.get();
    m.deleter = delete_legacy;
    capsule = PyCapsule_New(&m, kLegacyName, destroy_legacy);
  }
  if (capsule == nullptr) {
    PyErr_Clear();
    return make_error(ErrorCode::out_of_memory, "DLPack: cannot create the capsule");
  }
  e.release();  // the capsule, then its consumer, owns it
  return capsule;
}

int64_t live_exports() {
  return g_live.load();
}

}  // namespace ferry::dlpack
