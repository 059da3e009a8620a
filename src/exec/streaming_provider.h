// Carries out a residency plan (plan/plan.h): resident groups are loaded once into the device
// arena; streamed groups are copied from the host tier into a ring of flat slots ahead of the
// calls that use them; host groups are read in place by their kernels. Decides nothing itself.
//
// Which call copies where, and after what, is the plan's CopyOrder (plan/lent_cache.h), the one
// the predictor reads: ring copies into slots, and lent-cache fills into the region the runner
// lends (lend()) once its activations are idle; a lent-cache hit copies nothing.
//
// Pipelined mode: a copy stream beside the compute stream, and per slot a DMA-done and a
// compute-done event. An inference's copies start at its first acquire, after the inputs the
// executor enqueued on the compute stream before it (CallHandler::upload_inputs): the copy
// stream waits for them, so they cross the link alone. The copy of streamed call u_k waits for the
// compute-done event of u_{k-slots} (the slot's previous user), and the compute of u_k waits for
// its DMA-done event. A fill waits for an event recorded after the compute of its `after` call (the
// region's last user, or the last reader of an earlier entry it overwrites), and its call for the
// entry's DMA-done event. Copies are enqueued in order, each as soon as the call it waits for has
// been enqueued, never later, so they run ahead across stage and step boundaries; nothing in
// acquire/release allocates memory or waits on the host.
//
// Sequential mode: one slot, each copy enqueued on the compute stream right before its call, so
// copy and compute never overlap (the paper's sequential demand layering).
//
// Compressed groups (Form::compressed, plan/plan.h; their bytes from a CompressedGroups): a
// resident compressed group's compressed bytes are loaded into the arena once; a streamed
// compressed call's compressed bytes are copied into a staging buffer on the copy stream (after
// the decode of that buffer's previous user: a staging buffer per buffer a copy-done and a
// decode-done event). Every decoded call is decoded into its ring slot on a decode stream of its
// own, in call order, after its copy's copy-done event and the slot's compute-done event (its
// previous user); the call's compute waits for the slot's decode-done event. Decodes are
// enqueued like copies, as soon as what they wait for has been enqueued. Sequential mode: copy,
// decode and compute of a call one after another on the compute stream. A decode's error (bytes
// that do not decode) is the decode stream's, reported by end_run() at the end of the inference
// and naming the group.
//
// Timeline (off by default; set_timeline): timing events around every call's compute and every
// streamed call's copy, read back after the inference as a StreamTimeline
// (plan/stream_timeline.h). It costs two event records per call and two per copy, and makes the
// copy stream wait for an origin event on the compute stream at the start of each inference.
// On the bounce path (host/bounce_ring.h) a streamed copy is a job of the tier's bounce ring: its
// worker thread waits for the slot's compute-done event, fills page-locked buffers from the
// mapping and enqueues their DMAs and the DMA-done record on the copy stream. acquire() then
// waits on the host until that job has been enqueued, and only then enqueues the compute
// stream's wait on the DMA-done event (a stream wait orders after the last record made before
// it). That host wait is the one the bounce path adds; the registered path has none.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"
#include "exec/executor.h"
#include "host/compressed_groups.h"
#include "host/host_tier.h"
#include "model/call_sequence.h"
#include "model/weights.h"
#include "plan/lent_cache.h"
#include "plan/plan.h"
#include "plan/stream_timeline.h"

