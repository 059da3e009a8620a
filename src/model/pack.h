// `ferry pack IN OUT`: a one-time relayout of a checkpoint so that every weight group is one
// range of the file, laid out exactly as in memory, and page-aligned: one group is one transfer
// (the host tier merges its tensors into one copy), and a direct read of a group needs no bounce.
//
// The file stays a safetensors file that any reader takes (the official package included):
//   - groups in execution order (ModelWeights order); each group starts at a multiple of
//     kPackGroupAlignment from the file's start, its tensors at the group's 256-byte layout
//     offsets (WeightGroup), so the file range of a group is its slot image;
//   - a safetensors file has no holes between tensors, so gaps (the alignment padding) are
//     filled by 1-D U8 tensors of zeros named "ferry.pad.N" (model/weights.h: binding ignores
//     them);
//   - a tensor appears once: a tied LM head reads the embedding's tensor where the embedding put
//     it, and an LM head split into row chunks (text.head.K) is one tensor whose chunks follow
//     each other (chunk K starts page-aligned when the chunk's bytes are a multiple of 4 KiB,
//     which a bf16 hidden size that is a multiple of 2048 gives);
//   - tensors no group names (tolerated buffers) follow the groups, in checkpoint order.
// The header is padded with spaces so that the data starts at a page boundary.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "format/atomic_write.h"
#include "model/weights.h"

namespace ferry {

inline constexpr uint64_t kPackGroupAlignment = 4096;

// One entry of the packed file's data, in file order; entries are contiguous from offset 0.
struct PackEntry {
  std::string name;      // the checkpoint tensor, or "ferry.pad.N"
  bool padding = false;  // zeros, U8 [bytes]
  uint64_t begin = 0;    // from the first data byte
  uint64_t bytes = 0;
};

struct PackLayout {
  std::vector<PackEntry> entries;
  uint64_t data_bytes = 0;
  // Groups whose file range is not their layout (a tied tensor placed by another group, or an
  // order the layout could not keep): each takes more than one copy.
  std::vector<std::string> split_groups;
};

// The layout of `tensors` (every checkpoint tensor, name and byte size, in checkpoint order) for
// `weights`. Pure: no file is touched. Errors: a group names a tensor that is not there, or a
// row range past a tensor's end.
Result<PackLayout> pack_layout(const ModelWeights& weights, const std::vector<TensorMeta>& tensors,
                               const std::vector<uint64_t>& tensor_bytes);

struct PackOptions {
  bool force = false;  // replace an OUT that holds a checkpoint already
};

struct PackReport {
  PackLayout layout;
  uint64_t file_bytes = 0;
  uint64_t padding_bytes = 0;
  size_t other_files = 0;  // config.json, tokenizer, ... copied beside the weights
  double seconds = 0.0;
};

// Reads the checkpoint folder `in` (config.json and its safetensors), writes the packed
// checkpoint folder `out`: model.safetensors and a copy of every other regular file of `in`.
// Atomic as a whole (format/atomic_write.h StagedFolder): until the end, `out` is untouched; an
// interrupted or failed pack leaves no folder there that holds a checkpoint.
Result<PackReport> pack_checkpoint(const std::string& in, const std::string& out,
                                   const PackOptions& options);

// Copies config.json, the tokenizer and every other regular, not hidden file of the folder `in`
// but its weights into `out`; how many. The writers of a checkpoint folder (pack, compress) share
// it, and the StagedFolder policy under which those copies supersede an old OUT's files.
Result<size_t> copy_other_files(const std::string& in, const std::string& out);
FolderPolicy checkpoint_copy_policy(const std::string& in, bool force);

}  // namespace ferry
