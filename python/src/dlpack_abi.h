// The DLPack ABI (data-apis DLPack, v1.1 layout), written out here because no packaged header
// is new enough: Debian's libdlpack-dev is 0.6, which lacks DLManagedTensorVersioned and the
// flags, and PyPI has no package that ships the header alone. The structs and values below
// follow the spec's dlpack.h field for field; a consumer reads them by layout, so nothing may
// be reordered or resized (the static_asserts pin the x86-64 / aarch64 layout).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ferry::dlpack {

struct DLPackVersion {
  uint32_t major;
  uint32_t minor;
};

// DLDeviceType (a C enum: int-sized).
inline constexpr int32_t kDLCPU = 1;

struct DLDevice {
  int32_t device_type;
  int32_t device_id;
};

// DLDataTypeCode.
inline constexpr uint8_t kDLInt = 0;
inline constexpr uint8_t kDLUInt = 1;
inline constexpr uint8_t kDLFloat = 2;
inline constexpr uint8_t kDLBfloat = 4;
inline constexpr uint8_t kDLBool = 6;
inline constexpr uint8_t kDLFloat8_e4m3fn = 10;  // DLPack 1.1
inline constexpr uint8_t kDLFloat8_e5m2 = 12;    // DLPack 1.1

struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};

struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements
  uint64_t byte_offset;
};

struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

inline constexpr uint64_t DLPACK_FLAG_BITMASK_READ_ONLY = uint64_t{1} << 0;
inline constexpr uint64_t DLPACK_FLAG_BITMASK_IS_COPIED = uint64_t{1} << 1;

struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
};

static_assert(sizeof(DLDataType) == 4);
static_assert(sizeof(DLDevice) == 8);
static_assert(offsetof(DLTensor, ndim) == 16 && offsetof(DLTensor, dtype) == 20);
static_assert(offsetof(DLTensor, shape) == 24 && sizeof(DLTensor) == 48);
static_assert(sizeof(DLManagedTensor) == 64);
static_assert(offsetof(DLManagedTensorVersioned, flags) == 24);
static_assert(offsetof(DLManagedTensorVersioned, dl_tensor) == 32);
static_assert(sizeof(DLManagedTensorVersioned) == 80);

}  // namespace ferry::dlpack
