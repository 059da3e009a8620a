#include "exec/streaming_provider.h"

#include <algorithm>
#include <chrono>
#include <string>

namespace ferry {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Synchronizes a stream when an error leaves the scope: copies in flight complete before the
// buffers they write (and the registrations they read) go.
class SyncOnError {
 public:
  SyncOnError(Backend& backend, Stream& stream) : backend_(backend), stream_(stream) {}
  ~SyncOnError() {
    if (armed_) (void)backend_.synchronize(stream_);  // the error being returned says enough
  }
  SyncOnError(const SyncOnError&) = delete;
  SyncOnError& operator=(const SyncOnError&) = delete;
  void disarm() { armed_ = false; }

 private:
  Backend& backend_;
  Stream& stream_;
  bool armed_ = true;
};

}  // namespace

Result<std::unique_ptr<StreamingProvider>> StreamingProvider::create(
    Backend& backend, Stream& stream, const ModelWeights& weights, const HostTier& tier,
    const Plan& plan, const StreamingOptions& options) {
  FERRY_RETURN_IF_ERROR(validate_plan(plan, weights));
  std::unique_ptr<StreamingProvider> p(new StreamingProvider(backend, weights, plan, options));
  p->bounce_ = tier.bounce();
  const size_t n = weights.groups.size();
  p->base_.assign(n, nullptr);
  p->copies_.resize(n);
  std::vector<size_t> resident;
  std::vector<HostCopy> first;  // the resident groups' ranges: registered before the rest
  for (size_t i = 0; i < n; ++i) {
    const WeightGroup& g = weights.groups[i];
    if (plan.placement[i] == Placement::host) {
      FERRY_ASSIGN_OR_RETURN(p->base_[i], tier.in_place(g));
      continue;
    }
    FERRY_ASSIGN_OR_RETURN(p->copies_[i], tier.transfer_copies(g));
    if (plan.placement[i] == Placement::resident) {
      resident.push_back(i);
      first.insert(first.end(), p->copies_[i].begin(), p->copies_[i].end());
    }
  }
  tier.prioritize(first);
  SyncOnError sync(backend, stream);  // after `p`: runs before p's buffers are freed
  FERRY_RETURN_IF_ERROR(p->load_resident(stream, tier, resident));
  // Streamed copies and in-place reads need every piece.
  const auto tail = std::chrono::steady_clock::now();
  FERRY_RETURN_IF_ERROR(tier.wait_all());
  p->stats_.registration_tail_seconds = seconds_since(tail);
  for (int s = 0; s < plan.slots; ++s) {
    Slot slot;
    FERRY_ASSIGN_OR_RETURN(slot.buffer, backend.allocate(plan.slot_bytes, "slots"));
    slot.dma_done = backend.create_event();
    slot.compute_done = backend.create_event();
    p->slots_.push_back(std::move(slot));
  }
  p->tickets_.assign(p->slots_.size(), 0);
  if (plan.slots > 0 && plan.mode == StreamMode::pipelined) {
    p->copy_stream_ = backend.create_copy_stream();
  }
  FERRY_RETURN_IF_ERROR(p->measure_host_rate(stream));
  sync.disarm();
  return p;
}

