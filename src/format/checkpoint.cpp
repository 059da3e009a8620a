// A checkpoint on disk: one safetensors file or an index and its shards, cross-checked.
#include <filesystem>
#include <map>
#include <string>
#include <utility>

#include "format/fault_guard.h"
#include "format/safetensors.h"
#include "format/strict_json.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;
using strict_json::quote;

constexpr const char* kIndexName = "model.safetensors.index.json";
constexpr const char* kSingleName = "model.safetensors";
constexpr uint64_t kMaxIndexBytes = 100'000'000;

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

Result<Checkpoint> Checkpoint::open(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  // The real cause: a symlink loop or a folder that may not be searched is not "missing".
  if (ec && ec != std::errc::no_such_file_or_directory && ec != std::errc::not_a_directory)
    return make_error(ErrorCode::io, path + ": " + ec.message());
  if (!fs::exists(st)) return make_error(ErrorCode::io, path + ": no such file or folder");
  // A config.json names the checkpoint beside it, as a folder would.
  if (!fs::is_directory(st) && fs::path(path).filename() == "config.json") {
    const fs::path parent = fs::path(path).parent_path();
    return open(parent.empty() ? "." : parent.string());
  }

  std::string index_path;
  std::string single_path;
  Checkpoint c;
  if (fs::is_directory(st)) {
    c.dir_ = path;
    const std::string idx = (fs::path(path) / kIndexName).string();
    const std::string one = (fs::path(path) / kSingleName).string();
    const bool has_index = fs::exists(idx, ec);
    if (ec) return make_error(ErrorCode::io, idx + ": " + ec.message());
    const bool has_single = fs::exists(one, ec);
    if (ec) return make_error(ErrorCode::io, one + ": " + ec.message());
    if (has_index && has_single) {
      // transformers would load model.safetensors, a reader going by the index the shards:
      // refuse to guess which one is current.
      return make_error(ErrorCode::format, path + ": folder holds both " + std::string(kIndexName) +
                                               " and " + kSingleName + "; remove the stale one");
    }
    if (has_index) {
      index_path = idx;
    } else if (has_single) {
      single_path = one;
    } else {
      return make_error(ErrorCode::io, path + ": folder holds neither " + std::string(kIndexName) +
                                           " nor " + kSingleName);
    }
  } else {
    const fs::path parent = fs::path(path).parent_path();
    c.dir_ = parent.empty() ? "." : parent.string();
    if (ends_with(path, ".index.json")) {
      index_path = path;
    } else if (ends_with(path, ".safetensors")) {
      // One shard alone would miss the other shards' tensors: say what to give instead.
      if (is_weights_file_name(fs::path(path).filename().string()) &&
          fs::path(path).filename() != kSingleName &&
          fs::exists(fs::path(c.dir_) / kIndexName, ec)) {
        return make_error(ErrorCode::invalid_argument,
                          path + " is one shard of a sharded checkpoint; give the folder " +
                              c.dir_ + " (or its " + kIndexName + ")");
      }
      single_path = path;
    } else {
      return make_error(ErrorCode::invalid_argument,
                        path + ": expected a folder, a .safetensors file or an .index.json file");
    }
  }

  if (!single_path.empty()) {
    FERRY_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::open(single_path));
    c.files_.push_back(std::move(f));
  } else {
    FERRY_ASSIGN_OR_RETURN(MappedFile text, MappedFile::open(index_path));
    if (text.bytes().size() > kMaxIndexBytes)
      return make_error(ErrorCode::format,
                        index_path + ": larger than " + std::to_string(kMaxIndexBytes) + " bytes");
    std::string json_text(text.bytes().size(), '\0');
    if (!json_text.empty())
      FERRY_RETURN_IF_ERROR(
          guarded_copy(json_text.data(), text.bytes().data(), json_text.size(), text));
    FERRY_ASSIGN_OR_RETURN(SafetensorsIndex index, parse_safetensors_index(json_text, index_path));
    for (const std::string& shard : index.shards) {
      FERRY_ASSIGN_OR_RETURN(SafetensorsFile f,
                             SafetensorsFile::open((fs::path(c.dir_) / shard).string()));
      c.files_.push_back(std::move(f));
    }
    // Cross-check: every tensor in exactly one shard, and that shard is the one the index names.
    std::map<std::string_view, size_t> found;  // tensor -> shard that holds it
    for (size_t i = 0; i < c.files_.size(); ++i) {
      const std::string& shard = index.shards[i];
      for (const TensorInfo& t : c.files_[i].header().tensors) {
        auto [it, fresh] = found.emplace(t.name, i);
        if (!fresh)
          return make_error(ErrorCode::format, index_path + ": tensor " + quote(t.name) +
                                                   " is in two shards, " +
                                                   index.shards[it->second] + " and " + shard);
        auto listed = index.weight_map.find(t.name);
        if (listed == index.weight_map.end())
          return make_error(ErrorCode::format, index_path + ": shard " + shard + " holds tensor " +
                                                   quote(t.name) + " that the index does not list");
        if (listed->second != shard)
          return make_error(ErrorCode::format, index_path + ": tensor " + quote(t.name) +
                                                   " is in " + shard + " but the index names " +
                                                   listed->second);
      }
    }
    for (const auto& [name, shard] : index.weight_map)
      if (!found.count(name))
        return make_error(ErrorCode::format, index_path + ": tensor " + quote(name) +
                                                 " is listed in " + shard +
                                                 " but that shard does not hold it");
  }

  for (size_t i = 0; i < c.files_.size(); ++i)
    for (const TensorInfo& t : c.files_[i].header().tensors) {
      c.by_name_.emplace(t.name, c.entries_.size());
      c.entries_.push_back(Entry{&t, i});
    }
  return c;
}

const Checkpoint::Entry* Checkpoint::find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &entries_[it->second];
}

std::span<const std::byte> Checkpoint::data(const Entry& e) const {
  FERRY_CHECK(e.shard < files_.size(), "entry of another checkpoint");
  return files_[e.shard].data(*e.info);
}

const MappedFile& Checkpoint::mapping(const Entry& e) const {
  FERRY_CHECK(e.shard < files_.size(), "entry of another checkpoint");
  return files_[e.shard].mapping();
}

Status Checkpoint::check_unchanged() const {
  for (const SafetensorsFile& f : files_) FERRY_RETURN_IF_ERROR(f.mapping().check_unchanged());
  return {};
}

uint64_t Checkpoint::total_bytes() const {
  uint64_t n = 0;
  for (const Entry& e : entries_) n += e.info->bytes;
  return n;
}

}  // namespace ferry
