// `ferry pack --compress` and `--decompress` (model/compressed_checkpoint.h): the container
// written from a checkpoint and read back into one, both atomically as a whole.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <utility>

#include "compress/group_codec.h"
#include "core/interrupt.h"
#include "core/thread_pool.h"
#include "format/atomic_write.h"
#include "format/fault_guard.h"
#include "model/compressed_checkpoint.h"
#include "model/config_json.h"
#include "model/pack.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The BF16 tensors of a group's layout, in offset order: what the encoder codes (the same rule
// as host/compressed_groups.h bf16_ranges, which the layer above uses).
std::vector<compress::Bf16Range> group_bf16(const WeightGroup& group) {
  std::vector<compress::Bf16Range> r;
  for (const WeightSpec& s : group.tensors) {
    if (s.dtype == DType::bf16 && s.bytes > 0) r.push_back({s.offset, s.bytes});
  }
  std::sort(r.begin(), r.end(), [](const auto& a, const auto& b) { return a.offset < b.offset; });
  return r;
}

// Group g's decoded layout built from the checkpoint: zeros, each tensor's rows at its offset.
Status gather_group(const Checkpoint& ck, const WeightGroup& g, std::vector<uint8_t>& out) {
  out.assign(g.bytes, 0);
  for (const WeightSpec& s : g.tensors) {
    const Checkpoint::Entry* e = ck.find(s.checkpoint_name);
    if (e == nullptr) {
      return make_error(ErrorCode::internal, "compress: tensor " + s.checkpoint_name + " unbound");
    }
    const std::span<const std::byte> src = ck.data(*e);
    FERRY_RETURN_IF_ERROR(guarded_copy(out.data() + s.offset, src.data() + s.source_offset(),
                                       s.bytes, ck.mapping(*e)));
  }
  return Status::ok_status();
}

// A fill that copies a span of a mapping (guarded); write_safetensors takes a throw as its error.
std::function<void(std::span<std::byte>)> copy_fill(std::span<const std::byte> src,
                                                    const MappedFile& file) {
  return [src, &file](std::span<std::byte> dst) {
    Status s = guarded_copy(dst.data(), src.data(), std::min(src.size(), dst.size()), file);
    if (!s.ok()) throw std::runtime_error(s.error().message);
  };
}

std::span<const uint8_t> as_u8(std::span<const std::byte> b) {
  return {reinterpret_cast<const uint8_t*>(b.data()), b.size()};
}

// Each group gathered, encoded (its segments on the pool's threads), decoded back and compared,
// then appended to `spool`: the container's header needs every size first, and a model's
// compressed bytes need not fit in memory. Where each group lies in the spool (offset, size).
Result<std::vector<std::pair<uint64_t, uint64_t>>> encode_groups(const Checkpoint& ck,
                                                                 const ModelWeights& weights,
                                                                 const CompressOptions& options,
                                                                 AtomicFile& spool,
                                                                 CompressReport& report) {
  ThreadPool pool(options.threads);
  compress::EncodeOptions eo;
  eo.pool = &pool;
  compress::DecodeOptions dopt;
  dopt.pool = &pool;
  std::vector<std::pair<uint64_t, uint64_t>> spooled;
  uint64_t spool_end = 0;
  std::vector<uint8_t> raw, back;
  for (size_t g = 0; g < weights.groups.size(); ++g) {
    const WeightGroup& group = weights.groups[g];
    if (options.progress) options.progress(g, weights.groups.size());
    FERRY_RETURN_IF_ERROR(check_interrupt("pack --compress"));
    FERRY_RETURN_IF_ERROR(gather_group(ck, group, raw));
    auto enc = compress::encode_group(raw, group_bf16(group), eo);
    if (!enc.ok()) {
      return make_error(enc.error().code,
                        "compress group " + group.name + ": " + enc.error().message);
    }
    back.resize(raw.size());
    Status d = compress::decode_group(*enc, back, dopt);
    if (!d.ok() || back != raw) {
      return make_error(ErrorCode::internal,
                        "compress group " + group.name + ": does not decode to its bytes" +
                            (d.ok() ? std::string() : ": " + d.error().message));
    }
    auto layout = compress::read_group_layout(*enc);
    FERRY_RETURN_IF_ERROR(spool.write(enc->data(), enc->size()));
    spooled.emplace_back(spool_end, enc->size());
    spool_end += enc->size();
    report.groups.push_back({group.name, group_module_name(group.kind), group.bytes, enc->size(),
                             layout.ok() && layout->coded});
  }
  if (options.progress) options.progress(weights.groups.size(), weights.groups.size());
  return spooled;
}

