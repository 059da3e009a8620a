#include "format/nonfinite_scan.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "format/fault_guard.h"

namespace ferry {
namespace {

// Pieces of at most 16 MiB, so that threads share a large tensor and a fault names its file.
constexpr size_t kPiece = size_t{16} << 20;

struct Piece {
  size_t entry;
  uint64_t offset;  // bytes into the tensor, a multiple of the element size
  uint64_t bytes;
};

struct ScanArgs {
  const std::byte* data;
  size_t bytes;
  DType dtype;
  uint64_t first_index;
  NonFiniteCount result;
};

void scan_piece(void* p) {
  auto* a = static_cast<ScanArgs*>(p);
  a->result = count_nonfinite(a->data, a->bytes, a->dtype, a->first_index);
}

}  // namespace

Result<NonFiniteScan> scan_nonfinite(const Checkpoint& checkpoint, unsigned threads) {
  const auto start = std::chrono::steady_clock::now();
  const auto& entries = checkpoint.entries();
  NonFiniteScan out;
  std::vector<Piece> pieces;
  for (size_t i = 0; i < entries.size(); ++i) {
    const TensorInfo& t = *entries[i].info;
    ++out.tensors;
    out.bytes += t.bytes;
    if (!can_be_nonfinite(t.dtype)) continue;
    out.scanned_bytes += t.bytes;
    const uint64_t step = kPiece / dtype_size(t.dtype) * dtype_size(t.dtype);
    for (uint64_t off = 0; off < t.bytes; off += step)
      pieces.push_back(Piece{i, off, std::min<uint64_t>(step, t.bytes - off)});
  }

  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  out.threads = static_cast<unsigned>(
      std::clamp<size_t>(threads == 0 ? hw : threads, 1, std::max<size_t>(pieces.size(), 1)));
  std::vector<NonFiniteCount> per_entry(entries.size());
  std::mutex mu;  // guards per_entry and failure
  Status failure;
  std::atomic<size_t> next{0};
  std::atomic<bool> stop{false};
  auto work = [&] {
    for (size_t k = next++; k < pieces.size() && !stop; k = next++) {
      const Piece& pc = pieces[k];
      const Checkpoint::Entry& e = entries[pc.entry];
      const auto data = checkpoint.data(e);
      ScanArgs args{data.data() + pc.offset,
                    static_cast<size_t>(pc.bytes),
                    e.info->dtype,
                    pc.offset / dtype_size(e.info->dtype),
                    {}};
      const std::optional<const void*> fault = run_guarded(scan_piece, &args);
      std::lock_guard<std::mutex> lock(mu);
      if (fault) {
        if (failure.ok()) failure = mapped_fault_error(checkpoint.mapping(e), *fault);
        stop = true;
        return;
      }
      NonFiniteCount& c = per_entry[pc.entry];
      c.nan += args.result.nan;
      c.inf += args.result.inf;
      c.first = std::min(c.first, args.result.first);
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < out.threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  FERRY_RETURN_IF_ERROR(failure);
  // Bytes read while the file was being rewritten in place would be a mix: say so instead.
  FERRY_RETURN_IF_ERROR(checkpoint.check_unchanged());

  for (size_t i = 0; i < entries.size(); ++i) {
    if (per_entry[i].total() == 0) continue;
    out.damaged.push_back(DamagedTensor{entries[i].info->name,
                                        checkpoint.files()[entries[i].shard].path(),
                                        entries[i].info->dtype, per_entry[i]});
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

std::string describe_damage(const DamagedTensor& d) {
  return "tensor " + d.name + " (" + std::string(dtype_name(d.dtype)) + ", in " + d.file +
         "): " + std::to_string(d.count.nan) + " NaN, " + std::to_string(d.count.inf) +
         " Inf, the first at element " + std::to_string(d.count.first);
}

}  // namespace ferry
