#include "api/npy.h"

#include <cstring>
#include <fstream>

#include "format/atomic_write.h"

namespace ferry {

namespace {

Status write_raw(const std::string& path, const char* descr, const void* data, size_t elem_size,
                 size_t count, const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (n != static_cast<int64_t>(count)) {
    return make_error(ErrorCode::internal, "npy: shape does not match the data for " + path);
  }
  std::string dims;
  for (size_t i = 0; i < shape.size(); ++i) dims += std::to_string(shape[i]) + ", ";
  if (shape.size() > 1) dims.resize(dims.size() - 2);  // "(3,)" for 1-D, "(2, 3)" otherwise
  std::string header =
      std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Magic (6) + version (2) + length (2) + header + '\n', padded to a multiple of 64.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  // Beside the target, renamed over it when complete (format/atomic_write.h).
  FERRY_ASSIGN_OR_RETURN(AtomicFile f, AtomicFile::create(path));
  const unsigned char magic[8] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  const auto len = static_cast<uint16_t>(header.size());
  const unsigned char len_le[2] = {static_cast<unsigned char>(len & 0xff),
                                   static_cast<unsigned char>(len >> 8)};
  FERRY_RETURN_IF_ERROR(f.write(magic, sizeof magic));
  FERRY_RETURN_IF_ERROR(f.write(len_le, sizeof len_le));
  FERRY_RETURN_IF_ERROR(f.write(header.data(), header.size()));
  FERRY_RETURN_IF_ERROR(f.write(data, elem_size * count));
  return f.commit();
}

}  // namespace

Status write_npy(const std::string& path, std::span<const float> data, std::vector<int64_t> shape) {
  return write_raw(path, "<f4", data.data(), sizeof(float), data.size(), shape);
}
Status write_npy(const std::string& path, std::span<const int32_t> data,
                 std::vector<int64_t> shape) {
  return write_raw(path, "<i4", data.data(), sizeof(int32_t), data.size(), shape);
}
Status write_npy(const std::string& path, std::span<const int64_t> data,
                 std::vector<int64_t> shape) {
  return write_raw(path, "<i8", data.data(), sizeof(int64_t), data.size(), shape);
}
Status write_npy(const std::string& path, std::span<const uint8_t> data,
                 std::vector<int64_t> shape) {
  return write_raw(path, "|u1", data.data(), 1, data.size(), shape);
}

namespace {

// The header dictionary: {'descr': '<f8', 'fortran_order': False, 'shape': (16, 3), } with the
// keys in any order; nothing else is accepted.
struct NpyHeader {
  std::string descr;
  bool fortran = false;
  std::vector<int64_t> shape;
};

class HeaderParser {
 public:
  explicit HeaderParser(std::string_view s) : s_(s) {}

  Result<NpyHeader> parse() {
    NpyHeader h;
    bool seen[3] = {false, false, false};
    skip_space();
    if (!eat('{')) return fail("expected '{'");
    for (;;) {
      skip_space();
      if (eat('}')) break;
      std::string key;
      if (!quoted(key)) return fail("expected a quoted key");
      skip_space();
      if (!eat(':')) return fail("expected ':'");
      skip_space();
      int which = key == "descr" ? 0 : key == "fortran_order" ? 1 : key == "shape" ? 2 : -1;
      if (which < 0) return fail("unknown key '" + key + "'");
      if (seen[which]) return fail("key '" + key + "' twice");
      seen[which] = true;
      if (which == 0 && !quoted(h.descr)) return fail("descr is not a string");
      if (which == 1) {
        if (word("True")) {
          h.fortran = true;
        } else if (!word("False")) {
          return fail("fortran_order is not True or False");
        }
      }
      if (which == 2 && !tuple(h.shape)) return fail("shape is not a tuple of integers");
      skip_space();
      if (!eat(',')) {
        skip_space();
        if (!eat('}')) return fail("expected ',' or '}'");
        break;
      }
    }
    skip_space();
    if (pos_ != s_.size()) return fail("text after the dictionary");
    if (!seen[0] || !seen[1] || !seen[2]) return fail("descr, fortran_order and shape required");
    return h;
  }