namespace ferry {

struct StreamingOptions {
  // Fill a slot with 0xFF bytes (NaN in bf16 and f32) on the copy stream before each copy into
  // it: a missing event wait then changes the output instead of passing silently (tests).
  bool poison_slots = false;
  // Fault injection for the test that shows the check above can fail: compute does not wait
  // for a slot's copy. Never set outside that test.
  bool skip_dma_wait_for_tests = false;
  // The same on the bounce path: acquire does not wait for the job's enqueue, so the compute
  // stream's wait may come before the DMA-done record it needs. Never set outside that test.
  bool skip_bounce_wait_for_tests = false;
  // The same for compressed groups: compute does not wait for its slot's decode; a decode does
  // not wait for its staged copy. Never set outside the tests that show the checks can fail.
  bool skip_decode_wait_for_tests = false;
  bool skip_staging_wait_for_tests = false;
  // The bounce ring's buffers and threads (used when the host tier takes the bounce path).
  BounceOptions bounce;
};

struct StreamingStats {
  uint64_t bytes_copied = 0;  // host -> device bytes of streamed groups, over all inferences
  std::array<uint64_t, kPhaseCount> bytes_by_phase{};  // the same, by the phase of the call served
  int64_t group_copies = 0;                            // streamed calls served by a copy
  int64_t lent_hits = 0;                               // streamed calls served by the lent cache
  int64_t copy_calls = 0;  // backend copies issued (a group may need a few)
  // Compressed groups: decodes into slots, and of bytes_copied the compressed bytes of staged
  // copies (counted at their compressed size).
  int64_t decodes = 0;
  uint64_t compressed_bytes_copied = 0;
  uint64_t resident_bytes =
      0;  // in the arena (resident compressed groups at their compressed size)
  // The resident load: the first copy enqueued to the last completed (create()), waits for the
  // registration of the pieces under them included.
  double resident_load_seconds = 0.0;
  double resident_wait_seconds = 0.0;  // of resident_load_seconds: waiting for registration
  // After the resident load: waiting for the rest of the registration (streamed groups, in-place
  // groups).
  double registration_tail_seconds = 0.0;
  // The host path's rate, measured when the provider was made: the largest streamed group
  // copied once into a slot through the path in use (0 bytes when nothing is streamed).
  uint64_t host_probe_bytes = 0;
  double host_probe_seconds = 0.0;
};

class StreamingProvider final : public GroupProvider {
 public:
  // Loads the resident groups (synchronizing `stream`), allocates the slots and precomputes
  // every group's copies. `tier` and the checkpoint behind it must outlive the provider, as must
  // `compressed` (the compressed bytes of the plan's compressed groups; null: none). On a
  // tier still registering in pieces, the resident groups' pieces are registered first and each
  // group is copied as soon as its pieces are (whichever is ready first); create() returns once
  // every piece is registered. An error (a piece refused part-way included) returns after the
  // copies enqueued so far have completed.
  static Result<std::unique_ptr<StreamingProvider>> create(
      Backend& backend, Stream& stream, const ModelWeights& weights, const HostTier& tier,
      const Plan& plan, const StreamingOptions& options = {},
      const CompressedGroups* compressed = nullptr);

  ~StreamingProvider() override;

  // The runner's region that is idle after prefill (ModelRunner::lent_region): the plan's lent
  // cache lives there. An error when the plan's entries need more than `bytes`.
  Status lend(void* data, uint64_t bytes);

  Status begin(Stream& stream, std::span<const Call> calls) override;
  Result<void*> acquire(Stream& stream, const Call& call) override;
  Status release(Stream& stream, const Call& call) override;
  // Copies already enqueued for skipped calls land in their slots unused; the ring refills from
  // call `next` on, and no skipped call is copied after this.
  Status skip_to(Stream& stream, size_t next) override;
  // Synchronizes the decode stream: the first decode error of the inference, naming its group.
  Status end_run(Stream& stream) override;

  const StreamingStats& stats() const { return stats_; }
  const Plan& plan() const { return plan_; }

  // The link as this process sees it now: `groups` (streamed ones) copied back to back into the
  // slots in turn, as the ring does, on the copy stream (sequential mode: `stream`), a timing
  // event between each two; one untimed pass, then `passes` timed. Per pass, the seconds of each
  // group's copy. Registered path only (the bounce ring's worker enqueues its own copies): an
  // error otherwise, or when a group is not streamed. Synchronizes.
  Result<std::vector<std::vector<double>>> time_copies(Stream& stream,
                                                       std::span<const size_t> groups, int passes);

  // Records the timeline of the inferences that begin from now on (events are made at the next
  // begin()); false stops recording.
  void set_timeline(bool on) { timeline_on_ = on; }
  // Whether timelines can be recorded: not through the bounce ring (bounce and storage paths),
  // whose worker thread enqueues the copies.
  bool records_timelines() const { return bounce_ == nullptr; }
  // The last inference's timeline: call after it has finished (the executor synchronizes at its
  // end). An error when it was not recorded or an event has not completed.
  Result<StreamTimeline> timeline() const;

 private:
  StreamingProvider(Backend& backend, const ModelWeights& weights, Plan plan,
                    StreamingOptions options)
      : backend_(backend), weights_(weights), plan_(std::move(plan)), options_(options) {}

  struct Slot {
    DeviceBuffer buffer;
    std::unique_ptr<Event> dma_done;
    std::unique_ptr<Event> compute_done;
    std::unique_ptr<Event> decode_done;  // its latest decode (decoded calls)
  };
  // A staging buffer of streamed compressed copies.
  struct Staging {
    DeviceBuffer buffer;
    std::unique_ptr<Event> copy_done;
    std::unique_ptr<Event> decode_done;  // the decode that read it last
  };

