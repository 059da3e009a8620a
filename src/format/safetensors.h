// safetensors: parse and validate (from bytes, apart from mapping files), read shards, write.
//
// The parser is stricter than the reference implementation: see docs/formats.md for every rule
// and tests/corpus/ for one rejected file per rule. Errors name the file and the tensor.
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
#include "format/atomic_write.h"
#include "format/mapped_file.h"

namespace ferry {

struct TensorInfo {
  std::string name;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  uint64_t begin =
      0;  // byte offset from the start of the file (8 + header length + data_offsets[0])
  uint64_t bytes = 0;  // data_offsets[1] - data_offsets[0]

  int64_t numel() const;
};

struct SafetensorsHeader {
  std::vector<TensorInfo> tensors;  // sorted by `begin`
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;  // 8 + header length
};

// Validates the whole file image: header and that the file length matches the data exactly.
// `label` names the file in errors.
Result<SafetensorsHeader> parse_safetensors(std::span<const std::byte> file,
                                            std::string_view label);

// model.safetensors.index.json: {"metadata": {...}, "weight_map": {tensor: shard file name}}.
struct SafetensorsIndex {
  std::map<std::string, std::string> weight_map;  // tensor -> shard file name (validated)
  std::vector<std::string> shards;                // distinct shard names, sorted
  std::map<std::string, std::string> metadata;
};

// Parses and validates the index text (JSON, shard names confined: no '/', no '\\', no "..",
// not empty, ending in .safetensors). `label` names the file in errors.
Result<SafetensorsIndex> parse_safetensors_index(std::string_view json_text,
                                                 std::string_view label);

// One safetensors file, mapped and validated.
class SafetensorsFile {
 public:
  static Result<SafetensorsFile> open(const std::string& path);

  const SafetensorsHeader& header() const { return header_; }
  const std::string& path() const { return map_.path(); }
  const TensorInfo* find(std::string_view name) const;  // nullptr if absent
  std::span<const std::byte> data(const TensorInfo& t) const;
  std::span<const std::byte> file_bytes() const { return map_.bytes(); }
  const MappedFile& mapping() const { return map_; }

 private:
  MappedFile map_;
  SafetensorsHeader header_;
  std::map<std::string, size_t, std::less<>> by_name_;  // name -> index in header_.tensors
};

// A checkpoint: a folder holding model.safetensors, or model.safetensors.index.json and its
// shards, or a single .safetensors file. Shard names never leave the folder.
class Checkpoint {
 public:
  static Result<Checkpoint> open(const std::string& path);

  struct Entry {
    const TensorInfo* info = nullptr;
    size_t shard = 0;  // index into files()
  };

  const std::string& dir() const { return dir_; }
  const std::vector<SafetensorsFile>& files() const { return files_; }
  // All tensors, ordered by (shard, offset).
  const std::vector<Entry>& entries() const { return entries_; }
  const Entry* find(std::string_view name) const;
  // A tensor's bytes in the mapping: read them through format/fault_guard.h (guarded_copy with
  // mapping(e)), since the file may change under the mapping.
  std::span<const std::byte> data(const Entry& e) const;
  const MappedFile& mapping(const Entry& e) const;
  // MappedFile::check_unchanged of every file: an io error naming the first that changed.
  Status check_unchanged() const;
  uint64_t total_bytes() const;  // sum of tensor bytes

 private:
  std::string dir_;
  std::vector<SafetensorsFile> files_;
  std::vector<Entry> entries_;
  std::map<std::string, size_t, std::less<>> by_name_;
};

// Writing. Tensors are written in the order given; `fill` writes exactly the tensor's bytes into
// the span it is handed (so a 22 GB checkpoint never needs to sit in memory).
struct TensorToWrite {
  std::string name;
  DType dtype = DType::bf16;
  std::vector<int64_t> shape;
  std::function<void(std::span<std::byte>)> fill;
};

// Atomic (format/atomic_write.h): the file at `path` is the old one or the complete new one,
// whatever happens during the write; an interrupt stops the fill between tensors. The header is
// padded with spaces so that the data starts at a multiple of `data_alignment` (a power of two
// from 8 to 1 MiB: 8 as Hugging Face writes; 4096 for `ferry pack`'s page-aligned groups).
Status write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                         const std::map<std::string, std::string>& metadata = {},
                         uint64_t data_alignment = 8);

// Splits into shards of at most max_shard_bytes of tensor data (a tensor larger than that gets a
// shard of its own), named model-00001-of-0000N.safetensors, plus model.safetensors.index.json,
// as Hugging Face writers do. A single shard is written as model.safetensors without an index.
// Checkpoint files of an earlier write in `dir` that this one does not replace are removed.
// Each file is written atomically, the folder as a whole is not: to replace a checkpoint others
// may read, write into a StagedFolder made with checkpoint_folder_policy and commit it.
Status write_checkpoint(const std::string& dir, const std::vector<TensorToWrite>& tensors,
                        uint64_t max_shard_bytes = 5'000'000'000ull,
                        const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

// model.safetensors, model.safetensors.index.json, model-NNNNN-of-NNNNN.safetensors.
bool is_weights_file_name(std::string_view name);

// A checkpoint folder for StagedFolder: config.json and the weights files are superseded (the
// rest is carried over), and with force the old folder must hold one of them.
FolderPolicy checkpoint_folder_policy(bool force);

}  // namespace ferry
