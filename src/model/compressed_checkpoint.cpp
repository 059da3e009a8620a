// The compressed checkpoint's table: made from a model's groups, written into `__metadata__`,
// parsed back and checked as hostile input (model/compressed_checkpoint.h).
#include "model/compressed_checkpoint.h"

#include <algorithm>
#include <limits>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "compress/group_codec.h"
#include "format/strict_json.h"

namespace ferry {
namespace {

using nlohmann::json;

Error table_error(std::string_view label, const std::string& what) {
  return make_error(ErrorCode::format, std::string(label) + ": compressed checkpoint: " + what);
}

const std::string* find_metadata(const SafetensorsHeader& h, std::string_view key) {
  auto it = h.metadata.find(std::string(key));
  return it == h.metadata.end() ? nullptr : &it->second;
}

// A non-negative integer field of `o` (a JSON object), or an error naming `what`.
Result<uint64_t> get_u64(const json& o, const char* key, std::string_view label,
                         const std::string& what) {
  auto it = o.find(key);
  if (it == o.end() || !it->is_number_unsigned()) {
    return table_error(label, what + ": \"" + key + "\" is missing or not a non-negative integer");
  }
  return it->get<uint64_t>();
}

Result<std::string> get_string(const json& o, const char* key, std::string_view label,
                               const std::string& what) {
  auto it = o.find(key);
  if (it == o.end() || !it->is_string() || it->get_ref<const std::string&>().empty()) {
    return table_error(label, what + ": \"" + key + "\" is missing or not a non-empty string");
  }
  return it->get<std::string>();
}

Status check_keys(const json& o, std::initializer_list<std::string_view> allowed,
                  std::string_view label, const std::string& what) {
  if (!o.is_object()) return table_error(label, what + " is not an object");
  for (const auto& [k, v] : o.items()) {
    if (std::find(allowed.begin(), allowed.end(), k) == allowed.end()) {
      return table_error(label, what + ": unknown key " + strict_json::quote(k));
    }
  }
  return Status::ok_status();
}

// The byte size of dtype x shape, overflow-checked.
Result<uint64_t> tensor_bytes(DType dtype, const std::vector<int64_t>& shape,
                              std::string_view label, const std::string& what) {
  uint64_t n = dtype_size(dtype);
  for (int64_t d : shape) {
    if (d < 0) return table_error(label, what + ": negative dimension");
    const auto u = static_cast<uint64_t>(d);
    if (u != 0 && n > (uint64_t{1} << 62) / u) {
      return table_error(label, what + ": its shape overflows 2^62 bytes");
    }
    n *= u;
  }
  return n;
}

Status parse_groups(const json& arr, std::string_view label, ContainerTable& t) {
  if (!arr.is_array()) return table_error(label, "\"groups\" is not an array");
  std::set<std::string> names;
  for (size_t i = 0; i < arr.size(); ++i) {
    const std::string what = "group #" + std::to_string(i);
    FERRY_RETURN_IF_ERROR(check_keys(arr[i], {"name", "module", "decoded_bytes"}, label, what));
    ContainerGroup g;
    FERRY_ASSIGN_OR_RETURN(g.name, get_string(arr[i], "name", label, what));
    const std::string named = "group " + g.name;
    FERRY_ASSIGN_OR_RETURN(g.module, get_string(arr[i], "module", label, named));
    FERRY_ASSIGN_OR_RETURN(g.decoded_bytes, get_u64(arr[i], "decoded_bytes", label, named));
    if (!names.insert(g.name).second) return table_error(label, named + " is listed twice");
    t.groups.push_back(std::move(g));
  }
  return Status::ok_status();
}

Result<std::vector<int64_t>> parse_shape(const json& o, std::string_view label,
                                         const std::string& what) {
  auto it = o.find("shape");
  if (it == o.end() || !it->is_array() || it->size() > 8) {
    return table_error(label, what + ": \"shape\" is missing or not an array of up to 8 sizes");
  }
  std::vector<int64_t> shape;
  for (const json& d : *it) {
    if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t{1} << 62)) {
      return table_error(label, what + ": \"shape\" holds something other than a size");
    }
    shape.push_back(static_cast<int64_t>(d.get<uint64_t>()));
  }
  return shape;
}

