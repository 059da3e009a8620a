#include "model/pack.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include "format/atomic_write.h"
#include "format/fault_guard.h"
#include "format/safetensors.h"
#include "model/compressed_checkpoint.h"
#include "model/config_json.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;

uint64_t align_up(uint64_t v, uint64_t a) {
  return (v + a - 1) / a * a;
}

// Places tensors and padding one after the other.
class LayoutBuilder {
 public:
  explicit LayoutBuilder(size_t tensors) : at_(tensors, 0), placed_(tensors, false) {}

  uint64_t cursor() const { return cursor_; }
  bool placed(size_t t) const { return placed_[t]; }
  uint64_t at(size_t t) const { return at_[t]; }

  void place(size_t t, const std::string& name, uint64_t bytes, uint64_t pos) {
    if (pos > cursor_) {
      layout_.entries.push_back({std::string(kPackPaddingPrefix) + std::to_string(pads_++), true,
                                 cursor_, pos - cursor_});
    }
    layout_.entries.push_back({name, false, pos, bytes});
    cursor_ = pos + bytes;
    at_[t] = pos;
    placed_[t] = true;
  }

  PackLayout finish() {
    layout_.data_bytes = cursor_;
    return std::move(layout_);
  }
  PackLayout& layout() { return layout_; }

 private:
  PackLayout layout_;
  uint64_t cursor_ = 0;
  int pads_ = 0;
  std::vector<uint64_t> at_;
  std::vector<bool> placed_;
};

}  // namespace

Result<PackLayout> pack_layout(const ModelWeights& weights, const std::vector<TensorMeta>& tensors,
                               const std::vector<uint64_t>& tensor_bytes) {
  if (tensor_bytes.size() != tensors.size()) {
    return make_error(ErrorCode::internal, "pack: one byte size per tensor");
  }
  std::map<std::string, size_t, std::less<>> index;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!index.emplace(tensors[i].name, i).second) {
      return make_error(ErrorCode::format, "pack: tensor " + tensors[i].name + " appears twice");
    }
  }
  // Each spec's tensor, checked to hold the spec's rows.
  auto tensor_of = [&](const WeightSpec& s) -> Result<size_t> {
    auto it = index.find(s.checkpoint_name);
    if (it == index.end()) {
      return make_error(ErrorCode::format, "pack: tensor " + s.checkpoint_name + " is missing");
    }
    const uint64_t have = tensor_bytes[it->second];
    if (s.source_offset() > have || s.bytes > have - s.source_offset()) {
      return make_error(ErrorCode::format, "pack: tensor " + s.checkpoint_name + " holds " +
                                               std::to_string(have) + " bytes, fewer than its " +
                                               "rows in the model's table");
    }
    return it->second;
  };
  LayoutBuilder b(tensors.size());
  for (const WeightGroup& g : weights.groups) {
    std::vector<const WeightSpec*> todo;
    for (const WeightSpec& s : g.tensors) {
      FERRY_ASSIGN_OR_RETURN(size_t t, tensor_of(s));
      if (!b.placed(t)) todo.push_back(&s);
    }
    std::stable_sort(todo.begin(), todo.end(), [](const WeightSpec* x, const WeightSpec* y) {
      return x->offset < y->offset;
    });
    const uint64_t start = align_up(b.cursor(), kPackGroupAlignment);
    for (const WeightSpec* s : todo) {
      const size_t t = index.find(s->checkpoint_name)->second;
      if (b.placed(t)) continue;  // named twice in the group
      // Where the group's layout puts it; where that is taken already, the next aligned byte.
      const uint64_t want = start + s->offset;
      const uint64_t from = s->source_offset();
      const uint64_t pos = from <= want && want - from >= b.cursor()
                               ? want - from
                               : align_up(b.cursor(), kGroupAlignment);
      b.place(t, tensors[t].name, tensor_bytes[t], pos);
    }
  }
  // Whether each group's file range is its layout: every tensor at base + its offset.
  for (const WeightGroup& g : weights.groups) {
    bool one_range = true;
    uint64_t base = 0;
    for (size_t i = 0; i < g.tensors.size(); ++i) {
      const WeightSpec& s = g.tensors[i];
      const uint64_t file = b.at(index.find(s.checkpoint_name)->second) + s.source_offset();
      if (i == 0) {
        one_range = file >= s.offset;
        base = file - std::min(file, s.offset);
      } else if (file != base + s.offset) {
        one_range = false;
      }
    }
    if (!one_range) b.layout().split_groups.push_back(g.name);
  }
  for (size_t t = 0; t < tensors.size(); ++t) {
    if (!b.placed(t)) {
      b.place(t, tensors[t].name, tensor_bytes[t], align_up(b.cursor(), kGroupAlignment));
    }
  }
  return b.finish();
}

