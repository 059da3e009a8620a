// A residency plan: where each weight group lives during an inference and how streamed groups
// reach the device. Plans are data: built from flags or by the planner (plan/planner.h), printed
// by --dry-run, saved and loaded as JSON, and carried out by the streaming executor
// (exec/streaming_provider.h), which decides nothing itself.
//
// How the executor carries out a plan (the predictor simulates exactly this):
//   - The calls run in call-sequence order on one compute stream.
//   - Streamed calls u_0, u_1, ... (every call whose group is streamed, in order; a group called
//     twice is copied twice) use slot k mod `slots`. Copies run one at a time on one copy
//     stream, in that order. The copy of u_k starts when the copy of u_{k-1} has finished and the
//     compute of u_{k-slots} (the slot's previous user) has finished; its duration is the group's
//     C_DMA. In sequential mode (slots = 1) the copy of u_k also waits for the compute of the call
//     before u_k, so copy and compute never overlap.
//   - A call's compute starts when the previous call's compute has finished, its group's copy (if
//     streamed) has finished, and the host has finished any host step before it; it lasts C_EXE
//     of (group, phase).
//   - Host steps follow a call whose output the host reads (sampling after the LM head's last
//     chunk, the Euler update after expert.out): the host waits for that call's compute, spends
//     the step's host time, and only then enqueues the next call. Copies already enqueued keep
//     going meanwhile: the copy of u_k is enqueued as soon as u_{k-slots} has been enqueued, so
//     prefetch crosses stage and step boundaries.
//   - A `host` group is never copied whole; its call reads the rows it needs from host memory (a
//     small copy inside the call's C_EXE).
//   - Lent cache (plan/lent_cache.h): once the runner's shared activation region is idle (the
//     calls after the last vision or prefill call), a streamed group listed in `cached` is copied
//     by its first call there into the region at its offset instead of a slot (a fill: in the
//     copy order like any copy, after the region's last user and the last reader of any earlier
//     entry whose bytes it takes), and its later calls read that copy with no copy at all.
//     Slots count only the copies that go to the ring.
//   - Compressed groups (form[g] == Form::compressed; only from a compressed checkpoint, issue 24,
//     docs/compression.md). A call of a streamed compressed group or of a resident compressed
//     group is a *decoded call*. Ring calls are the streamed raw calls and the decoded calls, in
//     call order; ring call u_k uses slot k mod `slots`, which holds the group's decoded (raw)
//     layout. A resident compressed group keeps only its compressed bytes in the arena (its VRAM
//     cost is its compressed size) and is never copied. A streamed compressed call's copy moves
//     the compressed bytes into staging buffer j mod `staging` (j counts the streamed compressed
//     calls), in the copy order like any copy, one at a time on the copy stream; besides the
//     copy before it, it waits for the decode of that buffer's previous user (j - staging). It
//     does not wait for the slot: only the decode writes the slot.
//     Decodes run one at a time, in call order, on a decode stream of their own: the decode of
//     a decoded call starts when the previous decode has finished, its copy (if streamed) has
//     finished and the compute of the slot's previous user (u_{k-slots}) has finished; it lasts
//     the group's C_DEC. The call's compute waits for its decode. In sequential mode copy,
//     decode and compute of a call run one after another on the compute stream.
//     Lent cache entries and host placements are raw groups only.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "model/weights.h"

namespace ferry {

enum class Placement : uint8_t {
  resident,  // copied into the device arena once, read there by every call
  streamed,  // copied into a slot of the ring before every call that uses it
  host,      // stays in host memory, read in place by its call: a token embedding gathers the
             // rows it needs; any other group (the map path, --map) is read whole by its kernels
             // from the registered mapping, which needs the group's file range to be its layout
             // (`ferry pack`)
};
const char* placement_name(Placement p);

enum class StreamMode : uint8_t {
  pipelined,   // a ring of slots: copies run ahead of compute on their own stream
  sequential,  // one slot: each streamed group is copied, then run, nothing overlapped
};
const char* stream_mode_name(StreamMode m);

// How a group's bytes are held where the placement puts them.
enum class Form : uint8_t {
  raw,         // the group's layout itself
  compressed,  // the group's compressed bytes (compress/group_codec.h), decoded into a slot
               // before every call that uses it (see the executor's rules above)
};
const char* form_name(Form f);

// Whether the planner may keep a group on the host by itself (its call reads single rows from host
// memory: token embeddings). Other groups go there only when asked (with_mapped).
bool host_placement_allowed(const WeightGroup& group);

// A streamed group kept in the runner's lent region between its calls of the lent window.
struct CacheEntry {
  int group = -1;
  uint64_t offset = 0;  // in the lent region, a multiple of kGroupAlignment
  bool operator==(const CacheEntry&) const = default;
};

struct Plan {
  std::vector<Placement> placement;  // one per ModelWeights::groups entry, same order
  StreamMode mode = StreamMode::pipelined;
  int slots = 2;                   // ring slots; 1 in sequential mode; 0 when nothing is streamed
  uint64_t slot_bytes = 0;         // bytes of each slot: at least the largest streamed group
  std::vector<CacheEntry> cached;  // lent cache entries, in group order (plan/lent_cache.h)
  std::vector<Form> form;          // empty: every group raw; else one per group, same order
  int staging = 0;                 // staging buffers for compressed copies; 0 when none streams
  uint64_t staging_bytes = 0;      // bytes of each: at least the largest streamed compressed group