// The container's tensors: each group's bytes from the spool, starting at a multiple of
// kContainerGroupAlignment (zeros before it where needed; the data starts at one), then the
// stored tensors from the checkpoint.
std::vector<TensorToWrite> container_tensors(
    const ContainerTable& table, const Checkpoint& ck, const MappedFile& spool,
    const std::vector<std::pair<uint64_t, uint64_t>>& spooled, CompressReport& report) {
  std::vector<TensorToWrite> tensors;
  uint64_t data_at = 0;
  for (size_t g = 0; g < table.groups.size(); ++g) {
    if (const uint64_t gap = (kContainerGroupAlignment - data_at % kContainerGroupAlignment) %
                             kContainerGroupAlignment;
        gap > 0) {
      tensors.push_back({std::string(kContainerPadPrefix) + std::to_string(g),
                         DType::u8,
                         {static_cast<int64_t>(gap)},
                         [](std::span<std::byte> d) { std::memset(d.data(), 0, d.size()); }});
      data_at += gap;
    }
    const auto [at, size] = spooled[g];
    data_at += size;
    tensors.push_back({table.groups[g].tensor_name(),
                       DType::u8,
                       {static_cast<int64_t>(size)},
                       copy_fill(spool.bytes().subspan(at, size), spool)});
    report.compressed_bytes += size;
  }
  for (const ContainerTensor& c : table.tensors) {
    if (!c.stored) continue;
    const Checkpoint::Entry* e = ck.find(c.name);
    tensors.push_back({c.name, c.dtype, c.shape, copy_fill(ck.data(*e), ck.mapping(*e))});
    report.compressed_bytes += c.bytes;
    ++report.stored_tensors;
  }
  return tensors;
}

Status check_folders(const std::string& in, const std::string& out) {
  std::error_code ec;
  if (!fs::is_directory(in, ec)) {
    return make_error(ErrorCode::invalid_argument,
                      in + ": not a folder (pack takes a checkpoint folder with config.json)");
  }
  if (fs::exists(out, ec) && fs::equivalent(in, out, ec)) {
    return make_error(ErrorCode::invalid_argument, "pack: OUT must be another folder than IN");
  }
  return Status::ok_status();
}

}  // namespace

Result<OpenContainer> open_container(const std::string& path, std::vector<Error>* damaged) {
  std::error_code ec;
  std::string file = path;
  if (fs::is_directory(path, ec)) {
    file = (fs::path(path) / "model.safetensors").string();
    if (!fs::exists(file, ec)) {
      return make_error(ErrorCode::format,
                        path + ": no model.safetensors (a compressed checkpoint is one file)");
    }
  }
  OpenContainer c;
  FERRY_ASSIGN_OR_RETURN(c.file, SafetensorsFile::open(file));
  if (!is_compressed_container(c.file.header())) {
    return make_error(ErrorCode::format, file + ": not a compressed checkpoint (no " +
                                             std::string(kContainerKey) + " in its metadata)");
  }
  FERRY_ASSIGN_OR_RETURN(c.table, parse_container(c.file.header(), file));
  for (size_t g = 0; g < c.table.groups.size(); ++g) {
    c.group_bytes.push_back(as_u8(c.file.data(*c.table.groups[g].info)));
    if (Status s = check_group_bytes(c.table, g, c.group_bytes.back()); !s.ok()) {
      Error e = make_error(s.error().code, file + ": " + s.error().message);
      if (damaged == nullptr) return e;
      damaged->push_back(std::move(e));
      c.group_bytes.back() = {};
    }
  }
  return c;
}

