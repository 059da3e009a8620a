// Writing safetensors files and sharded checkpoints. Data goes straight into a shared mapping of
// the output file, filled by several threads, so a 22 GB checkpoint never sits in anonymous memory;
// the file is an AtomicFile (format/atomic_write.h), renamed over its target only when complete.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <limits>
#include <set>
#include <thread>
#include <utility>

#include "core/interrupt.h"
#include "format/atomic_write.h"
#include "format/fault_guard.h"
#include "format/safetensors.h"
#include "format/strict_json.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;
using strict_json::quote;

Error io_error(const std::string& path, const char* what, int err) {
  return make_error(ErrorCode::io, path + ": " + what + ": " + std::strerror(err));
}

// Bytes of a tensor to write, or an error naming it.
Result<uint64_t> tensor_bytes(const TensorToWrite& t, const std::string& path) {
  auto bad = [&](const std::string& msg) {
    return make_error(ErrorCode::invalid_argument, path + ": tensor " + quote(t.name) + ": " + msg);
  };
  if (t.name.empty()) return make_error(ErrorCode::invalid_argument, path + ": empty tensor name");
  if (t.name.find('\0') != std::string::npos) return bad("name contains a NUL byte");
  if (t.name == "__metadata__") return bad("name is reserved");
  if (strict_json::find_invalid_utf8(t.name)) return bad("name is not valid UTF-8");
  if (!t.fill) return bad("no fill function");
  for (int64_t d : t.shape)
    if (d < 0) return bad("negative dimension " + std::to_string(d));
  if (std::count(t.shape.begin(), t.shape.end(), 0) > 0) return uint64_t{0};
  uint64_t n = dtype_size(t.dtype);
  for (int64_t d : t.shape) {
    const auto ud = static_cast<uint64_t>(d);
    if (n > std::numeric_limits<uint64_t>::max() / 2 / ud) return bad("byte size overflows");
    n *= ud;
  }
  return n;
}

Status check_metadata(const std::map<std::string, std::string>& metadata, const std::string& path) {
  for (const auto& [k, v] : metadata)
    if (strict_json::find_invalid_utf8(k) || strict_json::find_invalid_utf8(v))
      return make_error(ErrorCode::invalid_argument,
                        path + ": metadata entry " + quote(k) + " is not valid UTF-8");
  return {};
}

struct Mapping {
  void* data = MAP_FAILED;
  size_t size = 0;
  ~Mapping() {
    if (data != MAP_FAILED) ::munmap(data, size);
  }
};

// Asks the kernel to fault in a tensor's pages writable in one call (Linux >= 5.14), instead of
// one page fault per 4 KiB during fill. Best effort: older kernels just fault on first touch.
void prefault(std::byte* map_base, std::byte* begin, uint64_t size) {
#ifdef MADV_POPULATE_WRITE
  if (size == 0) return;
  static const auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const auto first = static_cast<uint64_t>(begin - map_base) / page * page;
  const uint64_t last = static_cast<uint64_t>(begin - map_base) + size;
  (void)::madvise(map_base + first, static_cast<size_t>(last - first), MADV_POPULATE_WRITE);
#else
  (void)map_base, (void)begin, (void)size;
#endif
}

// Runs every fill into its span with up to hardware_concurrency threads (largest first, so one
// big embedding does not start last). Exceptions from fill come back as an error; an interrupt
// (core/interrupt.h) stops the work between tensors.
Status parallel_fill(const std::vector<TensorToWrite>& tensors, std::byte* map_base,
                     std::byte* data, const std::vector<uint64_t>& offsets,
                     const std::vector<uint64_t>& sizes, const std::string& path) {
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return sizes[a] > sizes[b]; });
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::string failure;  // written once, by the thread that sets `failed`
  auto work = [&] {
    for (size_t k = next++; k < order.size() && !failed; k = next++) {
      if (pending_interrupt() != 0) {
        failed = true;
        break;
      }
      const size_t i = order[k];
      prefault(map_base, data + offsets[i], sizes[i]);
      try {
        tensors[i].fill(std::span<std::byte>(data + offsets[i], static_cast<size_t>(sizes[i])));
      } catch (const std::exception& e) {
        if (!failed.exchange(true)) failure = tensors[i].name + ": " + e.what();
      } catch (...) {
        if (!failed.exchange(true)) failure = tensors[i].name + ": unknown exception";
      }
    }
  };
  const size_t n_threads =
      std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()), tensors.size());
  std::vector<std::thread> threads;
  for (size_t i = 1; i < n_threads; ++i) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
  FERRY_RETURN_IF_ERROR(check_interrupt(": " + path + " was left as it was"));
  if (failed) return make_error(ErrorCode::internal, path + ": fill of tensor " + failure);
  return {};
}

