// The lent cache: device memory the runner lends once its activations no longer need it, used
// to keep streamed groups between their calls.
//
// The runner's shared activation region (model/shared_region.h) holds the vision tower's
// buffers and the text decoder's activations for multi-token steps (prefill). Single-token
// decode steps and the action expert use buffers of their own, so after the last vision or
// prefill call (the start of the lent window) the region is idle until the inference ends. A
// streamed group called several times in the window (a text layer in every decode step, an
// expert layer in every flow step) can be copied there once, by its first call in the window (a
// fill), and read there by its later calls (hits), instead of crossing the link every time.
//
// Entries whose lifetimes (first to last call in the window) overlap must not overlap in bytes;
// entries whose lifetimes do not overlap may reuse the same bytes (decode's entries, then the
// expert's). A fill waits for the compute of the region's last user (the call before the
// window) and of the last call of every earlier entry whose bytes it takes.
//
// CopyOrder is the one account of which calls copy where and after what, read by the predictor
// (plan/predictor.h) and the executor (exec/streaming_provider.h) alike.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "model/call_sequence.h"
#include "model/weights.h"
#include "plan/plan.h"

namespace ferry {

// The first call of the lent window: one past the last vision or prefill call (0 when there is
// none, calls.size() when nothing follows them).
size_t lent_window_start(std::span<const Call> calls);

// The region bytes a plan's entries need: the largest offset + group bytes (0 without entries).
uint64_t lent_bytes_needed(const Plan& plan, std::span<const uint64_t> group_bytes);

enum class CopyKind : uint8_t {
  none,    // resident raw or host: no copy
  ring,    // copied into a ring slot before the call
  fill,    // copied into its lent cache entry before the call (the entry's first call)
  hit,     // reads its lent cache entry: no copy
  decode,  // resident compressed: decoded from the arena into a ring slot, no copy
  staged,  // streamed compressed: copied into a staging buffer, then decoded into a ring slot
};

struct CopyItem {
  uint32_t call = 0;     // the call this copy serves
  int32_t after = -1;    // a call whose compute must end before the copy starts (-1: none this run)
  int32_t slot = -1;     // ring slot (ring copies)
  int32_t entry = -1;    // index into plan.cached (fills)
  int32_t staging = -1;  // staged copies: the staging buffer it lands in
  int32_t after_decode = -1;  // staged copies: the decode (index into CopyOrder::decodes) of the
                              // buffer's previous user, which must end first (-1: none this run)
};

// A decoded call's decode into its ring slot (plan/plan.h: on the decode stream, one at a time,
// in call order).
struct DecodeItem {
  uint32_t call = 0;
  int32_t slot = 0;      // the ring slot it writes
  int32_t after = -1;    // the slot's previous user, whose compute must end first (-1: none)
  int32_t copy = -1;     // staged: its copy (index into items), which must end first
  int32_t staging = -1;  // staged: the staging buffer it reads
};

struct CopyOrder {
  std::vector<CopyKind> kind;       // per call
  std::vector<int32_t> item;        // per call: its copy's index in `items` (-1: none)
  std::vector<int32_t> entry;       // per call: its plan.cached entry (fills and hits; -1: none)
  std::vector<int32_t> slot;        // per call: the ring slot it reads (ring calls; -1: none)
  std::vector<int32_t> decode;      // per call: its decode's index in `decodes` (-1: none)
  std::vector<CopyItem> items;      // every copy of an inference, in call order
  std::vector<DecodeItem> decodes;  // every decode of an inference, in call order
  std::vector<int32_t> entry_first, entry_last;  // per entry: its first and last window call
  size_t window = 0;                             // lent_window_start
};

// Builds the copy order. Checked (an error names the group): every entry's group is called in
// the window, entries whose lifetimes overlap do not overlap in bytes. Ring calls (streamed raw
// calls outside the lent cache and decoded calls, in call order) take ring slot k mod slots;
// staged copies take staging buffer j mod staging (j counts them). In sequential mode the ring
// is one slot, staging one buffer, and `after` is not used (everything runs on the compute
// stream).
Result<CopyOrder> copy_order(const Plan& plan, std::span<const Call> calls,
                             std::span<const uint64_t> group_bytes);
// The same without the checks, into `out`'s storage (the predictor's hot path builds one per
// prediction; the plan is known valid).
void copy_order_into(CopyOrder& out, const Plan& plan, std::span<const Call> calls,
                     std::span<const uint64_t> group_bytes);

// Checks a plan's entries against the calls and the region lent: copy_order's checks, and
// lent_bytes_needed <= lent_bytes.
Status check_lent_cache(const Plan& plan, std::span<const Call> calls,
                        std::span<const uint64_t> group_bytes, uint64_t lent_bytes);

// Entries for `plan` in a region of `lent_bytes`: candidates are the streamed groups with two or
// more calls in the window; runs of them (by first call) whose lifetimes all overlap are chosen
// by a knapsack over the region (value: the link time they spare, (window calls - 1) × C_DMA),
// and each chosen group, largest first, is placed at the lowest offset free of the entries
// already placed whose lifetimes overlap its own (dropped if none is). Replaces plan.cached.
Plan with_lent_cache(Plan plan, std::span<const Call> calls, std::span<const uint64_t> group_bytes,
                     std::span<const double> dma_s, uint64_t lent_bytes);

}  // namespace ferry