Result<TensorPiece> parse_piece(const json& p, const ContainerTable& t, std::string_view label,
                                const std::string& what) {
  if (!p.is_array() || p.size() != 4) {
    return table_error(label, what + ": a piece is not [group, offset, source, bytes]");
  }
  for (const json& v : p) {
    if (!v.is_number_unsigned()) {
      return table_error(label, what + ": a piece holds something other than a byte count");
    }
  }
  TensorPiece piece;
  const uint64_t g = p[0].get<uint64_t>();
  if (g >= t.groups.size()) {
    return table_error(label, what + ": a piece names group #" + std::to_string(g) + " of " +
                                  std::to_string(t.groups.size()));
  }
  piece.group = static_cast<uint32_t>(g);
  piece.offset = p[1].get<uint64_t>();
  piece.source = p[2].get<uint64_t>();
  piece.bytes = p[3].get<uint64_t>();
  const ContainerGroup& group = t.groups[g];
  if (piece.bytes == 0 || piece.bytes > group.decoded_bytes ||
      piece.offset > group.decoded_bytes - piece.bytes) {
    return table_error(label, what + ": a piece of " + std::to_string(piece.bytes) + " bytes at " +
                                  std::to_string(piece.offset) + " lies outside group " +
                                  group.name + " (" + std::to_string(group.decoded_bytes) +
                                  " bytes)");
  }
  return piece;
}

Status parse_tensors(const json& arr, std::string_view label, ContainerTable& t) {
  if (!arr.is_array()) return table_error(label, "\"tensors\" is not an array");
  std::set<std::string> names;
  for (size_t i = 0; i < arr.size(); ++i) {
    const json& o = arr[i];
    std::string what = "tensor #" + std::to_string(i);
    FERRY_RETURN_IF_ERROR(
        check_keys(o, {"name", "dtype", "shape", "stored", "pieces"}, label, what));
    ContainerTensor c;
    FERRY_ASSIGN_OR_RETURN(c.name, get_string(o, "name", label, what));
    what = "tensor " + c.name;
    if (!names.insert(c.name).second) return table_error(label, what + " is listed twice");
    FERRY_ASSIGN_OR_RETURN(std::string dtype, get_string(o, "dtype", label, what));
    auto d = parse_dtype(dtype);
    if (!d) return table_error(label, what + ": unknown dtype " + strict_json::quote(dtype));
    c.dtype = *d;
    FERRY_ASSIGN_OR_RETURN(c.shape, parse_shape(o, label, what));
    FERRY_ASSIGN_OR_RETURN(c.bytes, tensor_bytes(c.dtype, c.shape, label, what));
    const bool has_stored = o.contains("stored");
    const bool has_pieces = o.contains("pieces");
    if (has_stored == has_pieces) {
      return table_error(label, what + ": needs exactly one of \"stored\" and \"pieces\"");
    }
    if (has_stored) {
      if (!o["stored"].is_boolean() || !o["stored"].get<bool>()) {
        return table_error(label, what + ": \"stored\" must be true");
      }
      c.stored = true;
    } else {
      if (!o["pieces"].is_array()) return table_error(label, what + ": \"pieces\" is not an array");
      uint64_t cursor = 0;
      for (const json& p : o["pieces"]) {
        FERRY_ASSIGN_OR_RETURN(TensorPiece piece, parse_piece(p, t, label, what));
        if (piece.source != cursor || piece.bytes > c.bytes - cursor) {
          return table_error(label, what + ": its pieces do not tile its " +
                                        std::to_string(c.bytes) + " bytes (a piece at " +
                                        std::to_string(piece.source) + ", expected " +
                                        std::to_string(cursor) + ")");
        }
        cursor += piece.bytes;
        c.pieces.push_back(piece);
      }
      if (cursor != c.bytes) {
        return table_error(label, what + ": its pieces cover " + std::to_string(cursor) + " of " +
                                      std::to_string(c.bytes) + " bytes");
      }
    }
    t.tensors.push_back(std::move(c));
  }
  return Status::ok_status();
}

