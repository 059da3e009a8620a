// `ferry verify`: every tensor of a checkpoint scanned for NaN and Inf, by several threads, at
// the speed of memory (the page cache), every read under the SIGBUS guard.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/finite.h"
#include "core/status.h"
#include "format/safetensors.h"

namespace ferry {

struct DamagedTensor {
  std::string name;
  std::string file;  // path of the shard that holds it
  DType dtype = DType::bf16;
  NonFiniteCount count;
};

struct NonFiniteScan {
  uint64_t tensors = 0;
  uint64_t bytes = 0;          // of every tensor
  uint64_t scanned_bytes = 0;  // of floating tensors (integers cannot be non-finite)
  unsigned threads = 0;
  double seconds = 0.0;
  std::vector<DamagedTensor> damaged;  // in checkpoint order
};

// `threads` 0: the hardware's. A file that changes during the scan is an io error naming it.
Result<NonFiniteScan> scan_nonfinite(const Checkpoint& checkpoint, unsigned threads = 0);

// "tensor X (shard f): 3 NaN, 1 Inf, first at element 17".
std::string describe_damage(const DamagedTensor& d);

}  // namespace ferry
