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
    const Plan& plan, const StreamingOptions& options, const CompressedGroups* compressed) {
  const size_t n = weights.groups.size();
  std::vector<uint64_t> sizes;
  if (compressed != nullptr) {
    if (compressed->size() != n) {
      return make_error(ErrorCode::internal, "streaming: compressed groups of another model (" +
                                                 std::to_string(compressed->size()) +
                                                 " groups, not " + std::to_string(n) + ")");
    }
    for (size_t g = 0; g < n; ++g) sizes.push_back(compressed->compressed_bytes(g));
  }
  FERRY_RETURN_IF_ERROR(validate_plan(plan, weights, sizes));
  std::unique_ptr<StreamingProvider> p(new StreamingProvider(backend, weights, plan, options));
  p->bounce_ = tier.bounce();
  p->compressed_ = compressed;
  p->base_.assign(n, nullptr);
  p->copies_.resize(n);
  for (const WeightGroup& g : weights.groups) p->group_bytes_.push_back(g.bytes);
  std::vector<size_t> resident;
  std::vector<HostCopy> first;  // the resident groups' ranges: registered before the rest
  for (size_t i = 0; i < n; ++i) {
    const WeightGroup& g = weights.groups[i];
    if (plan.placement[i] == Placement::host) {
      FERRY_ASSIGN_OR_RETURN(p->base_[i], tier.in_place(g));
      continue;
    }
    if (decoded_group(plan, i)) {
      // Its bytes come from `compressed`: loaded into the arena (resident) or staged (streamed).
      if (plan.placement[i] == Placement::resident) resident.push_back(i);
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
  for (size_t e = 0; e < plan.cached.size(); ++e) {
    p->entry_dma_done_.push_back(backend.create_event());
  }
  p->entry_tickets_.assign(plan.cached.size(), 0);
  for (int b = 0; b < plan.staging; ++b) {
    Staging staging;
    FERRY_ASSIGN_OR_RETURN(staging.buffer, backend.allocate(plan.staging_bytes, "staging"));
    staging.copy_done = backend.create_event();
    staging.decode_done = backend.create_event();
    p->staging_.push_back(std::move(staging));
  }
  bool decodes = false;
  for (size_t i = 0; i < n; ++i) decodes = decodes || decoded_group(plan, i);
  for (Slot& slot : p->slots_) {
    if (decodes) slot.decode_done = backend.create_event();
  }
  if (plan.slots > 0 && plan.mode == StreamMode::pipelined) {
    p->copy_stream_ = backend.create_copy_stream();
    // Decodes are device work beside compute: a copy stream takes no workspace or op scratch.
    if (decodes) p->decode_stream_ = backend.create_copy_stream();
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
  // A compressed group's compressed bytes, from host memory (not the mapping): copied at once.
  packed_.assign(weights_.groups.size(), nullptr);
  std::vector<size_t> pending;
  for (size_t g : resident) {
    const bool packed = decoded_group(plan_, g);
    const uint64_t bytes = packed ? compressed_->compressed_bytes(g) : weights_.groups[g].bytes;
    FERRY_ASSIGN_OR_RETURN(DeviceBuffer buf, backend_.allocate(bytes, packed ? "resident compressed"
                                                                             : "resident weights"));
    backend_.fill_zero(stream, buf.data(), buf.bytes());
    if (packed) {
      packed_[g] = buf.data();
      backend_.copy_to_device(stream, buf.data(), compressed_->bytes(g).data(), bytes);
    } else {
      base_[g] = buf.data();
      pending.push_back(g);
    }
    stats_.resident_bytes += bytes;
    resident_.push_back(std::move(buf));
  }
  // Each group as soon as the pieces under it are registered; none ready: wait for the next piece.
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
    if (plan_.placement[i] != Placement::streamed || decoded_group(plan_, i)) continue;
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

Result<std::vector<std::vector<double>>> StreamingProvider::time_copies(
    Stream& stream, std::span<const size_t> groups, int passes) {
  if (bounce_ != nullptr) {
    return make_error(ErrorCode::invalid_argument,
                      "streaming: copies through the bounce ring are timed by its worker");
  }
  if (slots_.empty()) return make_error(ErrorCode::invalid_argument, "streaming: no slots");
  for (size_t g : groups) {
    if (g >= weights_.groups.size() || plan_.placement[g] != Placement::streamed ||
        decoded_group(plan_, g) || weights_.groups[g].bytes > slots_[0].buffer.bytes()) {
      return make_error(ErrorCode::invalid_argument,
                        "streaming: only raw streamed groups are timed into the slots");
    }
  }
  Stream& on = copy_stream_ != nullptr ? *copy_stream_ : stream;
  std::vector<std::unique_ptr<Event>> marks;
  for (size_t i = 0; i <= groups.size(); ++i) marks.push_back(backend_.create_timing_event());
  std::vector<std::vector<double>> out;
  for (int pass = -1; pass < passes; ++pass) {
    for (size_t i = 0; i < groups.size(); ++i) {
      if (pass >= 0) backend_.record(*marks[i], on);
      FERRY_RETURN_IF_ERROR(copy_group(on, groups[i], slots_[i % slots_.size()].buffer.data()));
    }
    if (pass >= 0) backend_.record(*marks[groups.size()], on);
    FERRY_RETURN_IF_ERROR(backend_.synchronize(on));
    if (pass < 0) continue;  // untimed: clocks up, the pages' translations warm
    std::vector<double> seconds;
    for (size_t i = 0; i < groups.size(); ++i) {
      FERRY_ASSIGN_OR_RETURN(double t, backend_.elapsed_seconds(*marks[i], *marks[i + 1]));
      seconds.push_back(std::max(t, 0.0));
    }
    out.push_back(std::move(seconds));
  }
  return out;
}

Status StreamingProvider::lend(void* data, uint64_t bytes) {
  const uint64_t need = lent_bytes_needed(plan_, group_bytes_);
  if (need > bytes || (need > 0 && data == nullptr)) {
    return make_error(ErrorCode::invalid_argument,
                      "streaming: the plan's lent cache needs " + std::to_string(need) +
                          " bytes of the runner's idle region; " + std::to_string(bytes) +
                          " are lent (a plan made for another workload?)");
  }
  lent_ = static_cast<char*>(data);
  lent_bytes_ = bytes;
  return {};
}

Status StreamingProvider::begin(Stream& stream, std::span<const Call> calls) {
  if (lent_bytes_needed(plan_, group_bytes_) > lent_bytes_) {
    return make_error(ErrorCode::internal,
                      "streaming: the plan caches groups in the runner's idle region, and none "
                      "(or too little) was lent");
  }
  // The copy order of the calls the previous inference ran is kept: every inference of a session
  // runs the same calls, and building the order anew is host work done before the first call is
  // enqueued, with the device idle meanwhile (it walks every call and the lent cache's entries).
  if (!order_built_ || !std::equal(calls.begin(), calls.end(), calls_.begin(), calls_.end())) {
    order_built_ = false;
    calls_.assign(calls.begin(), calls.end());
    Result<CopyOrder> order = copy_order(plan_, calls_, group_bytes_);
    if (!order.ok()) {
      return make_error(ErrorCode::internal, "streaming: " + order.error().message);
    }
    order_ = std::move(*order);
    // An event after each call a fill waits for (made once, reused by every inference).
    after_event_.assign(calls_.size(), -1);
    size_t events = 0;
    for (const CopyItem& item : order_.items) {
      if (item.entry < 0 || item.after < 0) continue;
      int32_t& e = after_event_[static_cast<size_t>(item.after)];
      if (e >= 0) continue;
      e = static_cast<int32_t>(events++);
      if (after_events_.size() < events) after_events_.push_back(backend_.create_event());
    }
    order_built_ = true;
  }
  entry_filled_.assign(plan_.cached.size(), false);
  next_call_ = 0;
  issued_ = 0;
  decoded_ = 0;
  // A run that ended early may have left jobs queued: let them finish (their errors belong to it).
  if (bounce_ != nullptr) bounce_->drain();
  timeline_recorded_ = timeline_on_;
  if (timeline_recorded_) FERRY_RETURN_IF_ERROR(prepare_timeline(stream));
  // The first acquire starts the copies, after what the executor enqueued before it (the inputs).
  started_ = false;
  // A timing event: the timeline reads when the inputs were on the device from it.
  if (!inputs_done_) inputs_done_ = backend_.create_timing_event();
  return {};
}

Status StreamingProvider::start_copies(Stream& compute) {
  started_ = true;
  // The inference's inputs are on `compute` now (CallHandler::upload_inputs): the copy stream
  // waits for them, so they cross the link alone. Then the ring starts full: the first `slots`
  // ring copies (and fills that wait for nothing) at once. Sequential mode copies on `compute`,
  // after them anyway.
  backend_.record(*inputs_done_, compute);
  if (plan_.mode != StreamMode::pipelined) return {};
  if (copy_stream_) backend_.wait(*copy_stream_, *inputs_done_);
  return issue_ready(compute);
}

Status StreamingProvider::issue_ready(Stream& compute) {
  const auto done = static_cast<int64_t>(next_call_);  // calls whose compute is enqueued
  for (bool progress = true; progress;) {
    progress = false;
    while (issued_ < order_.items.size() && order_.items[issued_].after < done &&
           order_.items[issued_].after_decode < static_cast<int64_t>(decoded_)) {
      FERRY_RETURN_IF_ERROR(issue_copy(issued_++, compute));
      progress = true;
    }
    while (decoded_ < order_.decodes.size() && order_.decodes[decoded_].after < done &&
           order_.decodes[decoded_].copy < static_cast<int64_t>(issued_)) {
      FERRY_RETURN_IF_ERROR(issue_decode(decoded_++, compute));
      progress = true;
    }
  }
  return {};
}

const void* StreamingProvider::decode_source(const DecodeItem& d) const {
  if (d.staging >= 0) return staging_[static_cast<size_t>(d.staging)].buffer.data();
  return packed_[static_cast<size_t>(calls_[d.call].group)];
}

Status StreamingProvider::issue_decode(size_t d, Stream& compute) {
  const DecodeItem& item = order_.decodes[d];
  const auto g = static_cast<size_t>(calls_[item.call].group);
  Slot& slot = slots_[static_cast<size_t>(item.slot)];
  ++stats_.decodes;
  const std::string& name = weights_.groups[g].name;
  if (plan_.mode == StreamMode::sequential) {
    return backend_.decode_group(compute, compressed_->layout(g), decode_source(item),
                                 slot.buffer.data(), slot.buffer.bytes(), name);
  }
  Stream& on = *decode_stream_;
  // The slot's previous user (for the first `slots` ring calls of an inference, the last record
  // is the previous inference's, which has finished), and the staged copy it decodes.
  backend_.wait(on, *slot.compute_done);
  if (item.staging >= 0 && !options_.skip_staging_wait_for_tests) {
    backend_.wait(on, *staging_[static_cast<size_t>(item.staging)].copy_done);
  }
  if (options_.poison_slots) backend_.fill_byte(on, slot.buffer.data(), 0xff, slot.buffer.bytes());
  FERRY_RETURN_IF_ERROR(backend_.decode_group(on, compressed_->layout(g), decode_source(item),
                                              slot.buffer.data(), slot.buffer.bytes(), name));
  backend_.record(*slot.decode_done, on);
  if (item.staging >= 0) {
    backend_.record(*staging_[static_cast<size_t>(item.staging)].decode_done, on);
  }
  return {};
}

Status StreamingProvider::end_run(Stream& stream) {
  (void)stream;
  if (decode_stream_ == nullptr) return {};
  return backend_.synchronize(*decode_stream_);
}

void* StreamingProvider::destination(const CopyItem& item) const {
  if (item.entry >= 0) return lent_ + plan_.cached[static_cast<size_t>(item.entry)].offset;
  return slots_[static_cast<size_t>(item.slot)].buffer.data();
}

Status StreamingProvider::prepare_timeline(Stream& stream) {
  auto fill = [&](std::vector<std::unique_ptr<Event>>& events, size_t n) {
    while (events.size() < n) events.push_back(backend_.create_timing_event());
  };
  fill(timeline_.compute_start, calls_.size());
  fill(timeline_.compute_end, calls_.size());
  fill(timeline_.copy_start, order_.items.size());
  fill(timeline_.copy_end, order_.items.size());
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
  if (!records_timelines()) {
    return make_error(ErrorCode::unsupported,
                      "streaming: no timeline on the bounce path (its copies are enqueued by the "
                      "ring's worker thread)");
  }
  if (!timeline_recorded_ || !timeline_.origin || timeline_.compute_start.size() < calls_.size() ||
      timeline_.copy_start.size() < order_.items.size()) {
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
  if (started_) {
    FERRY_ASSIGN_OR_RETURN(t.inputs_end, backend_.elapsed_seconds(origin, *inputs_done_));
  }
  t.copy_of.assign(calls_.size(), -1);
  for (size_t i = 0; i < calls_.size(); ++i) {
    FERRY_ASSIGN_OR_RETURN(Span sp, span(*timeline_.compute_start[i], *timeline_.compute_end[i]));
    t.compute.push_back(sp);
  }
  for (size_t k = 0; k < order_.items.size(); ++k) {
    const size_t c = order_.items[k].call;
    FERRY_ASSIGN_OR_RETURN(Span sp, span(*timeline_.copy_start[k], *timeline_.copy_end[k]));
    t.copies.push_back(sp);
    t.copy_of[c] = static_cast<int64_t>(k);
    const auto g = static_cast<size_t>(calls_[c].group);
    t.copy_bytes.push_back(order_.items[k].staging >= 0 ? compressed_->compressed_bytes(g)
                                                        : weights_.groups[g].bytes);
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

Status StreamingProvider::issue_staged_copy(size_t k, Stream& compute) {
  const CopyItem& item = order_.items[k];
  const Call& call = calls_[item.call];
  const auto g = static_cast<size_t>(call.group);
  Staging& staging = staging_[static_cast<size_t>(item.staging)];
  const std::span<const uint8_t> bytes = compressed_->bytes(g);
  ++stats_.group_copies;
  ++stats_.copy_calls;
  stats_.bytes_copied += bytes.size();
  stats_.compressed_bytes_copied += bytes.size();
  stats_.bytes_by_phase[static_cast<size_t>(call.phase)] += bytes.size();
  // Sequential mode: on the compute stream, in order with the decode and the call after it.
  Stream& on = plan_.mode == StreamMode::sequential ? compute : *copy_stream_;
  if (plan_.mode == StreamMode::pipelined) {
    // The decode of the buffer's previous user (this inference's, or the last record of the
    // previous inference, which has finished).
    backend_.wait(on, *staging.decode_done);
  }
  if (options_.poison_slots) {
    backend_.fill_byte(on, staging.buffer.data(), 0xff, staging.buffer.bytes());
  }
  mark(timeline_.copy_start, k, on);
  backend_.copy_to_device(on, staging.buffer.data(), bytes.data(), bytes.size());
  mark(timeline_.copy_end, k, on);
  if (plan_.mode == StreamMode::pipelined) backend_.record(*staging.copy_done, on);
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
  const CopyItem& item = order_.items[k];
  const Call& call = calls_[item.call];
  const auto g = static_cast<size_t>(call.group);
  if (item.staging >= 0) return issue_staged_copy(k, compute);
  void* dst = destination(item);
  const bool fill = item.entry >= 0;
  const auto entry = static_cast<size_t>(item.entry);
  const uint64_t bytes = fill ? weights_.groups[g].bytes : slots_[item.slot].buffer.bytes();
  count_copy(call);
  if (plan_.mode == StreamMode::sequential) {
    mark(timeline_.copy_start, k, compute);
    FERRY_RETURN_IF_ERROR(copy_group(compute, g, dst));
    mark(timeline_.copy_end, k, compute);
    return {};
  }
  Stream& copy = *copy_stream_;
  // What must be done with the destination first: the slot's previous user (for the first
  // `slots` copies of an inference, the event's last record is from the previous inference,
  // which has finished), or the call the fill waits for.
  Event* after = nullptr;
  if (!fill) {
    after = slots_[item.slot].compute_done.get();
  } else if (item.after >= 0) {
    after = after_events_[static_cast<size_t>(after_event_[static_cast<size_t>(item.after)])].get();
  }
  Event* done = fill ? entry_dma_done_[entry].get() : slots_[item.slot].dma_done.get();
  if (bounce_ != nullptr) {
    BounceRing::Job job;
    job.stream = &copy;
    job.after = after;
    job.done = done;
    job.dst = dst;
    job.copies = copies_[g];
    job.poison_bytes = options_.poison_slots ? bytes : 0;
    const uint64_t ticket = bounce_->submit(job);
    (fill ? entry_tickets_[entry] : tickets_[static_cast<size_t>(item.slot)]) = ticket;
    return {};
  }
  if (after != nullptr) backend_.wait(copy, *after);
  if (options_.poison_slots) backend_.fill_byte(copy, dst, 0xff, bytes);
  mark(timeline_.copy_start, k, copy);
  FERRY_RETURN_IF_ERROR(copy_group(copy, g, dst));
  mark(timeline_.copy_end, k, copy);
  backend_.record(*done, copy);
  return {};
}

Result<void*> StreamingProvider::acquire(Stream& stream, const Call& call) {
  if (next_call_ >= calls_.size() || !(calls_[next_call_] == call)) {
    return make_error(ErrorCode::internal,
                      "streaming: a call out of the order begin() was given (call " +
                          std::to_string(next_call_) + ")");
  }
  if (!started_) FERRY_RETURN_IF_ERROR(start_copies(stream));
  const auto g = static_cast<size_t>(call.group);
  const CopyKind kind = order_.kind[next_call_];
  if (kind == CopyKind::none) {
    mark(timeline_.compute_start, next_call_, stream);
    return base_[g];
  }
  if (kind == CopyKind::hit) {
    const auto e = static_cast<size_t>(order_.entry[next_call_]);
    if (!entry_filled_[e]) {
      return make_error(ErrorCode::internal, "streaming: " + weights_.groups[g].name +
                                                 " is read from the lent cache before its fill");
    }
    ++stats_.lent_hits;
    mark(timeline_.compute_start, next_call_, stream);
    return lent_ + plan_.cached[e].offset;
  }
  if (kind == CopyKind::decode || kind == CopyKind::staged) {
    const auto d = static_cast<size_t>(order_.decode[next_call_]);
    Slot& slot = slots_[static_cast<size_t>(order_.decodes[d].slot)];
    if (plan_.mode == StreamMode::sequential) {
      if (kind == CopyKind::staged) {
        FERRY_RETURN_IF_ERROR(issue_copy(static_cast<size_t>(order_.item[next_call_]), stream));
      }
      FERRY_RETURN_IF_ERROR(issue_decode(d, stream));
    } else {
      if (decoded_ <= d) FERRY_RETURN_IF_ERROR(issue_ready(stream));
      if (decoded_ <= d) {
        return make_error(ErrorCode::internal, "streaming: the decode of " +
                                                   weights_.groups[g].name +
                                                   " was not enqueued before its call (call " +
                                                   std::to_string(next_call_) + ")");
      }
      if (!options_.skip_decode_wait_for_tests) backend_.wait(stream, *slot.decode_done);
    }
    mark(timeline_.compute_start, next_call_, stream);
    return slot.buffer.data();
  }
  const auto k = static_cast<size_t>(order_.item[next_call_]);
  const CopyItem& item = order_.items[k];
  const bool fill = item.entry >= 0;
  if (plan_.mode == StreamMode::sequential) {
    FERRY_RETURN_IF_ERROR(issue_copy(k, stream));
  } else if (!options_.skip_dma_wait_for_tests) {
    // Bounce path: the job's DMA-done record must exist before the wait that orders after it.
    if (bounce_ != nullptr && !options_.skip_bounce_wait_for_tests) {
      FERRY_RETURN_IF_ERROR(
          bounce_->wait_enqueued(fill ? entry_tickets_[static_cast<size_t>(item.entry)]
                                      : tickets_[static_cast<size_t>(item.slot)]));
    }
    backend_.wait(stream, fill ? *entry_dma_done_[static_cast<size_t>(item.entry)]
                               : *slots_[static_cast<size_t>(item.slot)].dma_done);
  }
  if (fill) entry_filled_[static_cast<size_t>(item.entry)] = true;
  mark(timeline_.compute_start, next_call_, stream);
  return destination(item);
}

Status StreamingProvider::release(Stream& stream, const Call& call) {
  (void)call;
  mark(timeline_.compute_end, next_call_, stream);
  const size_t i = next_call_++;
  if (plan_.mode == StreamMode::sequential) return {};
  // Ring calls (streamed raw and decoded): the slot is free once this compute has run.
  if (order_.slot[i] >= 0) {
    backend_.record(*slots_[static_cast<size_t>(order_.slot[i])].compute_done, stream);
  }
  if (after_event_[i] >= 0) {
    backend_.record(*after_events_[static_cast<size_t>(after_event_[i])], stream);
  }
  // Copies waiting for this call can be enqueued now.
  return issue_ready(stream);
}

Status StreamingProvider::skip_to(Stream& stream, size_t next) {
  if (next < next_call_ || next > calls_.size()) {
    return make_error(ErrorCode::internal, "streaming: cannot skip from call " +
                                               std::to_string(next_call_) + " to " +
                                               std::to_string(next));
  }
  if (plan_.mode == StreamMode::pipelined) {
    // A fill waiting for a skipped call orders after everything enqueued so far instead.
    for (size_t i = next_call_; i < next; ++i) {
      if (after_event_[i] >= 0) {
        backend_.record(*after_events_[static_cast<size_t>(after_event_[i])], stream);
      }
    }
  }
  next_call_ = next;
  if (plan_.mode == StreamMode::sequential) return {};
  // Copies of skipped calls are not made. A slot's next copy waits for the compute-done event of
  // the last call that computed in it; skipped calls computed nothing, so that event is still the
  // right one to wait for.
  while (issued_ < order_.items.size() && order_.items[issued_].call < next) ++issued_;
  while (decoded_ < order_.decodes.size() && order_.decodes[decoded_].call < next) ++decoded_;
  return issue_ready(stream);
}

}  // namespace ferry
