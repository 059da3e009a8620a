#include "host/bounce_ring.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "format/fault_guard.h"

namespace ferry {
namespace {

// Below this a range is copied by one thread: waking the others costs more than it saves.
constexpr size_t kSplitBytes = size_t{1} << 20;
constexpr size_t kPage = 4096;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

FillCrew::FillCrew(int threads) {
  const size_t n = static_cast<size_t>(std::max(1, threads));
  results_.resize(n);
  for (size_t i = 1; i < n; ++i) helpers_.emplace_back([this, i] { loop(i); });
}

FillCrew::~FillCrew() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : helpers_) t.join();
}

Status FillCrew::part(size_t index) {
  const size_t n = results_.size();
  const size_t per = (bytes_ / n + kPage - 1) / kPage * kPage;
  const size_t begin = std::min(bytes_, index * per);
  const size_t end = index + 1 == n ? bytes_ : std::min(bytes_, begin + per);
  if (end <= begin) return {};
  if (reader_ == nullptr) return guarded_copy(dst_ + begin, src_ + begin, end - begin, *file_);
  const uint64_t need = need_ > begin ? std::min<uint64_t>(need_ - begin, end - begin) : 0;
  return reader_->read_aligned(*file_, offset_ + begin, end - begin, need, dst_ + begin);
}

void FillCrew::loop(size_t index) {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      work_cv_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
    }
    Status s = part(index);
    bool last = false;
    {
      std::lock_guard lock(mutex_);
      results_[index] = std::move(s);
      last = --pending_ == 0;
    }
    if (last) done_cv_.notify_all();
  }
}

Status FillCrew::copy(void* dst, const std::byte* src, size_t bytes, const MappedFile& file) {
  if (helpers_.empty() || bytes < kSplitBytes) return guarded_copy(dst, src, bytes, file);
  {
    std::lock_guard lock(mutex_);
    dst_ = static_cast<std::byte*>(dst);
    src_ = src;
    reader_ = nullptr;
    file_ = &file;
  }
  return run(bytes);
}

Status FillCrew::read(void* dst, StorageReader& reader, const MappedFile& file, uint64_t offset,
                      uint64_t bytes, uint64_t need) {
  if (helpers_.empty() || bytes < kSplitBytes) {
    return reader.read_aligned(file, offset, bytes, need, static_cast<std::byte*>(dst));
  }
  {
    std::lock_guard lock(mutex_);
    dst_ = static_cast<std::byte*>(dst);
    reader_ = &reader;
    offset_ = offset;
    need_ = need;
    file_ = &file;
  }
  return run(static_cast<size_t>(bytes));
}

Status FillCrew::run(size_t bytes) {
  {
    std::lock_guard lock(mutex_);
    bytes_ = bytes;
    pending_ = helpers_.size();
    ++generation_;
  }
  work_cv_.notify_all();
  Status mine = part(0);
  std::unique_lock lock(mutex_);
  done_cv_.wait(lock, [&] { return pending_ == 0; });
  if (!mine.ok()) return mine;
  for (size_t i = 1; i < results_.size(); ++i) {
    if (!results_[i].ok()) return results_[i];
  }
  return {};
}

BounceRing::BounceRing(Backend& backend, const BounceOptions& options)
    : backend_(backend), options_(options), rng_(options.delay_seed) {}

Result<std::unique_ptr<BounceRing>> BounceRing::create(Backend& backend,
                                                       const BounceOptions& options) {
  if (options.buffers < 2 || options.buffers > 64) {
    return make_error(ErrorCode::invalid_argument,
                      "bounce ring: 2 to 64 buffers, not " + std::to_string(options.buffers));
  }
  // Storage reads take the aligned range around a piece: up to a page more on each side.
  const size_t least = options.source == BounceSource::storage ? 4 * kPage : kPage;
  if (options.buffer_bytes < least) {
    return make_error(
        ErrorCode::invalid_argument,
        "bounce ring: buffers of at least " + std::to_string(least >> 10) + " KiB for this source");
  }
  std::unique_ptr<BounceRing> r(new BounceRing(backend, options));
  r->buffer_bytes_ = options.buffer_bytes;
  if (options.source == BounceSource::storage) {
    r->reader_ = std::make_unique<StorageReader>(options.direct_io);
  }
  for (int i = 0; i < options.buffers; ++i) {
    // A page more, so that each buffer has a page-aligned start for direct reads.
    auto buf = backend.allocate_host(options.buffer_bytes + kPage);
    if (!buf.ok()) {
      return make_error(buf.error().code, "bounce ring: " + buf.error().message);
    }
    auto* raw = static_cast<std::byte*>(buf.value().data());
    const uintptr_t at = reinterpret_cast<uintptr_t>(raw);
    r->data_.push_back(raw + ((kPage - at % kPage) % kPage));
    r->buffers_.push_back(std::move(buf).value());
    r->drained_.push_back(backend.create_event());
    r->in_flight_.push_back(false);
  }
  int threads = options.fill_threads;
  if (threads <= 0) threads = static_cast<int>(std::min(4u, std::thread::hardware_concurrency()));
  r->crew_ = std::make_unique<FillCrew>(threads);
  return r;
}

