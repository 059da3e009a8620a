// Compressed groups in the executor (issue 24, plan/plan.h's rules): every plan that holds
// compressed groups (all resident compressed, all streamed compressed, mixed with raw resident
// and raw streamed groups, sequential mode, 2 and 3 slots, 1 and 3 staging buffers) gives exactly
// the all-resident run's bytes on qwen3-tiny and alpamayo-tiny, with random delays on every
// stream and slots and staging buffers poisoned (NaN, and bytes that do not decode) before each
// copy or decode; a missing wait on the decode stream or the staging buffers changes the output.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "exec/session.h"
#include "tiny_checkpoint.h"

namespace ferry {
namespace {

using testing::expect_same;
using testing::TinyCheckpoint;

SessionOptions compressed_plan(std::vector<std::string> resident, std::vector<std::string> packed,
                               StreamMode mode = StreamMode::pipelined, int slots = 2,
                               int staging = 2) {
  SessionOptions o;
  o.inference.keep_all_logits = true;
  o.compress_at_open = true;
  o.plan.resident = std::move(resident);
  o.plan.mode = mode;
  o.plan.slots = slots;
  o.plan.compressed = std::move(packed);
  o.plan.staging = staging;
  o.streaming.poison_slots = true;
  return o;
}

std::vector<std::string> names(const ModelWeights& w, bool with_embedding) {
  std::vector<std::string> out;
  for (const WeightGroup& g : w.groups) {
    if (with_embedding || g.kind != GroupKind::embedding) out.push_back(g.name);
  }
  return out;
}

struct Case {
  std::string what;
  SessionOptions options;
};

std::vector<Case> cases(const TinyCheckpoint& m) {
  const ModelWeights& w = m.weights();
  const std::vector<std::string> all = names(w, true);
  const std::vector<std::string> streamable = names(w, false);  // the embedding stays on the host
  // Every other group compressed, the rest raw; half of them resident.
  std::vector<std::string> every_other, resident_half;
  for (size_t i = 0; i < streamable.size(); ++i) {
    if (i % 2 == 0) every_other.push_back(streamable[i]);
    if (i % 4 < 2) resident_half.push_back(streamable[i]);
  }
  // The bounce path: raw copies enqueued by the ring's worker thread on the copy stream that the
  // staged copies share.
  SessionOptions bounce = compressed_plan(resident_half, every_other);
  bounce.host_path = HostPath::bounce;
  bounce.streaming.bounce.buffers = 2;
  bounce.streaming.bounce.buffer_bytes = 64 << 10;
  bounce.streaming.bounce.fill_threads = 2;
  bounce.streaming.bounce.max_fill_delay_us = 20;
  return {
      {"mixed, bounce path", bounce},
      {"all resident compressed", compressed_plan(all, all)},
      {"all streamed compressed", compressed_plan({}, streamable)},
      {"all streamed compressed, one staging buffer",
       compressed_plan({}, streamable, StreamMode::pipelined, 2, 1)},
      {"mixed: compressed and raw, resident and streamed",
       compressed_plan(resident_half, every_other)},
      {"mixed, three slots, three staging buffers",
       compressed_plan(resident_half, every_other, StreamMode::pipelined, 3, 3)},
      {"sequential, all streamed compressed",
       compressed_plan({}, streamable, StreamMode::sequential, 1, 1)},
      {"sequential, mixed", compressed_plan(resident_half, every_other, StreamMode::sequential, 1)},
  };
}

class StreamingCompressed : public ::testing::TestWithParam<const char*> {};

TEST_P(StreamingCompressed, EveryPlanGivesTheAllResidentBytes) {
  TinyCheckpoint m(GetParam(), "compressed");
  SessionOptions base;
  base.inference.keep_all_logits = true;
  auto want = m.run(base);
  ASSERT_TRUE(want.ok()) << want.error().to_string();
  for (const Case& c : cases(m)) {
    auto got = m.run(c.options, testing::hostile_streams(), 2);
    ASSERT_TRUE(got.ok()) << c.what << ": " << got.error().to_string();
    expect_same(*got, *want, c.what);
  }
  // Graphs off: every op launched alone, the same bytes.
  SessionOptions off = cases(m)[4].options;
  off.inference.exec.graphs = false;
  auto got = m.run(off, testing::hostile_streams());
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  expect_same(*got, *want, "mixed, graphs off");
}

// The plan is carried out as written: every decoded call decodes, staged copies carry the
// compressed bytes, and the arena holds the resident compressed groups at their compressed size.
TEST_P(StreamingCompressed, DecodesAndCompressedBytesAreCounted) {
  TinyCheckpoint m(GetParam(), "compressed_counts");
  auto backend = create_cpu_backend();
  const SessionOptions o = cases(m)[4].options;  // mixed
  auto s = m.open(*backend, o);
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  ASSERT_NE((*s)->compressed(), nullptr);
  const Plan& plan = (*s)->plan();
  const CompressedGroups& packed = *(*s)->compressed();
  int64_t decoded_calls = 0;
  uint64_t staged_bytes = 0, resident = 0, arena = 0;
  for (const Call& c : (*s)->calls()) {
    const auto g = static_cast<size_t>(c.group);
    if (!decoded_group(plan, g)) continue;
    ++decoded_calls;
    if (plan.placement[g] == Placement::streamed) staged_bytes += packed.compressed_bytes(g);
  }
  for (size_t g = 0; g < plan.placement.size(); ++g) {
    if (plan.placement[g] != Placement::resident) continue;
    const bool packed_here = decoded_group(plan, g);
    resident += packed_here ? packed.compressed_bytes(g) : m.weights().groups[g].bytes;
    // The arena's 256-byte units: what the memory breakdown counts.
    arena +=
        packed_here ? align_group_bytes(packed.compressed_bytes(g)) : m.weights().groups[g].bytes;
  }
  ASSERT_GT(decoded_calls, 0);
  ASSERT_GT(staged_bytes, 0u);
  ASSERT_TRUE((*s)->run().ok());
  const StreamingStats& st = (*s)->streaming();
  EXPECT_EQ(st.decodes, decoded_calls);
  EXPECT_EQ(st.compressed_bytes_copied, staged_bytes);
  EXPECT_EQ(st.resident_bytes, resident);
  EXPECT_EQ((*s)->memory().of("resident weights"), arena);
  EXPECT_EQ((*s)->memory().of("staging"), static_cast<uint64_t>(plan.staging) * plan.staging_bytes);
  EXPECT_GT(plan.staging_bytes, 0u);
}

// Under a budget the compressed plan's accounting is what the arena sees: the peak stays inside.
TEST_P(StreamingCompressed, TheBudgetHoldsTheCompressedPlan) {
  TinyCheckpoint m(GetParam(), "compressed_budget");
  SessionOptions base;
  base.inference.keep_all_logits = true;
  auto want = m.run(base);
  ASSERT_TRUE(want.ok());
  SessionOptions o = cases(m)[4].options;
  // The plan's own total, exactly: a byte less is refused.
  uint64_t need = 0;
  {
    auto backend = create_cpu_backend();
    auto s = m.open(*backend, o);
    ASSERT_TRUE(s.ok()) << s.error().to_string();
    need = (*s)->memory().total();
  }
  o.vram = need;
  MemoryLedger ledger;
  auto got = m.run(o, testing::hostile_streams(), 1, &ledger);
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  expect_same(*got, *want, "budget " + std::to_string(need));
  EXPECT_LE(ledger.peak, need);
  o.vram = need - 4096;
  EXPECT_FALSE(m.run(o).ok());
}

INSTANTIATE_TEST_SUITE_P(Tiny, StreamingCompressed,
                         ::testing::Values("alpamayo-tiny", "qwen3-tiny"));

// `broken` (a missing wait) on qwen3-tiny does not give the all-resident run's logits.
void expect_broken_run_differs(const SessionOptions& broken) {
  TinyCheckpoint m("qwen3-tiny", "compressed_broken");
  SessionOptions base;
  base.inference.keep_all_logits = true;
  auto want = m.run(base);
  ASSERT_TRUE(want.ok());
  CpuBackendOptions slow = testing::hostile_streams();
  slow.max_delay_us = 2000;
  // Every staging copy lands late, so a decode that skips its wait reads the staging buffer
  // before its bytes (with random delays alone the copy won the race in about 1 run of 12).
  slow.host_copy_delay_us = 5000;
  auto got = m.run(broken, slow);
  // Poisoned slots give NaN logits (refused by sampling); poisoned staging buffers do not decode
  // (an error naming the group); a decode that won the race gives other numbers.
  EXPECT_TRUE(!got.ok() || got->step_logits != want->step_logits);
}

TEST(StreamingCompressedChecks, AMissingDecodeWaitChangesTheOutput) {
  TinyCheckpoint probe("qwen3-tiny", "compressed_names");
  SessionOptions broken = compressed_plan({}, names(probe.weights(), false));
  broken.streaming.skip_decode_wait_for_tests = true;
  expect_broken_run_differs(broken);
}

TEST(StreamingCompressedChecks, AMissingStagingWaitChangesTheOutput) {
  TinyCheckpoint probe("qwen3-tiny", "compressed_names");
  SessionOptions broken = compressed_plan({}, names(probe.weights(), false));
  broken.streaming.skip_staging_wait_for_tests = true;
  expect_broken_run_differs(broken);
}

// Compressed groups need compressed forms: without --compress-at-open the request is refused.
TEST(StreamingCompressedChecks, CompressedGroupsWithoutCompressedFormsAreRefused) {
  TinyCheckpoint m("qwen3-tiny", "compressed_refused");
  SessionOptions o = compressed_plan({}, {"text.layers.0"});
  o.compress_at_open = false;
  auto backend = create_cpu_backend();
  auto s = m.open(*backend, o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("--compress-at-open"), std::string::npos) << s.error().message;
}

}  // namespace
}  // namespace ferry
