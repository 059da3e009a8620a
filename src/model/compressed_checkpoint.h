// The compressed checkpoint (`ferry pack IN OUT --compress`, docs/compression.md "Compressed
// checkpoint"): one safetensors file that generic tools still read, holding
//   - one U8 tensor per weight group, `ferry.z.<group name>`: the group's layout (model/weights.h)
//     encoded by compress/group_codec.h, in ModelWeights order, each at a 4096-byte boundary of
//     the file (zeros between them: U8 tensors `ferry.zpad.N`);
//   - the checkpoint tensors no group holds (ignored buffers), stored raw under their own names;
//   - in `__metadata__`: the container and codec names and versions, the group list, and the
//     source checkpoint's tensor table (name, dtype, shape, and the pieces of each tensor in the
//     groups' decoded layouts) so that `--decompress` gives every tensor back byte for byte;
// and config.json with the other files of the source folder copied beside it.
//
// Everything read from a container is hostile input: parse_container checks every name, length,
// offset and piece against the others and against the file before anything is decoded, and
// each error is one line naming the group or tensor that is wrong.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "format/safetensors.h"
#include "model/weights.h"

namespace ferry {

class ThreadPool;

inline constexpr std::string_view kContainerKey = "ferry.container";
inline constexpr std::string_view kContainerName = "ferry-compressed-checkpoint";
inline constexpr std::string_view kContainerVersionKey = "ferry.container_version";
inline constexpr int kContainerVersion = 1;
inline constexpr std::string_view kCodecKey = "ferry.codec";
inline constexpr std::string_view kCodecName = "ferry-bf16-exponent-rans";
inline constexpr std::string_view kCodecVersionKey = "ferry.codec_version";
inline constexpr std::string_view kTableKey = "ferry.table";
inline constexpr std::string_view kSourceMetadataKey = "ferry.source_metadata";
inline constexpr std::string_view kGroupTensorPrefix = "ferry.z.";
// Zeros before a group tensor so that every group starts at a multiple of
// kContainerGroupAlignment from the file's start (U8 [n]; a safetensors file has no holes).
inline constexpr std::string_view kContainerPadPrefix = "ferry.zpad.";
inline constexpr uint64_t kContainerGroupAlignment = 4096;

// One weight group of the container: its U8 tensor and the size it decodes to.
struct ContainerGroup {
  std::string name;    // "text.layers.3.attn"
  std::string module;  // group_module_name of its kind at pack time: "vision", "text", ...
  uint64_t decoded_bytes = 0;
  // Filled by parse_container from the file: where the tensor `ferry.z.<name>` lies.
  const TensorInfo* info = nullptr;
  std::string tensor_name() const { return std::string(kGroupTensorPrefix) + name; }
};

// A byte range of a source tensor, found in a group's decoded layout.
struct TensorPiece {
  uint32_t group = 0;   // index into ContainerTable::groups
  uint64_t offset = 0;  // in the group's decoded layout
  uint64_t source = 0;  // in the tensor's bytes
  uint64_t bytes = 0;
};

// One tensor of the source checkpoint: either in the groups (pieces tile [0, bytes) in order) or
// stored raw in the container under its own name.
struct ContainerTensor {
  std::string name;
  DType dtype = DType::bf16;
  std::vector<int64_t> shape;
  uint64_t bytes = 0;
  bool stored = false;
  std::vector<TensorPiece> pieces;
  const TensorInfo* info = nullptr;  // stored: its place in the file
};

struct ContainerTable {
  std::vector<ContainerGroup> groups;
  std::vector<ContainerTensor> tensors;  // in the source checkpoint's order
  std::map<std::string, std::string> source_metadata;
};

// Whether a safetensors header is a compressed checkpoint's (it names the container).
bool is_compressed_container(const SafetensorsHeader& header);
// The same for a checkpoint (its first file).
bool is_compressed_checkpoint(const Checkpoint& checkpoint);

// The table of a container, checked against its header (`label` names the file in errors):
// names, versions, every group tensor present as U8 [n] with n at least a group header, every
// stored tensor present with its dtype and shape, every piece inside its group, the pieces of a
// tensor tiling it, no two tensors' pieces overlapping in a group, no tensor of the file that the
// table does not name. The group bytes themselves are checked by check_group_bytes.
Result<ContainerTable> parse_container(const SafetensorsHeader& header, std::string_view label);

// Group g's compressed bytes parse (compress::read_group_layout) and decode to its size: a
// `format` error naming the group and its tensor otherwise.
Status check_group_bytes(const ContainerTable& table, size_t g,
                         std::span<const uint8_t> compressed);

// "group text.layers.0.attn (tensor ferry.z.text.layers.0.attn, holding a, b and 3 more)": how
// errors name a group.
std::string describe_container_group(const ContainerTable& table, size_t g);

// The table's tensors as binding sees them: what bind_tensors checks against a model.
std::vector<TensorMeta> container_tensor_metas(const ContainerTable& table);

// The table of the groups of `weights` over a checkpoint of `tensors` (name, dtype, shape, byte
// size, in checkpoint order): each tensor's pieces from the first groups that hold its bytes,
// a tensor no group holds stored. Errors: a group names a tensor that is missing, or one too
// short for its rows.
Result<ContainerTable> make_container_table(const ModelWeights& weights,
                                            const std::vector<TensorMeta>& tensors,
                                            const std::vector<uint64_t>& tensor_bytes);

// The metadata a container carries for `table` (the keys above).
std::map<std::string, std::string> container_metadata(const ContainerTable& table);

// --- writing and reading back (model/compressed_pack.cpp) ---

struct CompressOptions {
  bool force = false;  // replace an OUT that holds a checkpoint already
  int threads = 0;     // encoder threads (<= 0: every core)
  // Called before each group is encoded and once at the end (done == total).
  std::function<void(size_t done, size_t total)> progress;
};

struct GroupRatio {
  std::string name;
  std::string module;
  uint64_t decoded_bytes = 0;
  uint64_t compressed_bytes = 0;
  bool coded = false;  // false: stored whole (would not shrink below 0.95x)
};

struct CompressReport {
  uint64_t raw_bytes = 0;         // the source checkpoint's tensor bytes
  uint64_t compressed_bytes = 0;  // the container's tensor bytes (groups + stored tensors)
  uint64_t file_bytes = 0;
  std::vector<GroupRatio> groups;
  size_t stored_tensors = 0;
  size_t other_files = 0;
  double seconds = 0.0;
};

// Reads the checkpoint folder `in`, writes the compressed checkpoint folder `out`
// (model.safetensors and a copy of every other regular file of `in`), atomically as a whole
// like pack_checkpoint. The container is read back and every group decoded and compared with
// its source before the folder is committed.
Result<CompressReport> compress_checkpoint(const std::string& in, const std::string& out,
                                           const CompressOptions& options);

struct DecompressReport {
  uint64_t compressed_bytes = 0;
  uint64_t raw_bytes = 0;
  uint64_t file_bytes = 0;
  size_t tensors = 0;
  size_t other_files = 0;
  double seconds = 0.0;
};

// The container folder `in` back to a plain checkpoint folder `out`: every source tensor with its
// name, dtype, shape and bytes, and the source's metadata, in one model.safetensors (tensors in
// group order); every group's checksum checked as it is decoded. Atomic as a whole.
Result<DecompressReport> decompress_checkpoint(const std::string& in, const std::string& out,
                                               const CompressOptions& options);

// A compressed container opened and checked: the file, its table, and every group's bytes (spans
// into the mapping, each checked by check_group_bytes).
struct OpenContainer {
  SafetensorsFile file;
  ContainerTable table;
  std::vector<std::span<const uint8_t>> group_bytes;
};
// `path`: the container's folder or its .safetensors file. With `damaged`, a group whose bytes
// fail check_group_bytes is added there (its span left empty) instead of failing the open:
// `ferry verify` reports every damaged group.
Result<OpenContainer> open_container(const std::string& path,
                                     std::vector<Error>* damaged = nullptr);

// Decodes group g on the CPU into `out` (its decoded size), the checksum checked; the compressed
// bytes are copied out of the mapping under the fault guard first. Errors name the group.
Status decode_container_group(const OpenContainer& c, size_t g, std::span<uint8_t> out,
                              ThreadPool* pool = nullptr);

}  // namespace ferry
