// Integrated GPUs (plan/unified_memory.h): the decision from plain facts, and sessions on the
// CPU backend with the device attribute faked (CpuBackendOptions::integrated): every group in
// layout read in place and none copied, the same output bytes as a discrete device's session,
// and one line saying what --vram means there.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "exec/session.h"
#include "model/pack.h"
#include "plan/unified_memory.h"
#include "tiny_checkpoint.h"

namespace ferry {
namespace {

UnifiedMemoryFacts integrated_facts() {
  UnifiedMemoryFacts f;
  f.integrated = true;
  f.tier_readable_in_place = true;
  f.groups = 10;
  f.groups_in_layout = 10;
  return f;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(UnifiedMemory, ADiscreteOrUnknownDeviceIsPlannedAsUsual) {
  UnifiedMemoryFacts f = integrated_facts();
  f.integrated = false;
  UnifiedMemoryChoice c = choose_unified_memory(f);
  EXPECT_FALSE(c.integrated);
  EXPECT_FALSE(c.map_in_layout);
  EXPECT_TRUE(c.message.empty());
  f.integrated.reset();  // the backend cannot tell
  c = choose_unified_memory(f);
  EXPECT_FALSE(c.integrated || c.map_in_layout);
  EXPECT_TRUE(c.message.empty());
}

TEST(UnifiedMemory, AnIntegratedDeviceReadsInPlaceWhatItCan) {
  UnifiedMemoryFacts f = integrated_facts();
  UnifiedMemoryChoice c = choose_unified_memory(f);
  EXPECT_TRUE(c.integrated);
  EXPECT_TRUE(c.map_in_layout);
  EXPECT_TRUE(has(c.message, "every group is read in place, none copied")) << c.message;
  EXPECT_TRUE(has(c.message, "--vram would bound ferry's own allocations")) << c.message;

  f.groups_in_layout = 4;
  f.vram = uint64_t{8} << 30;
  c = choose_unified_memory(f);
  EXPECT_TRUE(c.map_in_layout);
  EXPECT_TRUE(has(c.message, "4 of 10 groups read in place, the other 6 copied")) << c.message;
  EXPECT_TRUE(has(c.message, "`ferry pack`")) << c.message;
  EXPECT_TRUE(has(c.message, "--vram 8.00 GiB bounds ferry's own allocations")) << c.message;

  f.groups_in_layout = 0;
  c = choose_unified_memory(f);
  EXPECT_TRUE(c.integrated);
  EXPECT_FALSE(c.map_in_layout);
  EXPECT_TRUE(has(c.message, "copied into the same memory")) << c.message;
}

TEST(UnifiedMemory, GivenPlacementsAndRefusedRegistrationsAreKept) {
  UnifiedMemoryFacts f = integrated_facts();
  f.placement_given = true;
  UnifiedMemoryChoice c = choose_unified_memory(f);
  EXPECT_TRUE(c.integrated);
  EXPECT_FALSE(c.map_in_layout);
  EXPECT_TRUE(has(c.message, "the placement given is kept")) << c.message;

  f = integrated_facts();
  f.tier_readable_in_place = false;
  c = choose_unified_memory(f);
  EXPECT_FALSE(c.map_in_layout);
  EXPECT_TRUE(has(c.message, "cannot read the checkpoint in place")) << c.message;
}

size_t on_host(const Plan& plan) {
  size_t n = 0;
  for (Placement p : plan.placement) n += p == Placement::host ? 1 : 0;
  return n;
}

// A packed tiny Alpamayo-R1 on the CPU backend, faked integrated: every group read in place, no
// slots, nothing copied per inference, the same bytes as the discrete session; unpacked, only
// the groups in layout.
TEST(UnifiedMemory, AnIntegratedSessionReadsEveryPackedGroupInPlace) {
  testing::TinyCheckpoint tiny("alpamayo-tiny", "unified");
  const std::string packed = tiny.dir() + "_packed";
  std::filesystem::remove_all(packed);
  ASSERT_TRUE(pack_checkpoint(tiny.dir(), packed, {}).ok());
  Checkpoint ck = Checkpoint::open(packed).value();
  ModelWeights w = describe_weights(tiny.config()).value();
  ASSERT_TRUE(bind_checkpoint(w, ck).ok());

  SessionOptions o;
  o.inference.keep_all_logits = true;
  auto discrete = create_cpu_backend();
  auto want_session = Session::open(*discrete, tiny.config(), w, ck, tiny.workload(), o);
  ASSERT_TRUE(want_session.ok()) << want_session.error().to_string();
  EXPECT_TRUE((*want_session)->planned().device_note.empty());
  EXPECT_EQ(on_host((*want_session)->plan()), 0u);
  const InferenceResult want = (*want_session)->run().value();

  CpuBackendOptions faked;
  faked.integrated = true;
  auto integrated = create_cpu_backend(faked);
  auto s = Session::open(*integrated, tiny.config(), w, ck, tiny.workload(), o);
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  const SessionPlan& sp = (*s)->planned();
  EXPECT_EQ(on_host(sp.plan), w.groups.size());
  EXPECT_EQ(sp.plan.slots, 0);
  EXPECT_TRUE(has(sp.device_note, "every group is read in place")) << sp.device_note;
  const InferenceResult got = (*s)->run().value();
  testing::expect_same(got, want, "integrated, packed");
  EXPECT_EQ((*s)->streaming().bytes_copied, 0u);
  EXPECT_EQ(sp.origin, "integrated GPU: every group read in place");

  // A budget of ferry's own buffers and a MiB: the weights read in place need none of it.
  SessionOptions tight = o;
  tight.vram = sp.memory.total() + (uint64_t{1} << 20);
  auto fresh = create_cpu_backend(faked);  // a budget is reserved before anything is allocated
  auto small = Session::open(*fresh, tiny.config(), w, ck, tiny.workload(), tight);
  ASSERT_TRUE(small.ok()) << small.error().to_string();
  EXPECT_TRUE(has((*small)->planned().device_note, "bounds ferry's own allocations"))
      << (*small)->planned().device_note;
  testing::expect_same((*small)->run().value(), want, "integrated, packed, tight budget");

  // Unpacked: the groups of one tensor are in layout, the rest copied (resident here).
  auto unpacked = tiny.open(*integrated, o);
  ASSERT_TRUE(unpacked.ok()) << unpacked.error().to_string();
  const size_t mapped = on_host((*unpacked)->plan());
  EXPECT_GT(mapped, 0u);
  EXPECT_LT(mapped, tiny.weights().groups.size());
  EXPECT_TRUE(has((*unpacked)->planned().device_note,
                  std::to_string(mapped) + " of " + std::to_string(tiny.weights().groups.size())))
      << (*unpacked)->planned().device_note;
  testing::expect_same((*unpacked)->run().value(), want, "integrated, unpacked");
  std::filesystem::remove_all(packed);
}

}  // namespace
}  // namespace ferry
