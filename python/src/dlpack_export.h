// Read-only DLPack export of checkpoint tensors (the Ingestion Tax paper, §DLPack): a capsule
// whose data pointer is the tensor's address in the checkpoint's read-only mapping, so that
// numpy.from_dlpack / torch.from_dlpack adopt it without a copy.
//
// Versioned capsules ("dltensor_versioned", DLManagedTensorVersioned) carry
// DLPACK_FLAG_BITMASK_READ_ONLY; legacy ones ("dltensor", DLManagedTensor) cannot say so, and a
// consumer that writes through one faults on the read-only pages. Each export holds a
// shared_ptr to the checkpoint: the mapping lives until the consumer calls the deleter, or,
// for a capsule never consumed, until the capsule is destroyed.
#pragma once

#include <Python.h>

#include <cstdint>
#include <memory>

#include "core/status.h"
#include "format/safetensors.h"

namespace ferry::dlpack {

struct ExportRequest {
  bool versioned = true;  // max_version >= (1, 0)
  uint32_t minor = 1;     // the consumer's highest minor version of 1.x
  bool copy = false;      // copy=True: an owned, writable copy (flag IS_COPIED)
};

// A new capsule (a new reference) for `entry` of `checkpoint`; errors: a dtype DLPack cannot
// name for this version, a copy that found the file changed.
Result<PyObject*> export_tensor(const std::shared_ptr<const Checkpoint>& checkpoint,
                                const Checkpoint::Entry& entry, const ExportRequest& request);

// Exports whose deleter has not run yet (consumed or not): for leak tests.
int64_t live_exports();

}  // namespace ferry::dlpack