// No two tensors' pieces share a byte of a group.
Status check_no_overlap(const ContainerTable& t, std::string_view label) {
  struct At {
    uint32_t group;
    uint64_t offset, bytes;
    size_t tensor;
  };
  std::vector<At> all;
  for (size_t i = 0; i < t.tensors.size(); ++i) {
    for (const TensorPiece& p : t.tensors[i].pieces) all.push_back({p.group, p.offset, p.bytes, i});
  }
  std::sort(all.begin(), all.end(), [](const At& a, const At& b) {
    return a.group != b.group ? a.group < b.group : a.offset < b.offset;
  });
  for (size_t i = 1; i < all.size(); ++i) {
    const At& a = all[i - 1];
    const At& b = all[i];
    if (a.group == b.group && b.offset < a.offset + a.bytes) {
      return table_error(label, "tensors " + t.tensors[a.tensor].name + " and " +
                                    t.tensors[b.tensor].name + " overlap in group " +
                                    t.groups[a.group].name + " at byte " +
                                    std::to_string(b.offset));
    }
  }
  return Status::ok_status();
}

// The table against the file: group tensors and stored tensors present as described, nothing
// else in the file.
Status bind_to_header(const SafetensorsHeader& h, std::string_view label, ContainerTable& t) {
  std::map<std::string_view, const TensorInfo*> by_name;
  for (const TensorInfo& info : h.tensors) by_name.emplace(info.name, &info);
  size_t named = 0;
  for (ContainerGroup& g : t.groups) {
    const std::string name = g.tensor_name();
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      return table_error(label, "group " + g.name + ": its tensor " + name + " is missing");
    }
    const TensorInfo& info = *it->second;
    if (info.dtype != DType::u8 || info.shape.size() != 1 || info.bytes < compress::kHeaderBytes) {
      return table_error(label,
                         "group " + g.name + ": its tensor " + name +
                             " is not U8 [n] with n >= " + std::to_string(compress::kHeaderBytes));
    }
    g.info = &info;
    ++named;
  }
  for (ContainerTensor& c : t.tensors) {
    if (!c.stored) continue;
    auto it = by_name.find(c.name);
    if (it == by_name.end()) {
      return table_error(label, "tensor " + c.name + " is stored, yet the file does not hold it");
    }
    const TensorInfo& info = *it->second;
    if (info.dtype != c.dtype || info.shape != c.shape) {
      return table_error(label, "tensor " + c.name + ": the file holds it as " +
                                    std::string(dtype_name(info.dtype)) +
                                    " with another shape than the table's");
    }
    if (c.name.starts_with(kGroupTensorPrefix) || c.name.starts_with(kContainerPadPrefix)) {
      return table_error(label, "tensor " + c.name + ": a stored tensor's name takes a prefix " +
                                    "the container keeps");
    }
    c.info = &info;
    ++named;
  }
  for (const TensorInfo& info : h.tensors) {
    if (info.name.starts_with(kContainerPadPrefix) && info.dtype == DType::u8 &&
        info.shape.size() == 1) {
      ++named;
    }
  }
  if (named != h.tensors.size()) {
    for (const TensorInfo& info : h.tensors) {
      bool found = info.name.starts_with(kContainerPadPrefix) && info.dtype == DType::u8 &&
                   info.shape.size() == 1;
      if (info.name.starts_with(kGroupTensorPrefix)) {
        const std::string_view g = std::string_view(info.name).substr(kGroupTensorPrefix.size());
        for (const ContainerGroup& cg : t.groups) found = found || cg.name == g;
      }
      for (const ContainerTensor& c : t.tensors) found = found || (c.stored && c.name == info.name);
      if (!found) {
        return table_error(label, "tensor " + info.name + " of the file is not in the table");
      }
    }
  }
  return Status::ok_status();
}

}  // namespace

bool is_compressed_container(const SafetensorsHeader& header) {
  return find_metadata(header, kContainerKey) != nullptr;
}

bool is_compressed_checkpoint(const Checkpoint& checkpoint) {
  return !checkpoint.files().empty() &&
         is_compressed_container(checkpoint.files().front().header());
}

