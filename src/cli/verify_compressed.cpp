#include "cli/verify_compressed.h"

#include <chrono>
#include <cstring>
#include <thread>

#include "core/thread_pool.h"
#include "format/fault_guard.h"
#include "model/compressed_checkpoint.h"

namespace ferry::cli {
namespace {

// Values of a BF16, F16 or F32 byte range whose exponent bits are all ones (NaN or Inf).
uint64_t count_nonfinite(DType dtype, const uint8_t* p, uint64_t bytes) {
  uint64_t n = 0;
  if (dtype == DType::bf16 || dtype == DType::f16) {
    const uint16_t mask = dtype == DType::bf16 ? 0x7f80 : 0x7c00;
    for (uint64_t i = 0; i + 2 <= bytes; i += 2) {
      uint16_t v;
      std::memcpy(&v, p + i, 2);
      n += (v & mask) == mask;
    }
  } else if (dtype == DType::f32) {
    for (uint64_t i = 0; i + 4 <= bytes; i += 4) {
      uint32_t v;
      std::memcpy(&v, p + i, 4);
      n += (v & 0x7f800000u) == 0x7f800000u;
    }
  }
  return n;
}

}  // namespace

Result<CompressedVerifyReport> verify_compressed(const std::string& path, unsigned threads) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Error> damaged;
  FERRY_ASSIGN_OR_RETURN(OpenContainer c, open_container(path, &damaged));
  CompressedVerifyReport r;
  for (const Error& e : damaged) r.damaged_groups.push_back(e.message);
  r.path = path;
  r.groups = c.table.groups.size();
  r.tensors = c.table.tensors.size();
  ThreadPool pool(static_cast<int>(threads));
  r.threads = static_cast<unsigned>(pool.threads());
  std::vector<uint64_t> nonfinite(c.table.tensors.size(), 0);
  std::vector<uint8_t> decoded;
  for (size_t g = 0; g < c.table.groups.size(); ++g) {
    r.compressed_bytes += c.table.groups[g].info->bytes;
    r.decoded_bytes += c.table.groups[g].decoded_bytes;
    if (c.group_bytes[g].empty()) continue;  // its layout is damaged: reported above
    decoded.resize(c.table.groups[g].decoded_bytes);
    if (Status s = decode_container_group(c, g, decoded, &pool); !s.ok()) {
      if (s.error().code == ErrorCode::io) return s.error();  // the file changed under us
      r.damaged_groups.push_back(s.error().message);
      continue;
    }
    for (size_t t = 0; t < c.table.tensors.size(); ++t) {
      const ContainerTensor& tensor = c.table.tensors[t];
      for (const TensorPiece& p : tensor.pieces) {
        if (p.group == g)
          nonfinite[t] += count_nonfinite(tensor.dtype, decoded.data() + p.offset, p.bytes);
      }
    }
  }
  for (size_t t = 0; t < c.table.tensors.size(); ++t) {
    const ContainerTensor& tensor = c.table.tensors[t];
    if (tensor.stored && tensor.bytes > 0) {
      std::vector<uint8_t> raw(tensor.bytes);
      const auto src = c.file.data(*tensor.info);
      FERRY_RETURN_IF_ERROR(guarded_copy(raw.data(), src.data(), raw.size(), c.file.mapping()));
      nonfinite[t] += count_nonfinite(tensor.dtype, raw.data(), raw.size());
    }
    if (nonfinite[t] > 0) {
      r.nonfinite_tensors.push_back("tensor " + tensor.name + " (" +
                                    std::string(dtype_name(tensor.dtype)) +
                                    "): " + std::to_string(nonfinite[t]) + " NaN or Inf");
    }
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace ferry::cli