Status StreamingProvider::load_resident(Stream& stream, const HostTier& tier,
                                        const std::vector<size_t>& resident) {
  const auto t0 = std::chrono::steady_clock::now();
  // Every buffer first, in group order: the arena's layout does not depend on which group's
  // pieces register first. Zeroed, so that a group's alignment padding is defined.
  for (size_t g : resident) {
    FERRY_ASSIGN_OR_RETURN(DeviceBuffer buf,
                           backend_.allocate(weights_.groups[g].bytes, "resident weights"));
    backend_.fill_zero(stream, buf.data(), buf.bytes());
    base_[g] = buf.data();
    stats_.resident_bytes += weights_.groups[g].bytes;
    resident_.push_back(std::move(buf));
  }
  // Each group as soon as the pieces under it are registered; none ready: wait for the next piece.
  std::vector<size_t> pending = resident;
  while (!pending.empty()) {
    const size_t seen = tier.registered_pieces();
    const size_t before = pending.size();
    for (auto it = pending.begin(); it != pending.end();) {
      if (!tier.ready(copies_[*it])) {
        ++it;
        continue;
      }
      FERRY_RETURN_IF_ERROR(copy_group(stream, *it, base_[*it]));
      copies_[*it].clear();  // loaded once: not needed again
      it = pending.erase(it);
    }
    if (pending.size() == before) {
      const auto w0 = std::chrono::steady_clock::now();
      FERRY_RETURN_IF_ERROR(tier.wait_progress(seen));
      stats_.resident_wait_seconds += seconds_since(w0);
    }
  }
  FERRY_RETURN_IF_ERROR(backend_.synchronize(stream));
  stats_.resident_load_seconds = seconds_since(t0);
  return {};
}

StreamingProvider::~StreamingProvider() {
  // Jobs still queued refer to this provider's slots and events.
  if (bounce_ != nullptr) bounce_->drain();
}

Status StreamingProvider::measure_host_rate(Stream& stream) {
  size_t largest = weights_.groups.size();
  for (size_t i = 0; i < weights_.groups.size(); ++i) {
    if (plan_.placement[i] != Placement::streamed) continue;
    if (largest == weights_.groups.size() ||
        weights_.groups[i].bytes > weights_.groups[largest].bytes) {
      largest = i;
    }
  }
  if (largest == weights_.groups.size() || slots_.empty()) return {};
  const auto t0 = std::chrono::steady_clock::now();
  FERRY_RETURN_IF_ERROR(copy_group(stream, largest, slots_[0].buffer.data()));
  FERRY_RETURN_IF_ERROR(backend_.synchronize(stream));
  stats_.host_probe_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  stats_.host_probe_bytes = weights_.groups[largest].bytes;
  return {};
}

Status StreamingProvider::begin(Stream& stream, std::span<const Call> calls) {
  calls_.assign(calls.begin(), calls.end());
  streamed_.clear();
  for (size_t i = 0; i < calls_.size(); ++i) {
    const int g = calls_[i].group;
    if (g < 0 || static_cast<size_t>(g) >= weights_.groups.size()) {
      return make_error(ErrorCode::internal,
                        "streaming: call " + std::to_string(i) + " names no group");
    }
    if (plan_.placement[static_cast<size_t>(g)] == Placement::streamed) streamed_.push_back(i);
  }
  next_call_ = 0;
  next_streamed_ = 0;
  issued_ = 0;
  // A run that ended early may have left jobs queued: let them finish (their errors belong to it).
  if (bounce_ != nullptr) bounce_->drain();
  timeline_recorded_ = timeline_on_;
  if (timeline_recorded_) FERRY_RETURN_IF_ERROR(prepare_timeline(stream));
  // The ring starts full: the first `slots` streamed calls are copied at once.
  if (plan_.mode == StreamMode::pipelined) {
    while (issued_ < streamed_.size() && issued_ < slots_.size()) {
      FERRY_RETURN_IF_ERROR(issue_copy(issued_++, stream));
    }
  }
  return {};
}

Status StreamingProvider::prepare_timeline(Stream& stream) {
  auto fill = [&](std::vector<std::unique_ptr<Event>>& events, size_t n) {
    while (events.size() < n) events.push_back(backend_.create_timing_event());
  };
  fill(timeline_.compute_start, calls_.size());
  fill(timeline_.compute_end, calls_.size());
  fill(timeline_.copy_start, streamed_.size());
  fill(timeline_.copy_end, streamed_.size());
  if (!timeline_.origin) timeline_.origin = backend_.create_timing_event();
  backend_.record(*timeline_.origin, stream);
  // Nothing on the copy stream may start before the origin: every span is then measured from it.
  if (copy_stream_) backend_.wait(*copy_stream_, *timeline_.origin);
  return {};
}