  bool operator==(const Plan&) const = default;
};

// The form of group g (raw where `form` is empty).
inline Form form_of(const Plan& plan, size_t g) {
  return g < plan.form.size() ? plan.form[g] : Form::raw;
}

// A group's bytes rounded up to kGroupAlignment: the smallest slot that holds it.
inline uint64_t align_group_bytes(uint64_t bytes) {
  return (bytes + kGroupAlignment - 1) / kGroupAlignment * kGroupAlignment;
}

// Per group of a model, the bytes of its compressed form (0: it has none), as
// host/compressed_groups.h gives them (CompressedGroups::compressed_bytes): what a resident
// compressed group takes in the arena and a streamed compressed one in a staging buffer. Empty:
// no group has a compressed form.
using CompressedSizes = std::span<const uint64_t>;

// Whether group g's calls are decoded calls (its form is compressed: resident or streamed).
inline bool decoded_group(const Plan& plan, size_t g) {
  return form_of(plan, g) == Form::compressed;
}
// Whether group g's calls use a ring slot: streamed groups (raw: copied into the slot;
// compressed: decoded into it) and resident compressed groups (decoded into it).
bool ring_group(const Plan& plan, size_t g);

// Bytes of the groups the plan keeps resident / on the host / streams (each group counted once).
// Resident bytes count a resident compressed group at its compressed size rounded up to
// kGroupAlignment, as the arena takes it (`compressed`; its raw size where the sizes are not
// given); streamed bytes are the raw sizes.
uint64_t resident_bytes(const Plan& plan, const ModelWeights& weights,
                        CompressedSizes compressed = {});
uint64_t host_bytes(const Plan& plan, const ModelWeights& weights);
uint64_t streamed_bytes(const Plan& plan, const ModelWeights& weights);
// The largest group whose calls use a slot (ring_group: streamed groups and resident compressed
// ones, at their raw size, which is what a slot holds); 0 when none does: the smallest slot that
// works.
uint64_t largest_streamed_group(const Plan& plan, const ModelWeights& weights);
// The largest compressed size of a streamed compressed group (0 when none): the smallest staging
// buffer that works.
uint64_t largest_staged_group(const Plan& plan, CompressedSizes compressed);
// Device bytes the plan's weights take: resident groups (compressed ones at their compressed
// size) plus slots × slot_bytes plus staging × staging_bytes.
uint64_t plan_weight_device_bytes(const Plan& plan, const ModelWeights& weights,
                                  CompressedSizes compressed = {});

// Structural checks: one placement per group, host only where allowed, slots and slot_bytes
// consistent with the mode and the ring groups, cache entries on raw streamed groups, aligned,
// once each, in group order (how they share the region over time: check_lent_cache); forms: none
// or one per group, compressed only where `compressed` has the group and never on the host;
// staging and staging_bytes consistent with the streamed compressed groups (one buffer in
// sequential mode, 1 to 64 pipelined, each holding the largest). Errors name the group.
Status validate_plan(const Plan& plan, const ModelWeights& weights,
                     CompressedSizes compressed = {});

// The plan with the named groups (names as plan_with_resident takes them) in compressed form,
// in the placement they have, and the ring and staging buffers sized for it: slots as the plan
// has them (2 in pipelined mode where it had none), staging buffers `staging` (1 in sequential
// mode), each the largest streamed compressed group. A name that is unknown, a group on the host
// or one `compressed` has no form of is an error naming it.
Result<Plan> with_compressed(Plan plan, const ModelWeights& weights,
                             const std::vector<std::string>& names, CompressedSizes compressed,
                             int staging = 2);

// Every group resident (what `ferry run` without a budget does).
Plan all_resident_plan(const ModelWeights& weights);

// The paper's interleaved placement (Eq. 8) of k resident layers among n: {floor(i·(n-1)/k)},
// i = 0..k-1 (the first layer in, the last out, gaps as even as they can be). k >= n gives all n.
std::vector<int> interleaved_layers(int k, int n);

// A plan from explicit choices: the named groups resident, the embedding on the host unless
// named, every other group streamed through `slots` slots sized to the largest streamed group
// (sequential mode: one slot). Names are ModelWeights group names ("text.layers.3.attn",
// "text.head.0", "expert.in"), or a decoder layer's name ("text.layers.3") for all its part
// groups; an unknown name is an error that lists a few known ones.
Result<Plan> plan_with_resident(const ModelWeights& weights, const std::vector<std::string>& names,
                                StreamMode mode, int slots = 2);

// The plan with the named groups on the host, read in place by their kernels (the map path), the
// slots resized to the largest group still streamed (the same count; none when nothing is), and
// those groups' cache entries dropped.
Result<Plan> with_mapped(Plan plan, const ModelWeights& weights,
                         const std::vector<std::string>& names);

// Plan files: {"format": "ferry-plan", "version": 1, "mode": ..., "slots": ..., "slot_bytes":
// ..., "staging": ..., "staging_bytes": ... (when compressed groups stream), "groups": [{"name":
// ..., "placement": ..., "form": "compressed" (compressed groups only), "lent_offset": ...
// (cached groups only)}, ...]}. Reading one checks the forms' structure only: whether the model
// has the compressed forms is validate_plan's with the sizes. Groups are named, so a plan made for
// another model is refused with the first name that differs.
std::string plan_to_json(const Plan& plan, const ModelWeights& weights);
Result<Plan> plan_from_json(std::string_view text, const ModelWeights& weights);

}  // namespace ferry