 private:
  Error fail(const std::string& msg) const {
    return make_error(ErrorCode::format, "header: " + msg);
  }
  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t')) ++pos_;
  }
  bool eat(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool word(std::string_view w) {
    if (s_.substr(pos_, w.size()) != w) return false;
    pos_ += w.size();
    return true;
  }
  bool quoted(std::string& out) {
    if (!eat('\'')) return false;
    const size_t end = s_.find('\'', pos_);
    if (end == std::string_view::npos || end - pos_ > 64) return false;
    out = std::string(s_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return true;
  }
  bool tuple(std::vector<int64_t>& dims) {
    if (!eat('(')) return false;
    for (;;) {
      skip_space();
      if (eat(')')) return true;
      if (dims.size() >= 8 || pos_ >= s_.size() || s_[pos_] < '0' || s_[pos_] > '9') return false;
      int64_t v = 0;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
        if (v > (int64_t{1} << 40)) return false;
        v = v * 10 + (s_[pos_++] - '0');
      }
      dims.push_back(v);
      skip_space();
      if (!eat(',')) {
        skip_space();
        return eat(')');
      }
    }
  }

  std::string_view s_;
  size_t pos_ = 0;
};

template <typename T>
double load_le(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);  // little-endian hosts only (x86-64, aarch64)
  return static_cast<double>(v);
}

}  // namespace

Result<NpyArray> parse_npy(std::string_view bytes, const std::string& label, size_t max_values) {
  auto bad = [&](const std::string& msg) {
    return make_error(ErrorCode::format,
                      label + ": not a .npy file this reader takes (" + msg + ")");
  };
  if (bytes.size() < 10 || bytes.substr(0, 6) != "\x93NUMPY") return bad("no .npy magic");
  const auto major = static_cast<unsigned char>(bytes[6]);
  size_t header_len = 0, start = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) |
                 static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8;
    start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return bad("truncated header");
    for (int i = 3; i >= 0; --i)
      header_len = header_len << 8 | static_cast<unsigned char>(bytes[8 + static_cast<size_t>(i)]);
    start = 12;
  } else {
    return bad("format version " + std::to_string(major));
  }
  if (header_len > 65536 || start + header_len > bytes.size()) return bad("truncated header");
  Result<NpyHeader> hr = HeaderParser(bytes.substr(start, header_len)).parse();
  if (!hr.ok()) return bad(hr.error().message);
  const NpyHeader& h = *hr;
  if (h.fortran) return bad("Fortran order");
  size_t count = 1;
  for (int64_t d : h.shape) {
    if (d != 0 && count > max_values / static_cast<size_t>(d)) {
      return bad("more than " + std::to_string(max_values) + " values");
    }
    count *= static_cast<size_t>(d);
  }
  const std::string& t = h.descr;
  const bool little = t.size() >= 3 && (t[0] == '<' || (t[0] == '|' && t.substr(2) == "1"));
  const std::string kind = t.size() >= 3 ? t.substr(1) : t;
  double (*load)(const char*) = nullptr;
  size_t size = 0;
  if (little) {
    if (kind == "f4") load = load_le<float>, size = 4;
    if (kind == "f8") load = load_le<double>, size = 8;
    if (kind == "i1") load = load_le<int8_t>, size = 1;
    if (kind == "i2") load = load_le<int16_t>, size = 2;
    if (kind == "i4") load = load_le<int32_t>, size = 4;
    if (kind == "i8") load = load_le<int64_t>, size = 8;
    if (kind == "u1") load = load_le<uint8_t>, size = 1;
    if (kind == "u2") load = load_le<uint16_t>, size = 2;
    if (kind == "u4") load = load_le<uint32_t>, size = 4;
    if (kind == "u8") load = load_le<uint64_t>, size = 8;
  }
  if (load == nullptr) return bad("dtype '" + t + "'");
  const std::string_view data = bytes.substr(start + header_len);
  if (data.size() != count * size) {
    return bad(std::to_string(data.size()) + " data bytes for " + std::to_string(count) +
               " values of " + std::to_string(size) + " bytes");
  }
  NpyArray a;
  a.shape = h.shape;
  a.values.resize(count);
  for (size_t i = 0; i < count; ++i) a.values[i] = load(data.data() + i * size);
  return a;
}

Result<NpyArray> read_npy(const std::string& path, size_t max_values) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) return make_error(ErrorCode::io, path + ": cannot open");
  const std::streamoff size = f.tellg();
  if (size < 0 || static_cast<uint64_t>(size) > 65536 + 64 + uint64_t{max_values} * 8) {
    return make_error(ErrorCode::format,
                      path + ": too large for " + std::to_string(max_values) + " values");
  }
  std::string bytes(static_cast<size_t>(size), '\0');
  f.seekg(0);
  if (!f.read(bytes.data(), size)) return make_error(ErrorCode::io, path + ": read failed");
  return parse_npy(bytes, path, max_values);
}

}  // namespace ferry