Status decode_container_group(const OpenContainer& c, size_t g, std::span<uint8_t> out,
                              ThreadPool* pool) {
  const std::span<const uint8_t> src = c.group_bytes.at(g);
  std::vector<uint8_t> copy(src.size());
  FERRY_RETURN_IF_ERROR(guarded_copy(copy.data(), src.data(), src.size(), c.file.mapping()));
  compress::DecodeOptions o;
  o.pool = pool;
  if (Status s = compress::decode_group(copy, out, o); !s.ok()) {
    return make_error(s.error().code, c.file.path() + ": " + describe_container_group(c.table, g) +
                                          ": " + s.error().message);
  }
  return Status::ok_status();
}

Result<CompressReport> compress_checkpoint(const std::string& in, const std::string& out,
                                           const CompressOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  FERRY_RETURN_IF_ERROR(check_folders(in, out));
  FERRY_ASSIGN_OR_RETURN(ModelConfig config, load_config(in));
  FERRY_ASSIGN_OR_RETURN(ModelWeights weights, describe_weights(config));
  FERRY_ASSIGN_OR_RETURN(Checkpoint ck, Checkpoint::open(in));
  if (is_compressed_checkpoint(ck)) {
    return make_error(ErrorCode::invalid_argument,
                      in + ": is compressed already (`ferry pack IN OUT --decompress` undoes it)");
  }
  FERRY_RETURN_IF_ERROR(bind_checkpoint(weights, ck));
  std::vector<TensorMeta> metas;
  std::vector<uint64_t> sizes;
  CompressReport report;
  for (const Checkpoint::Entry& e : ck.entries()) {
    metas.push_back({e.info->name, e.info->dtype, e.info->shape});
    sizes.push_back(e.info->bytes);
    report.raw_bytes += e.info->bytes;
  }
  FERRY_ASSIGN_OR_RETURN(ContainerTable table, make_container_table(weights, metas, sizes));
  table.source_metadata = ck.files().front().header().metadata;

  FERRY_ASSIGN_OR_RETURN(StagedFolder staged,
                         StagedFolder::begin(out, checkpoint_copy_policy(in, options.force)));
  auto fail = [&](const Error& e) -> Error { return staged.explain(e); };
  auto copied = copy_other_files(in, staged.path());
  if (!copied.ok()) return fail(copied.error());
  report.other_files = *copied;

  const std::string file = (fs::path(staged.path()) / "model.safetensors").string();
  auto spool = AtomicFile::create((fs::path(staged.path()) / "spool").string());
  if (!spool.ok()) return fail(spool.error());
  auto spooled = encode_groups(ck, weights, options, *spool, report);
  if (!spooled.ok()) return fail(spooled.error());
  auto spool_map = MappedFile::open(spool->temp_path());
  if (!spool_map.ok()) return fail(spool_map.error());
  const std::vector<TensorToWrite> tensors =
      container_tensors(table, ck, *spool_map, *spooled, report);
  if (Status s =
          write_safetensors(file, tensors, container_metadata(table), kContainerGroupAlignment);
      !s.ok()) {
    return fail(s.error());
  }
  if (Status s = ck.check_unchanged(); !s.ok()) return fail(s.error());
  spool_map = MappedFile();
  *spool = AtomicFile();  // not committed: removes the spool
  {
    auto back_open = open_container(file);
    if (!back_open.ok()) return fail(back_open.error());
    report.file_bytes = back_open->file.file_bytes().size();
  }
  FERRY_RETURN_IF_ERROR(staged.commit());
  report.seconds = seconds_since(t0);
  return report;
}