void StreamingProvider::mark(const std::vector<std::unique_ptr<Event>>& events, size_t i,
                             Stream& stream) {
  if (timeline_recorded_ && i < events.size()) backend_.record(*events[i], stream);
}

Result<StreamTimeline> StreamingProvider::timeline() const {
  if (bounce_ != nullptr) {
    return make_error(ErrorCode::unsupported,
                      "streaming: no timeline on the bounce path (its copies are enqueued by the "
                      "ring's worker thread)");
  }
  if (!timeline_recorded_ || !timeline_.origin || timeline_.compute_start.size() < calls_.size() ||
      timeline_.copy_start.size() < streamed_.size()) {
    return make_error(ErrorCode::invalid_argument,
                      "streaming: no timeline was recorded (set_timeline before the run)");
  }
  if (next_call_ != calls_.size()) {
    return make_error(ErrorCode::invalid_argument,
                      "streaming: the timeline's inference did not finish (" +
                          std::to_string(next_call_) + " of " + std::to_string(calls_.size()) +
                          " calls)");
  }
  Event& origin = *timeline_.origin;
  auto span = [&](Event& a, Event& b) -> Result<Span> {
    Span sp;
    FERRY_ASSIGN_OR_RETURN(sp.start, backend_.elapsed_seconds(origin, a));
    FERRY_ASSIGN_OR_RETURN(sp.end, backend_.elapsed_seconds(origin, b));
    return sp;
  };
  StreamTimeline t;
  t.calls = calls_;
  t.copy_of.assign(calls_.size(), -1);
  for (size_t i = 0; i < calls_.size(); ++i) {
    FERRY_ASSIGN_OR_RETURN(Span sp, span(*timeline_.compute_start[i], *timeline_.compute_end[i]));
    t.compute.push_back(sp);
  }
  for (size_t k = 0; k < streamed_.size(); ++k) {
    FERRY_ASSIGN_OR_RETURN(Span sp, span(*timeline_.copy_start[k], *timeline_.copy_end[k]));
    t.copies.push_back(sp);
    t.copy_of[streamed_[k]] = static_cast<int64_t>(k);
    t.copy_bytes.push_back(weights_.groups[static_cast<size_t>(calls_[streamed_[k]].group)].bytes);
  }
  return t;
}

Status StreamingProvider::copy_group(Stream& on, size_t g, void* dst) {
  if (bounce_ != nullptr) return bounce_->copy(on, dst, copies_[g]);
  for (const HostCopy& c : copies_[g]) {
    backend_.copy_from_mapping(on, static_cast<char*>(dst) + c.dst_offset, c.src, c.bytes, *c.file);
  }
  return {};
}

void StreamingProvider::count_copy(const Call& call) {
  const auto g = static_cast<size_t>(call.group);
  stats_.copy_calls += static_cast<int64_t>(copies_[g].size());
  stats_.bytes_copied += weights_.groups[g].bytes;
  stats_.bytes_by_phase[static_cast<size_t>(call.phase)] += weights_.groups[g].bytes;
  ++stats_.group_copies;
}

