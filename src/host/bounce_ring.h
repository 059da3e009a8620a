// The bounce ring: how mapped weight bytes reach the device where the mapping itself cannot be
// registered (a platform that refuses cudaHostRegister on file pages), or should not be touched
// (a checkpoint not in the page cache). A few page-locked buffers (Backend::allocate_host),
// filled by host threads, each then copied to the device by the copy engine while the threads
// fill the next. The ring is small (64 MiB by default) whatever the model: never a second host
// copy of the weights. Two ways to fill a buffer:
// - out of the mapping, with guarded copies (format/fault_guard.h: a file truncated under the
//   copy is an error naming it, not a SIGBUS): the bytes come from the page cache;
// - from storage, with large reads (host/storage_reader.h, O_DIRECT where the file system allows
//   it) of the 4 KiB-aligned range around each piece: no page faults, and the page cache is left
//   alone, so a checkpoint larger than the host's memory streams at the storage's rate.
//
// Two ways to use it:
// - copy(): on the calling thread. Fills a buffer, enqueues its DMA, moves to the next buffer
//   (waiting on the host for the DMA that last read it). Loads of resident groups, and the
//   sequential mode, where each copy is enqueued just before its call anyway.
// - submit() / wait_enqueued(): jobs run in order on the ring's own worker thread, which enqueues
//   each job's work on the job's stream: a wait for `after`, the copies, a record of `done`. The
//   pipelined executor submits a slot's copy as soon as the slot's previous user is enqueued and,
//   before its compute stream waits on `done`, waits on the host until the job has been enqueued
//   (wait_enqueued): a stream wait only orders after a record already made, so the wait must come
//   after the record. That host wait is the price of the fallback; the registered path has none.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <span>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"
#include "host/host_copy.h"
#include "host/storage_reader.h"

namespace ferry {

enum class BounceSource : uint8_t {
  mapping,  // guarded copies out of the mapping
  storage,  // reads of the files (host/storage_reader.h)
};

struct BounceOptions {
  size_t buffer_bytes = size_t{16} << 20;  // each buffer; larger copies go in pieces
  int buffers = 4;
  int fill_threads = 0;  // host threads filling one buffer together; 0: min(4, hardware threads)
  BounceSource source = BounceSource::mapping;
  bool direct_io = true;  // storage source: ask for O_DIRECT (false: plain preads)
  // Tests: the worker sleeps a random 0..max_fill_delay_us before each fill (seeded), so that a
  // compute stream that does not wait for a job shows it.
  int max_fill_delay_us = 0;
  uint64_t delay_seed = 1;
};

struct BounceStats {
  uint64_t bytes = 0;          // bytes that went through the buffers
  uint64_t chunks = 0;         // buffer fills
  double fill_seconds = 0.0;   // host time filling buffers (guarded copies or storage reads)
  double drain_seconds = 0.0;  // host time waiting for a buffer's previous DMA to finish
  uint64_t read_bytes = 0;     // storage source: bytes read (the aligned ranges)
};

// Threads that fill the parts of one range at once: the page cache is read faster by a few cores
// than by one, and storage serves several reads in flight faster than one. Parts are 4 KiB
// aligned; each is a guarded copy, or a read, on its own thread.
class FillCrew {
 public:
  explicit FillCrew(int threads);  // threads - 1 helpers; the calling thread does a part too
  ~FillCrew();
  FillCrew(const FillCrew&) = delete;
  FillCrew& operator=(const FillCrew&) = delete;

  // `bytes` from the mapping at `src` into `dst`.
  Status copy(void* dst, const std::byte* src, size_t bytes, const MappedFile& file);
  // The aligned range [offset, offset + bytes) of `file` into `dst` (aligned) with `reader`;
  // its first `need` bytes must exist (StorageReader::read_aligned).
  Status read(void* dst, StorageReader& reader, const MappedFile& file, uint64_t offset,
              uint64_t bytes, uint64_t need);
  int threads() const { return static_cast<int>(helpers_.size()) + 1; }