BounceRing::~BounceRing() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  if (worker_.joinable()) worker_.join();
  // The buffers are freed with the ring: no DMA may still read one.
  for (size_t b = 0; b < buffers_.size(); ++b) {
    if (in_flight_[b]) (void)backend_.synchronize(*drained_[b]);
  }
}

Status BounceRing::enqueue(Stream& stream, void* dst, std::span<const HostCopy> copies) {
  BounceStats add;
  Status status;
  const bool storage = options_.source == BounceSource::storage;
  // A storage read covers the piece's aligned range: pieces leave room for a page each side.
  const size_t piece = storage ? buffer_bytes_ - 2 * kPage : buffer_bytes_;
  for (const HostCopy& c : copies) {
    for (uint64_t off = 0; off < c.bytes && status.ok();) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(piece, c.bytes - off));
      const size_t b = next_buffer_;
      next_buffer_ = (b + 1) % buffers_.size();
      if (in_flight_[b]) {
        const auto t0 = std::chrono::steady_clock::now();
        in_flight_[b] = false;
        status = backend_.synchronize(*drained_[b]);
        add.drain_seconds += seconds_since(t0);
        if (!status.ok()) break;
      }
      if (options_.max_fill_delay_us > 0) {
        const auto us = rng_() % static_cast<uint64_t>(options_.max_fill_delay_us + 1);
        std::this_thread::sleep_for(std::chrono::microseconds(us));
      }
      const auto t0 = std::chrono::steady_clock::now();
      const std::byte* from = data_[b];
      if (storage) {
        const uint64_t at = static_cast<uint64_t>(c.src - c.file->bytes().data()) + off;
        const AlignedRange r = aligned_range(at, n);
        status = crew_->read(data_[b], *reader_, *c.file, r.offset, r.bytes, r.head + n);
        from += r.head;
        add.read_bytes += r.bytes;
      } else {
        status = crew_->copy(data_[b], c.src + off, n, *c.file);
      }
      add.fill_seconds += seconds_since(t0);
      if (!status.ok()) break;
      backend_.copy_to_device(stream, static_cast<char*>(dst) + c.dst_offset + off, from, n);
      backend_.record(*drained_[b], stream);
      in_flight_[b] = true;
      add.bytes += n;
      ++add.chunks;
      off += n;
    }
    if (!status.ok()) break;
  }
  std::lock_guard lock(mutex_);
  stats_.bytes += add.bytes;
  stats_.chunks += add.chunks;
  stats_.fill_seconds += add.fill_seconds;
  stats_.drain_seconds += add.drain_seconds;
  stats_.read_bytes += add.read_bytes;
  return status;
}

Status BounceRing::copy(Stream& stream, void* dst, std::span<const HostCopy> copies) {
  {
    std::lock_guard lock(mutex_);
    if (enqueued_ != submitted_) {
      return make_error(ErrorCode::internal, "bounce ring: copy() while jobs are pending");
    }
  }
  std::lock_guard fill(fill_mutex_);
  return enqueue(stream, dst, copies);
}

uint64_t BounceRing::submit(const Job& job) {
  uint64_t ticket = 0;
  {
    std::lock_guard lock(mutex_);
    if (!worker_.joinable()) worker_ = std::thread([this] { loop(); });
    queue_.push_back(job);
    ticket = ++submitted_;
  }
  work_cv_.notify_one();
  return ticket;
}

void BounceRing::loop() {
  for (;;) {
    Job job;
    bool failed = false;
    {
      std::unique_lock lock(mutex_);
      work_cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and every job is enqueued
      job = queue_.front();
      queue_.pop_front();
      failed = !error_.ok();
    }
    Status s;
    if (job.after != nullptr) backend_.wait(*job.stream, *job.after);
    if (!failed) {
      if (job.poison_bytes > 0) backend_.fill_byte(*job.stream, job.dst, 0xff, job.poison_bytes);
      std::lock_guard fill(fill_mutex_);
      s = enqueue(*job.stream, job.dst, job.copies);
    }
    if (job.done != nullptr) backend_.record(*job.done, *job.stream);
    {
      std::lock_guard lock(mutex_);
      ++enqueued_;
      if (!s.ok() && error_.ok()) error_ = std::move(s);
    }
    done_cv_.notify_all();
  }
}

Status BounceRing::wait_enqueued(uint64_t ticket) {
  std::unique_lock lock(mutex_);
  done_cv_.wait(lock, [&] { return enqueued_ >= ticket; });
  return error_;
}

void BounceRing::drain() {
  std::unique_lock lock(mutex_);
  done_cv_.wait(lock, [&] { return enqueued_ >= submitted_; });
  error_ = Status();
}

BounceStats BounceRing::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace ferry