Result<ContainerTable> parse_container(const SafetensorsHeader& header, std::string_view label) {
  const std::string* container = find_metadata(header, kContainerKey);
  if (container == nullptr || *container != kContainerName) {
    return table_error(
        label, "metadata " + std::string(kContainerKey) + " is not " + std::string(kContainerName));
  }
  const std::string* version = find_metadata(header, kContainerVersionKey);
  if (version == nullptr || *version != std::to_string(kContainerVersion)) {
    return table_error(label, "container version " +
                                  (version ? strict_json::quote(*version) : "(missing)") +
                                  " is not " + std::to_string(kContainerVersion));
  }
  const std::string* codec = find_metadata(header, kCodecKey);
  if (codec == nullptr || *codec != kCodecName) {
    return table_error(label, "codec " + (codec ? strict_json::quote(*codec) : "(missing)") +
                                  " is not " + std::string(kCodecName));
  }
  const std::string* codec_version = find_metadata(header, kCodecVersionKey);
  if (codec_version == nullptr || *codec_version != std::to_string(compress::kVersion)) {
    return table_error(
        label, "codec version " +
                   (codec_version ? strict_json::quote(*codec_version) : "(missing)") + " is not " +
                   std::to_string(compress::kVersion));
  }
  const std::string* text = find_metadata(header, kTableKey);
  if (text == nullptr)
    return table_error(label, "metadata " + std::string(kTableKey) + " is missing");
  FERRY_ASSIGN_OR_RETURN(json j, strict_json::parse(*text, 8, label, kTableKey));
  FERRY_RETURN_IF_ERROR(check_keys(j, {"groups", "tensors"}, label, std::string(kTableKey)));
  if (!j.contains("groups") || !j.contains("tensors")) {
    return table_error(label, std::string(kTableKey) + " needs \"groups\" and \"tensors\"");
  }
  ContainerTable t;
  FERRY_RETURN_IF_ERROR(parse_groups(j["groups"], label, t));
  FERRY_RETURN_IF_ERROR(parse_tensors(j["tensors"], label, t));
  FERRY_RETURN_IF_ERROR(check_no_overlap(t, label));
  if (const std::string* src = find_metadata(header, kSourceMetadataKey)) {
    FERRY_ASSIGN_OR_RETURN(json m, strict_json::parse(*src, 2, label, kSourceMetadataKey));
    if (!m.is_object())
      return table_error(label, std::string(kSourceMetadataKey) + " is not an object");
    for (const auto& [k, v] : m.items()) {
      if (!v.is_string()) {
        return table_error(label, std::string(kSourceMetadataKey) + ": value of " +
                                      strict_json::quote(k) + " is not a string");
      }
      t.source_metadata.emplace(k, v.get<std::string>());
    }
  }
  FERRY_RETURN_IF_ERROR(bind_to_header(header, label, t));
  return t;
}

std::string describe_container_group(const ContainerTable& table, size_t g) {
  const ContainerGroup& group = table.groups.at(g);
  std::vector<std::string_view> held;
  for (const ContainerTensor& c : table.tensors) {
    for (const TensorPiece& p : c.pieces) {
      if (p.group == g) {
        held.push_back(c.name);
        break;
      }
    }
  }
  std::string s = "group " + group.name + " (tensor " + group.tensor_name();
  if (!held.empty()) {
    s += ", holding " + std::string(held[0]);
    if (held.size() > 1) s += held.size() == 2 ? " and " : ", ";
    if (held.size() >= 2) s += std::string(held[1]);
    if (held.size() > 2) s += " and " + std::to_string(held.size() - 2) + " more";
  }
  return s + ")";
}

Status check_group_bytes(const ContainerTable& table, size_t g,
                         std::span<const uint8_t> compressed) {
  auto layout = compress::read_group_layout(compressed);
  if (!layout.ok()) {
    return make_error(ErrorCode::format,
                      describe_container_group(table, g) + ": " + layout.error().message);
  }
  if (layout->decoded_size != table.groups[g].decoded_bytes) {
    return make_error(ErrorCode::format, describe_container_group(table, g) + ": decodes to " +
                                             std::to_string(layout->decoded_size) +
                                             " bytes, the table says " +
                                             std::to_string(table.groups[g].decoded_bytes));
  }
  return Status::ok_status();
}

std::vector<TensorMeta> container_tensor_metas(const ContainerTable& table) {
  std::vector<TensorMeta> out;
  out.reserve(table.tensors.size());
  for (const ContainerTensor& c : table.tensors) out.push_back({c.name, c.dtype, c.shape});
  return out;
}

