#include "cli/npy.h"

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

}  // namespace ferry