// A checkpoint of an earlier write in the same folder (model.safetensors, an index, shards
// model-NNNNN-of-NNNNN.safetensors) that the new one does not overwrite would be found by a
// loader: remove those, as transformers' save_pretrained does. Other files are left alone.
Status remove_stale_outputs(const std::string& dir, const std::set<std::string>& keep) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!is_weights_file_name(name) || keep.count(name)) continue;
    if (!fs::remove(e.path(), ec) || ec)
      return make_error(ErrorCode::io, e.path().string() + ": cannot remove stale file: " +
                                           (ec ? ec.message() : std::string("not removed")));
  }
  if (ec) return make_error(ErrorCode::io, dir + ": cannot list: " + ec.message());
  return {};
}

}  // namespace

bool is_weights_file_name(std::string_view name) {
  if (name == "model.safetensors" || name == "model.safetensors.index.json") return true;
  // model-NNNNN-of-NNNNN.safetensors
  constexpr std::string_view kShape = "model-#####-of-#####.safetensors";
  if (name.size() != kShape.size()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const bool digit = name[i] >= '0' && name[i] <= '9';
    if (kShape[i] == '#' ? !digit : name[i] != kShape[i]) return false;
  }
  return true;
}

FolderPolicy checkpoint_folder_policy(bool force) {
  auto part = [](const std::string& name) {
    return name == "config.json" || is_weights_file_name(name);
  };
  FolderPolicy p;
  p.force = force;
  // synth writes tokenizer.json too: the new one replaces the old, never a link to it.
  p.supersedes = [part](const std::string& name) { return part(name) || name == "tokenizer.json"; };
  p.marks_kind = part;
  // Before atomic writes, ferry wrote "<file>.tmp" in the checkpoint folder itself.
  p.leftover = [part](const std::string& name) {
    return name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0 &&
           part(name.substr(0, name.size() - 4));
  };
  p.kind = "checkpoint";
  p.marks = "config.json, model.safetensors, model.safetensors.index.json";
  return p;
}

