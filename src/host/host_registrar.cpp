#include "host/host_registrar.h"

#include <unistd.h>

#include <algorithm>
#include <utility>

namespace ferry {

namespace {

constexpr int kMaxThreads = 64;

uint64_t page_bytes() {
  const long p = ::sysconf(_SC_PAGESIZE);
  return p > 0 ? static_cast<uint64_t>(p) : 4096;
}

double seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

Result<std::unique_ptr<HostRegistrar>> HostRegistrar::start(Backend& backend,
                                                            const Checkpoint& checkpoint,
                                                            const RegistrationOptions& options) {
  if (options.threads < 0 || options.threads > kMaxThreads) {
    return make_error(ErrorCode::invalid_argument, "registration threads: expected 0 to " +
                                                       std::to_string(kMaxThreads) + ", got " +
                                                       std::to_string(options.threads));
  }
  std::unique_ptr<HostRegistrar> r(new HostRegistrar(backend, options.threads));
  if (options.piece_bytes > 0) {
    const uint64_t page = page_bytes();
    const uint64_t most = UINT64_MAX / 2;  // no overflow rounding up
    const uint64_t want = std::min(options.piece_bytes, most);
    r->piece_bytes_ = (want + page - 1) / page * page;
  }
  for (const SafetensorsFile& f : checkpoint.files()) {
    const std::span<const std::byte> bytes = f.file_bytes();
    r->shards_.push_back(Shard{bytes.data(), bytes.size(), r->pieces_.size()});
    const uint64_t step = r->piece_bytes_ > 0 ? r->piece_bytes_ : bytes.size();
    for (uint64_t off = 0; off < bytes.size(); off += step) {
      r->pieces_.push_back(Piece{bytes.data() + off, std::min(step, bytes.size() - off), f.path()});
    }
  }
  const size_t n = r->pieces_.size();
  r->state_.assign(n, State::pending);
  r->handles_.resize(n);
  if (n == 0) {
    r->in_place_ = true;
    r->how_ = "nothing to register";
    return r;
  }
  // The first piece here: a refusal is known before anything else starts.
  const Piece& first = r->pieces_[0];
  r->first_call_ = Clock::now();
  Backend::HostRegistrationResult res = backend.register_host(first.begin, first.bytes);
  r->last_done_ = Clock::now();
  r->call_seconds_ = seconds(r->last_done_ - r->first_call_);
  if (!res.registered) return make_error(ErrorCode::unsupported, first.file + ": " + res.how);
  r->in_place_ = res.readable_in_place;
  r->how_ = res.how;
  r->handles_[0] = std::move(res.handle);
  r->state_[0] = State::registered;
  r->registered_ = 1;
  for (size_t i = 1; i < n; ++i) r->queue_.push_back(i);
  if (options.threads == 0) {
    r->work();
    if (r->failed_) return make_error(ErrorCode::unsupported, r->failure_);
    return r;
  }
  const size_t threads = std::min(static_cast<size_t>(options.threads), n - 1);
  for (size_t t = 0; t < threads; ++t) r->workers_.emplace_back([p = r.get()] { p->work(); });
  return r;
}

HostRegistrar::~HostRegistrar() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  changed_.notify_all();
  for (std::thread& t : workers_) t.join();
  // Last registered, first released.
  for (size_t i = handles_.size(); i-- > 0;) handles_[i].reset();
}

void HostRegistrar::work() {
  std::unique_lock<std::mutex> lk(mu_);
  while (!stop_ && !failed_ && !queue_.empty()) {
    const size_t i = queue_.front();
    queue_.pop_front();
    state_[i] = State::busy;
    lk.unlock();
    register_piece(i);
    lk.lock();
  }
}

bool HostRegistrar::register_piece(size_t i) {
  const Piece& p = pieces_[i];  // pieces_ does not change after start()
  const Clock::time_point t0 = Clock::now();
  Backend::HostRegistrationResult res = backend_.register_host(p.begin, p.bytes);
  const Clock::time_point t1 = Clock::now();
  // A registration given back is undone outside the lock (declared before it).
  std::unique_ptr<HostRegistration> undo;
  std::lock_guard<std::mutex> lk(mu_);
  call_seconds_ += seconds(t1 - t0);
  last_done_ = std::max(last_done_, t1);
  const bool differs = res.registered && res.readable_in_place != in_place_;
  if (!res.registered || differs) {
    state_[i] = State::failed;
    undo = std::move(res.handle);
    if (!failed_) {
      failed_ = true;
      uint64_t offset = 0;
      for (const Shard& s : shards_) {
        if (p.begin >= s.begin && p.begin < s.begin + s.bytes) {
          offset = static_cast<uint64_t>(p.begin - s.begin);
        }
      }
      std::string where = "piece " + std::to_string(i + 1) + " of " +
                          std::to_string(pieces_.size()) + " (" + std::to_string(p.bytes) +
                          " bytes at offset " + std::to_string(offset);
      where += " of " + p.file + ")";
      failure_ = "registration failed part-way, at " + where + ": " +
                 (differs ? std::string("registered, but its answer on reading in place differs "
                                        "from the first piece's")
                          : res.how);
    }
    changed_.notify_all();
    return false;
  }
  handles_[i] = std::move(res.handle);
  state_[i] = State::registered;
  ++registered_;
  changed_.notify_all();
  return true;
}

void HostRegistrar::pieces_under(const std::byte* src, uint64_t bytes,
                                 std::vector<size_t>& out) const {
  if (bytes == 0) return;
  for (const Shard& s : shards_) {
    if (src < s.begin || src >= s.begin + s.bytes) continue;
    const uint64_t from = static_cast<uint64_t>(src - s.begin);
    const uint64_t last = std::min(from + bytes, s.bytes) - 1;
    const uint64_t step = piece_bytes_ > 0 ? piece_bytes_ : s.bytes;
    for (uint64_t k = from / step; k <= last / step; ++k) out.push_back(s.first_piece + k);
    return;
  }
}

bool HostRegistrar::ready_locked(std::span<const HostCopy> copies) const {
  if (failed_) return false;
  if (registered_ == pieces_.size()) return true;
  std::vector<size_t> under;
  for (const HostCopy& c : copies) pieces_under(c.src, c.bytes, under);
  return std::all_of(under.begin(), under.end(),
                     [&](size_t i) { return state_[i] == State::registered; });
}

Status HostRegistrar::failure_status_locked() const {
  return make_error(ErrorCode::unsupported, failure_);
}

bool HostRegistrar::ready(std::span<const HostCopy> copies) const {
  std::lock_guard<std::mutex> lk(mu_);
  return ready_locked(copies);
}

size_t HostRegistrar::registered() const {
  std::lock_guard<std::mutex> lk(mu_);
  return registered_;
}

Status HostRegistrar::wait_progress(size_t seen) {
  std::unique_lock<std::mutex> lk(mu_);
  const Clock::time_point t0 = Clock::now();
  changed_.wait(lk, [&] { return failed_ || registered_ > seen || registered_ == pieces_.size(); });
  waited_seconds_ += seconds(Clock::now() - t0);
  if (failed_) return failure_status_locked();
  return {};
}

Status HostRegistrar::wait_for(std::span<const HostCopy> copies) {
  std::unique_lock<std::mutex> lk(mu_);
  const Clock::time_point t0 = Clock::now();
  changed_.wait(lk, [&] { return failed_ || ready_locked(copies); });
  waited_seconds_ += seconds(Clock::now() - t0);
  if (failed_) return failure_status_locked();
  return {};
}

Status HostRegistrar::wait_all() {
  std::unique_lock<std::mutex> lk(mu_);
  const Clock::time_point t0 = Clock::now();
  changed_.wait(lk, [&] { return failed_ || registered_ == pieces_.size(); });
  waited_seconds_ += seconds(Clock::now() - t0);
  if (failed_) return failure_status_locked();
  return {};
}

void HostRegistrar::prioritize(std::span<const HostCopy> copies) {
  std::vector<size_t> under;
  for (const HostCopy& c : copies) pieces_under(c.src, c.bytes, under);
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<bool> first(pieces_.size(), false);
  std::deque<size_t> order;
  for (size_t i : under) {
    if (state_[i] != State::pending || first[i]) continue;
    first[i] = true;
    order.push_back(i);
  }
  for (size_t i : queue_) {
    if (!first[i]) order.push_back(i);
  }
  queue_ = std::move(order);
}

std::vector<HostCopy> HostRegistrar::split(std::span<const HostCopy> copies) const {
  std::vector<HostCopy> out;
  out.reserve(copies.size());
  for (const HostCopy& c : copies) {
    const Shard* shard = nullptr;
    for (const Shard& s : shards_) {
      if (c.src >= s.begin && c.src < s.begin + s.bytes) shard = &s;
    }
    if (shard == nullptr || piece_bytes_ == 0) {
      out.push_back(c);
      continue;
    }
    uint64_t done = 0;
    while (done < c.bytes) {
      const auto at = static_cast<uint64_t>(c.src - shard->begin) + done;
      const uint64_t piece_end = (at / piece_bytes_ + 1) * piece_bytes_;
      const uint64_t take = std::min(c.bytes - done, piece_end - at);
      out.push_back(HostCopy{c.dst_offset + done, c.src + done, take, c.file});
      done += take;
    }
  }
  return out;
}

bool HostRegistrar::failed() const {
  std::lock_guard<std::mutex> lk(mu_);
  return failed_;
}

std::string HostRegistrar::failure() const {
  std::lock_guard<std::mutex> lk(mu_);
  return failure_;
}

RegistrationStats HostRegistrar::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  RegistrationStats s;
  s.pieces = pieces_.size();
  s.registered = registered_;
  for (const Piece& p : pieces_) s.bytes += p.bytes;
  s.threads = threads_;
  s.seconds = pieces_.empty() ? 0.0 : seconds(last_done_ - first_call_);
  s.call_seconds = call_seconds_;
  s.waited_seconds = waited_seconds_;
  return s;
}

}  // namespace ferry
