#include "cli/npy.h"

#include <cstdio>
#include <memory>

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
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!f) return make_error(ErrorCode::io, "cannot open " + path + " for writing");
  const unsigned char magic[8] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  const auto len = static_cast<uint16_t>(header.size());
  const unsigned char len_le[2] = {static_cast<unsigned char>(len & 0xff),
                                   static_cast<unsigned char>(len >> 8)};
  bool ok = std::fwrite(magic, 1, 8, f.get()) == 8 && std::fwrite(len_le, 1, 2, f.get()) == 2 &&
            std::fwrite(header.data(), 1, header.size(), f.get()) == header.size() &&
            (count == 0 || std::fwrite(data, elem_size, count, f.get()) == count);
  if (std::fclose(f.release()) != 0) ok = false;
  if (!ok) return make_error(ErrorCode::io, "write failed: " + path);
  return {};
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

}  // namespace ferry
