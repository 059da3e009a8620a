// The executor: calls reach the handler in order with their group's address, errors name the
// call, and the provider is released after each call.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "exec/executor.h"

namespace ferry {
namespace {

class FakeProvider : public GroupProvider {
 public:
  Result<void*> acquire(Stream&, const Call& call) override {
    acquired.push_back(call.group);
    return static_cast<void*>(&slots[static_cast<size_t>(call.group)]);
  }
  Status release(Stream&, const Call& call) override {
    released.push_back(call.group);
    return {};
  }
  std::vector<int> slots = std::vector<int>(3);
  std::vector<int> acquired, released;
};

class RecordingHandler : public CallHandler {
 public:
  Status run_call(Stream&, const Call& call, const WeightGroup& group, void* base) override {
    seen.push_back(group.name + "@" + phase_name(call.phase) + std::to_string(call.step));
    bases.push_back(base);
    if (fail_at == static_cast<int>(seen.size())) {
      return make_error(ErrorCode::invalid_argument, "boom");
    }
    return {};
  }
  std::vector<std::string> seen;
  std::vector<void*> bases;
  int fail_at = -1;
};

ModelWeights three_groups() {
  ModelWeights w;
  for (const char* n : {"a", "b", "c"}) {
    WeightGroup g;
    g.name = n;
    w.groups.push_back(g);
  }
  return w;
}

TEST(TextExecutor, RunsCallsInOrderAndCountsPhases) {
  auto backend = create_cpu_backend();
  auto stream = backend->create_stream();
  const ModelWeights w = three_groups();
  const std::vector<Call> calls = {{0, Phase::prefill, 0},
                                   {1, Phase::prefill, 0},
                                   {2, Phase::decode, 0},
                                   {2, Phase::decode, 1},
                                   {1, Phase::expert, 0}};
  FakeProvider provider;
  RecordingHandler handler;
  auto t = execute(*backend, *stream, w, calls, provider, handler);
  ASSERT_TRUE(t.ok()) << t.error().to_string();
  const std::vector<std::string> expected = {"a@prefill0", "b@prefill0", "c@decode0", "c@decode1",
                                             "b@expert0"};
  EXPECT_EQ(handler.seen, expected);
  EXPECT_EQ(handler.bases[2], &provider.slots[2]);
  EXPECT_EQ(provider.acquired, (std::vector<int>{0, 1, 2, 2, 1}));
  EXPECT_EQ(provider.released, provider.acquired);
  EXPECT_EQ(t->calls[static_cast<size_t>(Phase::prefill)], 2);
  EXPECT_EQ(t->calls[static_cast<size_t>(Phase::decode)], 2);
  EXPECT_EQ(t->calls[static_cast<size_t>(Phase::expert)], 1);
  EXPECT_EQ(t->calls[static_cast<size_t>(Phase::vision)], 0);
  EXPECT_GE(t->total_seconds, t->of(Phase::prefill));
}

TEST(TextExecutor, ErrorsNameTheCallAndStop) {
  auto backend = create_cpu_backend();
  auto stream = backend->create_stream();
  const ModelWeights w = three_groups();
  const std::vector<Call> calls = {
      {0, Phase::decode, 0}, {1, Phase::decode, 4}, {2, Phase::decode, 4}};
  FakeProvider provider;
  RecordingHandler handler;
  handler.fail_at = 2;
  auto t = execute(*backend, *stream, w, calls, provider, handler);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().code, ErrorCode::invalid_argument);
  EXPECT_EQ(t.error().message, "decode step 4, b: boom");
  EXPECT_EQ(handler.seen.size(), 2u);
  const std::vector<Call> bad = {{7, Phase::prefill, 0}};
  EXPECT_FALSE(execute(*backend, *stream, w, bad, provider, handler).ok());
}

}  // namespace
}  // namespace ferry