Status StreamingProvider::issue_copy(size_t k, Stream& compute) {
  Slot& slot = slots_[k % slots_.size()];
  const Call& call = calls_[streamed_[k]];
  const auto g = static_cast<size_t>(call.group);
  count_copy(call);
  if (plan_.mode == StreamMode::sequential) {
    mark(timeline_.copy_start, k, compute);
    FERRY_RETURN_IF_ERROR(copy_group(compute, g, slot.buffer.data()));
    mark(timeline_.copy_end, k, compute);
    return {};
  }
  Stream& copy = *copy_stream_;
  if (bounce_ != nullptr) {
    BounceRing::Job job;
    job.stream = &copy;
    job.after = slot.compute_done.get();
    job.done = slot.dma_done.get();
    job.dst = slot.buffer.data();
    job.copies = copies_[g];
    job.poison_bytes = options_.poison_slots ? slot.buffer.bytes() : 0;
    tickets_[k % slots_.size()] = bounce_->submit(job);
    return {};
  }
  // The slot's previous user must be done with it (for the first `slots` copies of an inference,
  // the event's last record is from the previous inference, which has finished).
  backend_.wait(copy, *slot.compute_done);
  if (options_.poison_slots) {
    backend_.fill_byte(copy, slot.buffer.data(), 0xff, slot.buffer.bytes());
  }
  mark(timeline_.copy_start, k, copy);
  FERRY_RETURN_IF_ERROR(copy_group(copy, g, slot.buffer.data()));
  mark(timeline_.copy_end, k, copy);
  backend_.record(*slot.dma_done, copy);
  return {};
}

Result<void*> StreamingProvider::acquire(Stream& stream, const Call& call) {
  if (next_call_ >= calls_.size() || !(calls_[next_call_] == call)) {
    return make_error(ErrorCode::internal,
                      "streaming: a call out of the order begin() was given (call " +
                          std::to_string(next_call_) + ")");
  }
  const auto g = static_cast<size_t>(call.group);
  if (plan_.placement[g] != Placement::streamed) {
    mark(timeline_.compute_start, next_call_, stream);
    return base_[g];
  }
  const size_t k = next_streamed_;
  Slot& slot = slots_[k % slots_.size()];
  if (plan_.mode == StreamMode::sequential) {
    FERRY_RETURN_IF_ERROR(issue_copy(k, stream));
  } else if (!options_.skip_dma_wait_for_tests) {
    // Bounce path: the job's DMA-done record must exist before the wait that orders after it.
    if (bounce_ != nullptr && !options_.skip_bounce_wait_for_tests) {
      FERRY_RETURN_IF_ERROR(bounce_->wait_enqueued(tickets_[k % slots_.size()]));
    }
    backend_.wait(stream, *slot.dma_done);
  }
  mark(timeline_.compute_start, next_call_, stream);
  return slot.buffer.data();
}

Status StreamingProvider::release(Stream& stream, const Call& call) {
  const auto g = static_cast<size_t>(call.group);
  mark(timeline_.compute_end, next_call_, stream);
  ++next_call_;
  if (plan_.placement[g] != Placement::streamed) return {};
  const size_t k = next_streamed_++;
  if (plan_.mode == StreamMode::sequential) return {};
  backend_.record(*slots_[k % slots_.size()].compute_done, stream);
  // The slot is free once this call's compute is done: its next user's copy can be enqueued.
  const size_t next = k + slots_.size();
  if (next < streamed_.size() && issued_ == next) {
    ++issued_;
    return issue_copy(next, stream);
  }
  return {};
}

Status StreamingProvider::skip_to(Stream& stream, size_t next) {
  if (next < next_call_ || next > calls_.size()) {
    return make_error(ErrorCode::internal, "streaming: cannot skip from call " +
                                               std::to_string(next_call_) + " to " +
                                               std::to_string(next));
  }
  // Streamed calls before `next`: the next one to run is streamed_[m].
  const auto m = static_cast<size_t>(std::lower_bound(streamed_.begin(), streamed_.end(), next) -
                                     streamed_.begin());
  next_call_ = next;
  next_streamed_ = m;
  if (plan_.mode == StreamMode::sequential) return {};
  // A slot's next copy waits for the compute-done event of the last call that computed in it;
  // skipped calls computed nothing, so that event is still the right one to wait for.
  issued_ = std::max(issued_, m);
  while (issued_ < streamed_.size() && issued_ < m + slots_.size()) {
    FERRY_RETURN_IF_ERROR(issue_copy(issued_++, stream));
  }
  return {};
}

}  // namespace ferry