Result<DecompressReport> decompress_checkpoint(const std::string& in, const std::string& out,
                                               const CompressOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  FERRY_RETURN_IF_ERROR(check_folders(in, out));
  FERRY_ASSIGN_OR_RETURN(OpenContainer c, open_container(in));
  DecompressReport report;
  report.compressed_bytes = c.file.file_bytes().size();
  FERRY_ASSIGN_OR_RETURN(StagedFolder staged,
                         StagedFolder::begin(out, checkpoint_copy_policy(in, options.force)));
  auto fail = [&](const Error& e) -> Error { return staged.explain(e); };
  auto copied = copy_other_files(in, staged.path());
  if (!copied.ok()) return fail(copied.error());
  report.other_files = *copied;

  // Every group decoded once, in order (its segments on the pool's threads, its checksum
  // checked), into a spool beside the output; then the tensors are copied out of the spool's
  // mapping by write_safetensors' parallel fills. One group in memory at a time.
  auto spool = AtomicFile::create((fs::path(staged.path()) / "spool").string());
  if (!spool.ok()) return fail(spool.error());
  ThreadPool pool(options.threads);
  std::vector<uint64_t> at(c.table.groups.size(), 0);
  uint64_t spool_end = 0;
  std::vector<uint8_t> decoded;
  for (size_t g = 0; g < c.table.groups.size(); ++g) {
    if (options.progress) options.progress(g, c.table.groups.size());
    if (Status s = check_interrupt("pack --decompress"); !s.ok()) return fail(s.error());
    decoded.resize(c.table.groups[g].decoded_bytes);
    if (Status s = decode_container_group(c, g, decoded, &pool); !s.ok()) return fail(s.error());
    if (Status s = spool->write(decoded.data(), decoded.size()); !s.ok()) return fail(s.error());
    at[g] = spool_end;
    spool_end += decoded.size();
  }
  if (options.progress) options.progress(c.table.groups.size(), c.table.groups.size());
  auto spool_map = MappedFile::open(spool->temp_path());
  if (!spool_map.ok()) return fail(spool_map.error());
  const MappedFile& layouts = *spool_map;

  // Tensors in the order of their first group (the packed order), stored ones last.
  std::vector<size_t> order(c.table.tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto first_group = [&](size_t i) -> uint64_t {
    const ContainerTensor& t = c.table.tensors[i];
    return t.stored || t.pieces.empty() ? UINT64_MAX : t.pieces.front().group;
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return first_group(x) < first_group(y); });
  std::vector<TensorToWrite> tensors;
  for (size_t i : order) {
    const ContainerTensor& t = c.table.tensors[i];
    TensorToWrite w{t.name, t.dtype, t.shape, {}};
    if (t.stored) {
      w.fill = copy_fill(c.file.data(*t.info), c.file.mapping());
    } else {
      w.fill = [&t, &at, &layouts](std::span<std::byte> dst) {
        for (const TensorPiece& p : t.pieces) {
          const std::span<const std::byte> src =
              layouts.bytes().subspan(at[p.group] + p.offset, p.bytes);
          Status s = guarded_copy(dst.data() + p.source, src.data(), src.size(), layouts);
          if (!s.ok()) throw std::runtime_error(s.error().message);
        }
      };
    }
    report.raw_bytes += t.bytes;
    tensors.push_back(std::move(w));
  }
  report.tensors = tensors.size();
  const std::string file = (fs::path(staged.path()) / "model.safetensors").string();
  if (Status s = write_safetensors(file, tensors, c.table.source_metadata); !s.ok()) {
    return fail(s.error());
  }
  if (Status s = c.file.mapping().check_unchanged(); !s.ok()) return fail(s.error());
  spool_map = MappedFile();
  *spool = AtomicFile();  // not committed: removes the spool
  {
    auto back = SafetensorsFile::open(file);
    if (!back.ok()) return fail(back.error());
    report.file_bytes = back->file_bytes().size();
  }
  FERRY_RETURN_IF_ERROR(staged.commit());
  report.seconds = seconds_since(t0);
  return report;
}

}  // namespace ferry