Status write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                         const std::map<std::string, std::string>& metadata,
                         uint64_t data_alignment) {
  if (data_alignment < 8 || data_alignment > (uint64_t{1} << 20) ||
      (data_alignment & (data_alignment - 1)) != 0) {
    return make_error(ErrorCode::invalid_argument, path + ": data alignment " +
                                                       std::to_string(data_alignment) +
                                                       " is not a power of two from 8 to 1 MiB");
  }
  FERRY_RETURN_IF_ERROR(check_metadata(metadata, path));
  // The header text is assembled entry by entry (nlohmann's ordered_json would look every key
  // up linearly); names and metadata are escaped by nlohmann.
  std::string text = "{";
  if (!metadata.empty()) text += "\"__metadata__\":" + nlohmann::json(metadata).dump();
  std::vector<uint64_t> sizes;
  std::vector<uint64_t> offsets;
  std::set<std::string_view> names;
  uint64_t data_bytes = 0;
  for (const TensorToWrite& t : tensors) {
    FERRY_ASSIGN_OR_RETURN(uint64_t n, tensor_bytes(t, path));
    if (!names.insert(t.name).second)
      return make_error(ErrorCode::invalid_argument, path + ": duplicate tensor " + quote(t.name));
    if (data_bytes > std::numeric_limits<uint64_t>::max() / 2 - n)
      return make_error(ErrorCode::invalid_argument, path + ": total size overflows");
    if (text.size() > 1) text += ',';
    text += nlohmann::json(t.name).dump();
    text += ":{\"dtype\":\"";
    text += dtype_name(t.dtype);
    text += "\",\"shape\":";
    text += nlohmann::json(t.shape).dump();
    text += ",\"data_offsets\":[" + std::to_string(data_bytes) + "," +
            std::to_string(data_bytes + n) + "]}";
    offsets.push_back(data_bytes);
    sizes.push_back(n);
    data_bytes += n;
  }
  text += '}';
  // The data starts aligned (8 bytes as HF pads), after the 8-byte length and the header.
  text.append(
      static_cast<size_t>((data_alignment - (8 + text.size()) % data_alignment) % data_alignment),
      ' ');
  const uint64_t data_start = 8 + text.size();
  const uint64_t total = data_start + data_bytes;
  if (total > static_cast<uint64_t>(std::numeric_limits<off_t>::max()))
    return make_error(ErrorCode::invalid_argument, path + ": file too large");

  FERRY_ASSIGN_OR_RETURN(AtomicFile out, AtomicFile::create(path));
  if (::ftruncate(out.fd(), static_cast<off_t>(total)) != 0)
    return io_error(path, "cannot size", errno);
  // Reserve the blocks now, so that a full disk is an error here rather than a failed store
  // through the mapping (which the AbsorbedRegion below still catches where reserving is not
  // possible, or on file systems that allocate on write).
  if (int rc = ::posix_fallocate(out.fd(), 0, static_cast<off_t>(total));
      rc != 0 && rc != EOPNOTSUPP && rc != EINVAL)
    return io_error(path, "cannot reserve space", rc);
  {
    Mapping map;
    map.size = static_cast<size_t>(total);
    map.data = ::mmap(nullptr, map.size, PROT_READ | PROT_WRITE, MAP_SHARED, out.fd(), 0);
    if (map.data == MAP_FAILED) return io_error(path, "cannot mmap", errno);
    AbsorbedRegion absorbed(map.data, map.size);
    if (!absorbed.armed())
      return make_error(ErrorCode::internal, path + ": too many writers at once");
    auto* bytes = static_cast<std::byte*>(map.data);
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<std::byte>((text.size() >> (8 * i)) & 0xFF);
    std::memcpy(bytes + 8, text.data(), text.size());
    FERRY_RETURN_IF_ERROR(parallel_fill(tensors, bytes, bytes + data_start, offsets, sizes, path));
    if (absorbed.faults() > 0)
      return make_error(ErrorCode::io, path + ": the file system refused " +
                                           std::to_string(absorbed.faults()) +
                                           " page(s) written through the mapping (out of space "
                                           "or quota, or the file was truncated by another "
                                           "process)");
  }
  return out.commit();
}

Status write_checkpoint(const std::string& dir, const std::vector<TensorToWrite>& tensors,
                        uint64_t max_shard_bytes,
                        const std::map<std::string, std::string>& metadata) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return make_error(ErrorCode::io, dir + ": cannot create folder: " + ec.message());

  // Greedy in order: a shard closes when the next tensor would take it past the limit.
  std::vector<std::vector<TensorToWrite>> shards;
  uint64_t in_shard = 0;
  uint64_t total = 0;
  for (const TensorToWrite& t : tensors) {
    FERRY_ASSIGN_OR_RETURN(uint64_t n, tensor_bytes(t, dir));
    if (shards.empty() || (!shards.back().empty() && in_shard + n > max_shard_bytes)) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(t);
    in_shard += n;
    total += n;
  }
  const fs::path index_path = fs::path(dir) / "model.safetensors.index.json";
  const fs::path single_path = fs::path(dir) / "model.safetensors";
  if (shards.size() <= 1) {
    FERRY_RETURN_IF_ERROR(write_safetensors(
        single_path.string(), shards.empty() ? std::vector<TensorToWrite>{} : shards[0], metadata));
    return remove_stale_outputs(dir, {"model.safetensors"});
  }
  std::set<std::string> written;
  nlohmann::json weight_map = nlohmann::json::object();  // sorted by name, as transformers writes
  for (size_t i = 0; i < shards.size(); ++i) {
    FERRY_RETURN_IF_ERROR(check_interrupt(": the write into " + dir + " was abandoned"));
    char name[64];
    std::snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors", i + 1, shards.size());
    FERRY_RETURN_IF_ERROR(write_safetensors((fs::path(dir) / name).string(), shards[i], metadata));
    written.insert(name);
    for (const TensorToWrite& t : shards[i]) weight_map[t.name] = name;
  }
  nlohmann::json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  FERRY_RETURN_IF_ERROR(write_file_atomic(index_path.string(), index.dump(2) + "\n"));
  written.insert("model.safetensors.index.json");
  return remove_stale_outputs(dir, written);
}

}  // namespace ferry
