// Parsing and validation of one safetensors file image (bytes only; no files are touched here).
#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "format/fault_guard.h"
#include "format/safetensors.h"
#include "format/strict_json.h"

namespace ferry {
namespace {

using json = nlohmann::json;
using strict_json::quote;

// The reference implementation's bound (huggingface/safetensors, MAX_HEADER_SIZE).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr int64_t kMaxI64 = std::numeric_limits<int64_t>::max();

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

// A bounded rendering of a JSON value for error messages.
std::string show(const json& v) {
  std::string s = v.dump();
  if (s.size() > 80) s = s.substr(0, 80) + "...";
  return s;
}

const char* kind(const json& v) {
  if (v.is_object()) return "an object";
  if (v.is_array()) return "an array";
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_null()) return "null";
  return "a number";
}

class HeaderParser {
 public:
  explicit HeaderParser(std::string_view label) : label_(label) {}

  Error err(const std::string& msg) const {
    return make_error(ErrorCode::format, std::string(label_) + ": " + msg);
  }
  Error tensor_err(const std::string& name, const std::string& msg) const {
    return err("tensor " + quote(name) + ": " + msg);
  }

  Status metadata(const json& v, std::map<std::string, std::string>& out) const {
    if (!v.is_object())
      return err(std::string("__metadata__ is ") + kind(v) + ", expected an object of strings");
    for (const auto& [k, val] : v.items()) {
      if (!val.is_string())
        return err("__metadata__: value of " + quote(k) + " is " + kind(val) +
                   ", expected a string");
      out.emplace(k, val.get<std::string>());
    }
    return {};
  }

  Result<TensorInfo> tensor(const std::string& name, const json& v) const {
    if (name.empty()) return err("empty tensor name");
    if (name.find('\0') != std::string::npos) return tensor_err(name, "name contains a NUL byte");
    if (!v.is_object())
      return tensor_err(name, std::string("entry is ") + kind(v) +
                                  ", expected an object with dtype, shape, data_offsets");
    for (const auto& [k, val] : v.items()) {
      (void)val;
      if (k != "dtype" && k != "shape" && k != "data_offsets")
        return tensor_err(
            name, "unknown key " + quote(k) + " (expected only dtype, shape, data_offsets)");
    }
    for (const char* k : {"dtype", "shape", "data_offsets"})
      if (!v.contains(k)) return tensor_err(name, std::string("missing '") + k + "'");

    TensorInfo t;
    t.name = name;
    const json& dt = v["dtype"];
    if (!dt.is_string())
      return tensor_err(name, std::string("dtype is ") + kind(dt) + ", expected a string");
    auto parsed = parse_dtype(dt.get_ref<const std::string&>());
    if (!parsed)
      return tensor_err(name, "unknown dtype " + quote(dt.get_ref<const std::string&>()));
    t.dtype = *parsed;

    const json& sh = v["shape"];
    if (!sh.is_array())
      return tensor_err(name, std::string("shape is ") + kind(sh) + ", expected an array");
    uint64_t numel = 1;
    bool overflow = false;
    for (size_t i = 0; i < sh.size(); ++i) {
      const json& d = sh[i];
      if (!d.is_number_unsigned() || d.get<uint64_t>() > static_cast<uint64_t>(kMaxI64))
        return tensor_err(name, "shape[" + std::to_string(i) + "] is " + show(d) +
                                    ", expected a non-negative integer");
      const auto dim = d.get<uint64_t>();
      t.shape.push_back(static_cast<int64_t>(dim));
      if (dim != 0 && numel > static_cast<uint64_t>(kMaxI64) / dim) overflow = true;
      numel *= dim;  // only meaningful when no overflow was seen
    }
    const uint64_t esize = dtype_size(t.dtype);
    if (std::count(t.shape.begin(), t.shape.end(), 0) > 0) {
      numel = 0;
      overflow = false;  // a zero dimension makes the product 0 whatever the others are
    }
    if (overflow || numel > std::numeric_limits<uint64_t>::max() / esize)
      return tensor_err(name, "shape " + shape_string(t.shape) + " of " +
                                  std::string(dtype_name(t.dtype)) +
                                  " overflows 64-bit byte counts");

    const json& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
        !off[1].is_number_unsigned())
      return tensor_err(
          name, "data_offsets is " + show(off) + ", expected [begin, end] non-negative integers");
    const auto begin = off[0].get<uint64_t>();
    const auto end = off[1].get<uint64_t>();
    const std::string offs =
        "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "]";
    if (begin > end) return tensor_err(name, offs + ": begin is after end");
    const uint64_t expected = numel * esize;
    if (end - begin != expected)
      return tensor_err(name, offs + " span " + std::to_string(end - begin) + " bytes, expected " +
                                  std::to_string(expected) + " (" +
                                  std::string(dtype_name(t.dtype)) + " " + shape_string(t.shape) +
                                  ")");
    t.begin = begin;  // relative for now; made absolute once data_start is known
    t.bytes = end - begin;
    return t;
  }

 private:
  std::string_view label_;
};

uint64_t read_le64(const std::byte* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint64_t>(p[i]);
  return v;
}

}  // namespace

int64_t TensorInfo::numel() const {
  for (int64_t d : shape)
    if (d == 0) return 0;  // the other dims may multiply past int64 (see parse)
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // validated at parse time not to overflow
  return n;
}

