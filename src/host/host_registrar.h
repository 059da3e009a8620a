// The checkpoint's mappings registered with the backend (Backend::register_host) in pieces:
// page-aligned ranges of each shard, so that copies out of the pieces already registered can run
// while the rest registers. Registering 22 GB of page cache takes the H200 host ~0.8 s, about as
// long as everything else a session does before its first inference; in pieces, the resident
// upload and the planning run under it (docs/byte_paths.md, "Registration in pieces").
//
// The first piece is registered by start() on the calling thread: a platform that refuses
// registration says so at once, and the first answer tells whether kernels may read the pieces
// in place. The others are registered by `threads` host threads in queue order (file order, with
// the pieces that prioritize() names moved to the front), or by start() itself when threads is 0.
// A piece refused part-way stops the registration: waits return the error from then on, and the
// owner releases every piece (after the copies out of them have completed) and falls back.
//
// Copies must not span two registrations (a DMA engine reads one registered range; across two the
// platform may take its slow pageable path): split() cuts copy lists where a piece ends.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"
#include "format/safetensors.h"
#include "host/host_copy.h"

namespace ferry {

struct RegistrationOptions {
  // Bytes per piece, rounded up to whole pages; 0: each shard in one piece (one call per shard).
  uint64_t piece_bytes = 0;
  // Host threads registering the pieces after the first; 0: start() registers every piece before
  // it returns (nothing overlaps).
  int threads = 0;
};

// What the registration did (seconds from the steady clock).
struct RegistrationStats {
  size_t pieces = 0;      // of every shard
  size_t registered = 0;  // registered so far
  uint64_t bytes = 0;     // of every piece
  int threads = 0;        // 0: all registered by start()
  // From the first piece's call to the end of the last one that has returned.
  double seconds = 0.0;
  // The calls' own times, summed (more than `seconds` when threads register at once).
  double call_seconds = 0.0;
  // What wait_for / wait_progress / wait_all blocked their callers for, summed.
  double waited_seconds = 0.0;
};

class HostRegistrar {
 public:
  // Splits every shard of `checkpoint` into pieces and registers the first; an unsupported error
  // with the platform's answer when refused (nothing is left registered). The checkpoint and the
  // backend must outlive the registrar; register_host must be callable from any thread.
  static Result<std::unique_ptr<HostRegistrar>> start(Backend& backend,
                                                      const Checkpoint& checkpoint,
                                                      const RegistrationOptions& options);
  // Stops the threads (a call in progress completes first), then releases every piece. Copies
  // out of the pieces must have completed.
  ~HostRegistrar();
  HostRegistrar(const HostRegistrar&) = delete;
  HostRegistrar& operator=(const HostRegistrar&) = delete;

  // Whether every piece under `copies` is registered (false after a failure).
  bool ready(std::span<const HostCopy> copies) const;
  // Pieces registered so far: what wait_progress waits to see grow.
  size_t registered() const;
  // Blocks until more than `seen` pieces are registered, or all are; the failure's error once a
  // piece was refused.
  Status wait_progress(size_t seen);
  // Blocks until every piece under `copies` is registered; the failure's error after a refusal.
  Status wait_for(std::span<const HostCopy> copies);
  // Blocks until every piece is registered; the failure's error after a refusal.
  Status wait_all();
  // The pieces under `copies` registered before the rest, in the order given (those registered or
  // being registered are skipped).
  void prioritize(std::span<const HostCopy> copies);
  // `copies` with every copy cut where a piece ends: each piece of the result lies in one
  // registration.
  std::vector<HostCopy> split(std::span<const HostCopy> copies) const;

  // A piece was refused after the first: the registrar stopped; failure() says which and why.
  bool failed() const;
  std::string failure() const;
  // Kernels may read the registered pieces at their host addresses (the first piece's answer;
  // every later piece must give the same).
  bool readable_in_place() const { return in_place_; }
  // The platform's answer for the first piece: "registered read-only (cudaHostRegister)".
  const std::string& how() const { return how_; }
  RegistrationStats stats() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Piece {
    const std::byte* begin = nullptr;
    uint64_t bytes = 0;
    std::string file;  // the shard's path, for messages
  };
  enum class State : uint8_t { pending, busy, registered, failed };

  HostRegistrar(Backend& backend, int threads) : backend_(backend), threads_(threads) {}
  // Registers piece `i` (the caller marked it busy); false when refused or the answer differs.
  // Takes the lock to publish the result.
  bool register_piece(size_t i);
  void work();
  // Indices of the pieces under [src, src + bytes), in order.
  void pieces_under(const std::byte* src, uint64_t bytes, std::vector<size_t>& out) const;
  bool ready_locked(std::span<const HostCopy> copies) const;
  Status failure_status_locked() const;

  Backend& backend_;
  int threads_ = 0;
  uint64_t piece_bytes_ = 0;  // page multiple; 0: whole shards
  std::vector<Piece> pieces_;
  // Per shard: its mapping's start and size, and its first piece.
  struct Shard {
    const std::byte* begin = nullptr;
    uint64_t bytes = 0;
    size_t first_piece = 0;
  };
  std::vector<Shard> shards_;
  bool in_place_ = false;
  std::string how_;

  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::vector<State> state_;
  std::vector<std::unique_ptr<HostRegistration>> handles_;  // per piece (null: nothing to undo)
  std::deque<size_t> queue_;                                // pending pieces, in order
  size_t registered_ = 0;
  bool stop_ = false;
  bool failed_ = false;
  std::string failure_;
  Clock::time_point first_call_{};
  Clock::time_point last_done_{};
  double call_seconds_ = 0.0;
  double waited_seconds_ = 0.0;
  std::vector<std::thread> workers_;
};

}  // namespace ferry