  // Enqueues copy `k` of the order (pipelined: on the copy stream, after the call it waits for;
  // sequential: on `compute`). Bounce path, pipelined: submits it.
  Status issue_copy(size_t k, Stream& compute);
  // Pipelined: enqueues, in order, every copy whose `after` call (or `after_decode` decode) has
  // been enqueued, and every decode whose slot's previous user and copy have been.
  Status issue_ready(Stream& compute);
  // Copy `k` when it is a staged copy: the compressed bytes into its staging buffer.
  Status issue_staged_copy(size_t k, Stream& compute);
  // Enqueues decode `d` of the order (pipelined: on the decode stream; sequential: on `compute`).
  Status issue_decode(size_t d, Stream& compute);
  // Where decode `d` reads its compressed bytes: the staging buffer or the arena.
  const void* decode_source(const DecodeItem& d) const;
  // At the inference's first acquire: the copy stream waits for what `compute` holds so far (the
  // inputs), then the copies that wait for no call are enqueued.
  Status start_copies(Stream& compute);
  // Where copy `k` lands, and the events it records and waits for.
  void* destination(const CopyItem& item) const;
  // The copies of group `g` into `dst` on `on`, through the path in use (bounce: on the calling
  // thread).
  Status copy_group(Stream& on, size_t g, void* dst);
  void count_copy(const Call& call);
  // Allocates and zeroes the buffers of `resident` (in that order), then copies each group in as
  // soon as the tier has registered the pieces under it.
  Status load_resident(Stream& stream, const HostTier& tier, const std::vector<size_t>& resident);
  // host_probe_*: the largest streamed group into slot 0, timed, synchronizing `stream`.
  Status measure_host_rate(Stream& stream);

  Backend& backend_;
  const ModelWeights& weights_;
  Plan plan_;
  StreamingOptions options_;
  std::vector<void*> base_;    // resident or in-place address; null if streamed
  std::vector<void*> packed_;  // resident compressed groups: their compressed bytes in the arena
  std::vector<DeviceBuffer> resident_;         // one per resident group
  std::vector<std::vector<HostCopy>> copies_;  // per streamed group
  std::vector<uint64_t> group_bytes_;          // per group: its bytes (for the copy order)
  std::vector<Slot> slots_;
  // Compressed groups: their bytes and layouts, the staging buffers, the decode stream.
  const CompressedGroups* compressed_ = nullptr;
  std::vector<Staging> staging_;
  // The streams after the buffers they write: destroyed first, each finishing its queue (an
  // inference that failed part-way leaves copies and decodes queued).
  std::unique_ptr<Stream> copy_stream_;
  std::unique_ptr<Stream> decode_stream_;
  // The lent cache: the region, and per entry its DMA-done event, its bounce ticket and whether
  // this inference has filled it.
  char* lent_ = nullptr;
  uint64_t lent_bytes_ = 0;
  std::vector<std::unique_ptr<Event>> entry_dma_done_;
  std::vector<uint64_t> entry_tickets_;
  std::vector<bool> entry_filled_;
  // Events recorded after the compute of the calls fills wait for: after_event_[call] indexes
  // after_events_ (-1: none).
  std::vector<int32_t> after_event_;
  std::vector<std::unique_ptr<Event>> after_events_;
  // Timeline events: per call (compute start, end), per copy (copy start, end).
  struct TimelineEvents {
    std::unique_ptr<Event> origin;
    std::vector<std::unique_ptr<Event>> compute_start, compute_end, copy_start, copy_end;
  };
  Status prepare_timeline(Stream& stream);
  void mark(const std::vector<std::unique_ptr<Event>>& events, size_t i, Stream& stream);
  bool timeline_on_ = false;
  bool timeline_recorded_ = false;  // the current inference is being recorded
  TimelineEvents timeline_;
  BounceRing* bounce_ = nullptr;   // the tier's, on the bounce path
  std::vector<uint64_t> tickets_;  // per slot: the bounce job of its latest copy
  // The call sequence being executed, its copies, and where execution stands in it.
  std::vector<Call> calls_;
  CopyOrder order_;
  bool order_built_ = false;            // order_ and after_event_ are those of calls_
  size_t next_call_ = 0;                // the call acquire expects next
  size_t issued_ = 0;                   // copies enqueued (index into order_.items)
  size_t decoded_ = 0;                  // decodes enqueued (index into order_.decodes)
  bool started_ = false;                // this inference's copies have begun (start_copies)
  std::unique_ptr<Event> inputs_done_;  // recorded on the compute stream after the inputs
  StreamingStats stats_;
};

}  // namespace ferry