namespace {

// Validates the header held in `head` (the file's first bytes: all of them, or at least the
// length and the header) for a file of `file_size` bytes.
Result<SafetensorsHeader> parse_header(std::span<const std::byte> head, uint64_t file_size,
                                       std::string_view label) {
  HeaderParser p(label);
  if (file_size < 8)
    return p.err("file is " + std::to_string(file_size) +
                 " bytes, too short for the 8-byte header length");
  const uint64_t n = read_le64(head.data());
  if (n == 0) return p.err("header length is 0, expected a JSON object");
  if (n > kMaxHeaderBytes)
    return p.err("header length " + std::to_string(n) + " exceeds the limit of " +
                 std::to_string(kMaxHeaderBytes) + " bytes");
  if (n > file_size - 8)
    return p.err("header length " + std::to_string(n) + " does not fit in the file (" +
                 std::to_string(file_size - 8) + " bytes follow the length)");
  FERRY_CHECK(head.size() >= 8 + n, "parse_header: the header was not read");

  std::string_view text(reinterpret_cast<const char*>(head.data()) + 8, static_cast<size_t>(n));
  if (auto bad = strict_json::find_invalid_utf8(text))
    return p.err("header: not valid UTF-8 at byte " + std::to_string(*bad));
  if (text.front() != '{') return p.err("header does not start with '{'");
  const size_t last = text.find_last_not_of(' ');
  if (last == std::string_view::npos || text[last] != '}')
    return p.err("header does not end with '}' followed only by spaces (0x20) as padding");
  FERRY_ASSIGN_OR_RETURN(json root,
                         strict_json::parse(text.substr(0, last + 1), 3, label, "header"));
  if (!root.is_object()) return p.err("header is not a JSON object");

  SafetensorsHeader h;
  h.data_start = 8 + n;
  for (const auto& [key, value] : root.items()) {
    if (key == "__metadata__") {
      FERRY_RETURN_IF_ERROR(p.metadata(value, h.metadata));
      continue;
    }
    FERRY_ASSIGN_OR_RETURN(TensorInfo t, p.tensor(key, value));
    h.tensors.push_back(std::move(t));
  }

  std::sort(h.tensors.begin(), h.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    if (a.begin != b.begin) return a.begin < b.begin;
    if (a.bytes != b.bytes) return a.bytes < b.bytes;
    return a.name < b.name;
  });
  uint64_t end = 0;  // where the data covered so far ends
  const TensorInfo* prev = nullptr;
  for (const TensorInfo& t : h.tensors) {
    const std::string range =
        "[" + std::to_string(t.begin) + ", " + std::to_string(t.begin + t.bytes) + "]";
    if (t.begin < end)
      return p.tensor_err(t.name, "data_offsets " + range + " overlap tensor " + quote(prev->name) +
                                      " [" + std::to_string(prev->begin) + ", " +
                                      std::to_string(prev->begin + prev->bytes) + "]");
    if (t.begin > end)
      return p.tensor_err(t.name,
                          "data_offsets " + range + " leave a hole: the data before ends at " +
                              std::to_string(end) + ", expected begin " + std::to_string(end));
    end = t.begin + t.bytes;
    prev = &t;
  }
  const uint64_t data_bytes = file_size - h.data_start;
  if (end != data_bytes)
    return p.err("file size " + std::to_string(file_size) + " bytes does not match the " +
                 "header: tensor data ends at " + std::to_string(end) + ", so expected " +
                 std::to_string(h.data_start) + " + " + std::to_string(end) + " bytes");
  for (TensorInfo& t : h.tensors) t.begin += h.data_start;
  return h;
}

}  // namespace

Result<SafetensorsHeader> parse_safetensors(std::span<const std::byte> file,
                                            std::string_view label) {
  return parse_header(file, file.size(), label);
}

Result<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  FERRY_ASSIGN_OR_RETURN(MappedFile map, MappedFile::open(path));
  // The header is copied out of the mapping under a guard (the file may be truncated under it)
  // and parsed from the copy.
  const std::span<const std::byte> bytes = map.bytes();
  std::vector<std::byte> head(std::min<size_t>(bytes.size(), 8));
  if (!head.empty())
    FERRY_RETURN_IF_ERROR(guarded_copy(head.data(), bytes.data(), head.size(), map));
  if (head.size() == 8) {
    const uint64_t n = read_le64(head.data());
    if (n > 0 && n <= kMaxHeaderBytes && n <= bytes.size() - 8) {
      head.resize(8 + static_cast<size_t>(n));
      FERRY_RETURN_IF_ERROR(
          guarded_copy(head.data() + 8, bytes.data() + 8, static_cast<size_t>(n), map));
    }
  }
  FERRY_ASSIGN_OR_RETURN(SafetensorsHeader header, parse_header(head, bytes.size(), path));
  FERRY_RETURN_IF_ERROR(map.check_unchanged());
  SafetensorsFile f;
  f.map_ = std::move(map);
  f.header_ = std::move(header);
  for (size_t i = 0; i < f.header_.tensors.size(); ++i)
    f.by_name_.emplace(f.header_.tensors[i].name, i);
  return f;
}

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &header_.tensors[it->second];
}

std::span<const std::byte> SafetensorsFile::data(const TensorInfo& t) const {
  const auto bytes = map_.bytes();
  FERRY_CHECK(t.begin <= bytes.size() && t.bytes <= bytes.size() - t.begin,
              "tensor outside its file: " + t.name);
  return bytes.subspan(static_cast<size_t>(t.begin), static_cast<size_t>(t.bytes));
}

}  // namespace ferry