 private:
  Status run(size_t bytes);
  Status part(size_t index);
  void loop(size_t index);

  std::mutex mutex_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  uint64_t generation_ = 0;
  size_t pending_ = 0;
  bool stopping_ = false;
  std::byte* dst_ = nullptr;
  const std::byte* src_ = nullptr;   // copy: the mapping
  StorageReader* reader_ = nullptr;  // read: the reader, file offset and bytes that must exist
  uint64_t offset_ = 0;
  uint64_t need_ = 0;
  size_t bytes_ = 0;
  const MappedFile* file_ = nullptr;
  std::vector<Status> results_;  // one per part
  std::vector<std::thread> helpers_;
};

class BounceRing {
 public:
  static Result<std::unique_ptr<BounceRing>> create(Backend& backend, const BounceOptions& options);
  // Stops the worker after the jobs already submitted, and waits until no DMA reads a buffer.
  ~BounceRing();
  BounceRing(const BounceRing&) = delete;
  BounceRing& operator=(const BounceRing&) = delete;

  // Enqueues on `stream` the copies of `copies` into device memory at `dst` + their offsets,
  // through the buffers, on the calling thread. Returns once everything is enqueued (the DMAs
  // may still run: synchronize the stream before trusting `dst`). Not while jobs are pending.
  Status copy(Stream& stream, void* dst, std::span<const HostCopy> copies);

  struct Job {
    Stream* stream = nullptr;
    Event* after = nullptr;  // the stream waits for it first (null: no wait)
    Event* done = nullptr;   // recorded on the stream after the copies (null: none)
    void* dst = nullptr;
    std::span<const HostCopy> copies;  // must stay valid until the job is enqueued
    uint64_t poison_bytes = 0;         // tests: 0xff over dst first (after `after`)
  };
  // Queues a job for the worker; returns its ticket (increasing from 1).
  uint64_t submit(const Job& job);
  // Blocks until the job with this ticket has been enqueued on its stream; the first error of
  // any job so far (a checkpoint truncated under a fill) comes back here. After an error, later
  // jobs still record their `done` events, so that no stream waits forever.
  Status wait_enqueued(uint64_t ticket);
  // Blocks until every submitted job has been enqueued; clears a stored error.
  void drain();

  BounceStats stats() const;
  size_t buffer_bytes() const { return buffer_bytes_; }
  int buffers() const { return static_cast<int>(buffers_.size()); }
  int fill_threads() const { return crew_->threads(); }
  BounceSource source() const { return options_.source; }
  // The storage source's reader (null for the mapping): whether it reads with O_DIRECT.
  StorageReader* reader() const { return reader_.get(); }

 private:
  BounceRing(Backend& backend, const BounceOptions& options);
  Status enqueue(Stream& stream, void* dst, std::span<const HostCopy> copies);
  void loop();

  Backend& backend_;
  BounceOptions options_;
  size_t buffer_bytes_ = 0;
  std::vector<HostBuffer> buffers_;
  std::vector<std::byte*> data_;  // each buffer's first 4 KiB-aligned byte
  std::unique_ptr<StorageReader> reader_;
  std::vector<std::unique_ptr<Event>> drained_;  // recorded after each buffer's DMA
  std::vector<bool> in_flight_;
  size_t next_buffer_ = 0;
  std::unique_ptr<FillCrew> crew_;
  std::mt19937_64 rng_;
  std::mutex fill_mutex_;  // one filler at a time (the worker, or a copy() caller)

  mutable std::mutex mutex_;  // guards what follows
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  std::deque<Job> queue_;
  uint64_t submitted_ = 0;
  uint64_t enqueued_ = 0;
  Status error_;
  bool stopping_ = false;
  BounceStats stats_;
  std::thread worker_;  // started at the first submit
};

}  // namespace ferry