Result<ContainerTable> make_container_table(const ModelWeights& weights,
                                            const std::vector<TensorMeta>& tensors,
                                            const std::vector<uint64_t>& tensor_bytes) {
  if (tensors.size() != tensor_bytes.size()) {
    return make_error(ErrorCode::internal, "compress: one byte size per tensor");
  }
  ContainerTable t;
  for (const WeightGroup& g : weights.groups) {
    t.groups.push_back({g.name, group_module_name(g.kind), g.bytes, nullptr});
  }
  struct Ref {
    uint32_t group;
    const WeightSpec* spec;
  };
  std::map<std::string_view, std::vector<Ref>> refs;
  for (size_t g = 0; g < weights.groups.size(); ++g) {
    for (const WeightSpec& s : weights.groups[g].tensors) {
      refs[s.checkpoint_name].push_back({static_cast<uint32_t>(g), &s});
    }
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    ContainerTensor c;
    c.name = tensors[i].name;
    c.dtype = tensors[i].dtype;
    c.shape = tensors[i].shape;
    c.bytes = tensor_bytes[i];
    if (c.name.starts_with(kGroupTensorPrefix) || c.name.starts_with(kContainerPadPrefix)) {
      return make_error(ErrorCode::unsupported, "compress: tensor " + c.name +
                                                    " takes a name the container keeps (" +
                                                    std::string(kGroupTensorPrefix) + "*, " +
                                                    std::string(kContainerPadPrefix) + "*)");
    }
    auto it = refs.find(c.name);
    if (it != refs.end()) {
      std::vector<Ref> r = it->second;
      std::stable_sort(r.begin(), r.end(), [](const Ref& a, const Ref& b) {
        return a.spec->source_offset() < b.spec->source_offset();
      });
      uint64_t cursor = 0;
      for (const Ref& ref : r) {
        const uint64_t from = ref.spec->source_offset();
        const uint64_t end = from + ref.spec->bytes;
        if (end > c.bytes) {
          return make_error(ErrorCode::format, "compress: tensor " + c.name + " holds " +
                                                   std::to_string(c.bytes) +
                                                   " bytes, fewer than its rows in the model");
        }
        if (from <= cursor && end > cursor) {
          c.pieces.push_back({ref.group, ref.spec->offset + (cursor - from), cursor, end - cursor});
          cursor = end;
        }
      }
      if (cursor != c.bytes) c.pieces.clear();  // not all of it in groups: stored whole
      c.stored = cursor != c.bytes;
    } else {
      c.stored = true;
    }
    t.tensors.push_back(std::move(c));
  }
  return t;
}

std::map<std::string, std::string> container_metadata(const ContainerTable& table) {
  json groups = json::array();
  for (const ContainerGroup& g : table.groups) {
    groups.push_back({{"name", g.name}, {"module", g.module}, {"decoded_bytes", g.decoded_bytes}});
  }
  json tensors = json::array();
  for (const ContainerTensor& c : table.tensors) {
    json o = {{"name", c.name}, {"dtype", std::string(dtype_name(c.dtype))}, {"shape", c.shape}};
    if (c.stored) {
      o["stored"] = true;
    } else {
      json pieces = json::array();
      for (const TensorPiece& p : c.pieces)
        pieces.push_back({p.group, p.offset, p.source, p.bytes});
      o["pieces"] = std::move(pieces);
    }
    tensors.push_back(std::move(o));
  }
  json source = json::object();
  for (const auto& [k, v] : table.source_metadata) source[k] = v;
  const json doc = {{"groups", std::move(groups)}, {"tensors", std::move(tensors)}};
  std::map<std::string, std::string> m;
  m[std::string(kContainerKey)] = std::string(kContainerName);
  m[std::string(kContainerVersionKey)] = std::to_string(kContainerVersion);
  m[std::string(kCodecKey)] = std::string(kCodecName);
  m[std::string(kCodecVersionKey)] = std::to_string(compress::kVersion);
  m[std::string(kTableKey)] = doc.dump();
  m[std::string(kSourceMetadataKey)] = source.dump();
  return m;
}

}  // namespace ferry