namespace {

Result<std::string> read_small_file(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return make_error(ErrorCode::io, path.string() + ": cannot read");
  std::stringstream ss;
  ss << f.rdbuf();
  if (!f.good() && !f.eof()) return make_error(ErrorCode::io, path.string() + ": cannot read");
  return ss.str();
}

// The checkpoint's tensors as pack writes them: padding zeros, tensors copied from the mapping
// under the fault guard (a file truncated under the pack fails it, naming the file).
std::vector<TensorToWrite> tensors_to_write(const Checkpoint& ck, const PackLayout& layout) {
  std::vector<TensorToWrite> out;
  out.reserve(layout.entries.size());
  for (const PackEntry& e : layout.entries) {
    TensorToWrite t;
    t.name = e.name;
    if (e.padding) {
      t.dtype = DType::u8;
      t.shape = {static_cast<int64_t>(e.bytes)};
      t.fill = [](std::span<std::byte> dst) { std::memset(dst.data(), 0, dst.size()); };
    } else {
      const Checkpoint::Entry* c = ck.find(e.name);
      t.dtype = c->info->dtype;
      t.shape = c->info->shape;
      t.fill = [&ck, c](std::span<std::byte> dst) {
        const std::span<const std::byte> src = ck.data(*c);
        Status s =
            guarded_copy(dst.data(), src.data(), std::min(src.size(), dst.size()), ck.mapping(*c));
        // write_safetensors takes a fill's exception as its error and commits nothing.
        if (!s.ok()) throw std::runtime_error(s.error().message);
      };
    }
    out.push_back(std::move(t));
  }
  return out;
}

// config.json, the tokenizer and every other regular, not hidden file of IN but the weights.
bool copies_beside_weights(const fs::directory_entry& e) {
  const std::string name = e.path().filename().string();
  std::error_code ec;
  return !name.empty() && name[0] != '.' && !is_weights_file_name(name) &&
         e.path().extension() != ".safetensors" && e.is_regular_file(ec);
}

}  // namespace

Result<size_t> copy_other_files(const std::string& in, const std::string& out) {
  size_t n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(in, ec)) {
    if (!copies_beside_weights(e)) continue;
    const std::string name = e.path().filename().string();
    FERRY_ASSIGN_OR_RETURN(std::string bytes, read_small_file(e.path()));
    FERRY_RETURN_IF_ERROR(write_file_atomic((fs::path(out) / name).string(), bytes));
    ++n;
  }
  if (ec) return make_error(ErrorCode::io, in + ": cannot list: " + ec.message());
  return n;
}

FolderPolicy checkpoint_copy_policy(const std::string& in, bool force) {
  FolderPolicy policy = checkpoint_folder_policy(force);
  std::set<std::string> copied;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(in, ec)) {
    if (copies_beside_weights(e)) copied.insert(e.path().filename().string());
  }
  policy.supersedes = [weights_part = policy.supersedes,
                       copied = std::move(copied)](const std::string& name) {
    return weights_part(name) || copied.count(name) > 0;
  };
  return policy;
}

Result<PackReport> pack_checkpoint(const std::string& in, const std::string& out,
                                   const PackOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  std::error_code ec;
  if (!fs::is_directory(in, ec)) {
    return make_error(ErrorCode::invalid_argument,
                      in + ": not a folder (pack takes a checkpoint folder with config.json)");
  }
  if (fs::exists(out, ec) && fs::equivalent(in, out, ec)) {
    return make_error(ErrorCode::invalid_argument, "pack: OUT must be another folder than IN");
  }
  FERRY_ASSIGN_OR_RETURN(ModelConfig config, load_config(in));
  FERRY_ASSIGN_OR_RETURN(ModelWeights weights, describe_weights(config));
  FERRY_ASSIGN_OR_RETURN(Checkpoint ck, Checkpoint::open(in));
  if (is_compressed_checkpoint(ck)) {
    return make_error(ErrorCode::invalid_argument,
                      in + ": is a compressed checkpoint (`ferry pack IN OUT --decompress` "
                           "gives the raw one back)");
  }
  FERRY_RETURN_IF_ERROR(bind_checkpoint(weights, ck));
  std::vector<TensorMeta> metas;
  std::vector<uint64_t> bytes;
  for (const Checkpoint::Entry& e : ck.entries()) {
    metas.push_back({e.info->name, e.info->dtype, e.info->shape});
    bytes.push_back(e.info->bytes);
  }
  PackReport report;
  FERRY_ASSIGN_OR_RETURN(report.layout, pack_layout(weights, metas, bytes));
  for (const PackEntry& e : report.layout.entries) report.padding_bytes += e.padding ? e.bytes : 0;

  // The new folder supersedes the weights, config.json and every file copied from IN; other
  // files of an old OUT are carried over.
  const FolderPolicy policy = checkpoint_copy_policy(in, options.force);
  FERRY_ASSIGN_OR_RETURN(StagedFolder staged, StagedFolder::begin(out, policy));
  auto fail = [&](const Error& e) -> Error { return staged.explain(e); };
  auto copied = copy_other_files(in, staged.path());
  if (!copied.ok()) return fail(copied.error());
  report.other_files = *copied;
  std::map<std::string, std::string> metadata = ck.files().front().header().metadata;
  metadata.emplace("format", "pt");  // what transformers asks of a torch checkpoint
  metadata["ferry.pack"] = "weight groups in execution order, 4096-byte aligned";
  const std::string file = (fs::path(staged.path()) / "model.safetensors").string();
  if (Status s = write_safetensors(file, tensors_to_write(ck, report.layout), metadata,
                                   kPackGroupAlignment);
      !s.ok()) {
    return fail(s.error());
  }
  // The copies were made from the mapping: trust them only if the input did not change.
  if (Status s = ck.check_unchanged(); !s.ok()) return fail(s.error());
  {
    auto packed = Checkpoint::open(staged.path());
    if (!packed.ok()) return fail(packed.error());
    if (Status s = bind_checkpoint(weights, *packed); !s.ok()) return fail(s.error());
    report.file_bytes = packed->files().front().file_bytes().size();
  }
  FERRY_RETURN_IF_ERROR(staged.commit());
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report;
}

}  // namespace ferry
