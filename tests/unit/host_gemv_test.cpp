// The host engine (host/host_gemv.h): its dot products are gemv_fixed_order_ref's bits whatever
// the worker count, engine, row count or tail, with random delays before every task (so a job
// reported done before its last task, or tasks that overlap, would show); jobs submitted from
// several threads at once each finish once; bad jobs are refused through `done`; destruction
// finishes what was submitted. And the topology it pins to: sysfs cpulists parsed, SMT siblings
// folded into one core, nodes taken in turn, and a fallback when sysfs is unreadable.
#include "host/host_gemv.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/bf16.h"
#include "host/cpu_topology.h"

namespace ferry {
namespace {

std::vector<uint16_t> random_row(std::mt19937& gen, int64_t count) {
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> ex(-10, 4);
  std::vector<uint16_t> v(static_cast<size_t>(count));
  for (auto& e : v) e = f32_to_bf16(std::ldexp(mant(gen), ex(gen)));
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

// Sleeps 0-200 µs before a task, from a per-worker generator.
std::function<void(int)> random_delays() {
  return [](int worker) {
    thread_local std::mt19937 gen(static_cast<unsigned>(worker) * 7919u + 1u);
    std::uniform_int_distribution<int> us(0, 200);
    std::this_thread::sleep_for(std::chrono::microseconds(us(gen)));
  };
}

TEST(HostGemv, GivesTheReferenceBitsForAnyWorkerCountAndEngine) {
  std::mt19937 gen(17);
  for (GemvIsa isa : {GemvIsa::scalar, GemvIsa::avx2, GemvIsa::avx512}) {
    for (int threads : {1, 2, 3, 5}) {
      HostGemvOptions o;
      o.threads = threads;
      o.isa = isa;
      o.before_task = random_delays();
      auto engine = HostGemv::create(o);
      ASSERT_TRUE(engine.ok()) << engine.error().to_string();
      EXPECT_EQ((*engine)->threads(), threads);
      EXPECT_EQ((*engine)->isa(), gemv_isa_supported(isa) ? isa : GemvIsa::scalar);
      for (auto [n, k] : {std::pair<int64_t, int64_t>{1, 1},
                          {63, 257},
                          {64, 256},
                          {65, 300},
                          {200, 1031},
                          {513, 64}}) {
        const int64_t ldw = k + 5;  // rows at every alignment, padding poisoned
        const std::vector<uint16_t> x = random_row(gen, k);
        std::vector<uint16_t> w = random_row(gen, n * ldw);
        for (int64_t r = 0; r < n; ++r) {
          for (int64_t i = k; i < ldw; ++i) w[r * ldw + i] = f32_to_bf16(NAN);
        }
        std::vector<float> want(n), got(n, -7.0f);
        gemv_fixed_order_ref(x.data(), w.data(), ldw, n, k, want.data());
        ASSERT_TRUE((*engine)->run(x.data(), w.data(), ldw, n, k, got.data()).ok());
        EXPECT_TRUE(same_bits(got, want))
            << gemv_isa_name(isa) << ", " << threads << " threads, n = " << n << ", k = " << k;
      }
    }
  }
}

TEST(HostGemv, JobsFromSeveralThreadsEachFinishOnce) {
  HostGemvOptions o;
  o.threads = 3;
  o.before_task = random_delays();
  auto engine = HostGemv::create(o);
  ASSERT_TRUE(engine.ok());
  constexpr int kJobs = 24;
  const int64_t n = 150, k = 520;
  std::mt19937 gen(3);
  const std::vector<uint16_t> x = random_row(gen, k);
  std::vector<std::vector<uint16_t>> ws;
  for (int j = 0; j < kJobs; ++j) ws.push_back(random_row(gen, n * k));
  std::vector<std::vector<float>> outs(kJobs, std::vector<float>(n, -1.0f));
  std::vector<std::atomic<int>> calls(kJobs);
  std::atomic<int> finished{0};
  auto submit_range = [&](int first, int last) {
    for (int j = first; j < last; ++j) {
      (*engine)->submit({x.data(), ws[j].data(), k, n, k, outs[j].data(), [&, j](Status st) {
                           EXPECT_TRUE(st.ok());
                           calls[j].fetch_add(1);
                           finished.fetch_add(1);
                         }});
    }
  };
  std::thread a(submit_range, 0, kJobs / 2), b(submit_range, kJobs / 2, kJobs);
  a.join();
  b.join();
  while (finished.load() < kJobs) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  for (int j = 0; j < kJobs; ++j) {
    EXPECT_EQ(calls[j].load(), 1) << "job " << j;
    std::vector<float> want(n);
    gemv_fixed_order_ref(x.data(), ws[j].data(), k, n, k, want.data());
    EXPECT_TRUE(same_bits(outs[j], want)) << "job " << j;
  }
}

TEST(HostGemv, RefusesBadJobsThroughDoneAndFinishesWorkOnDestruction) {
  HostGemvOptions o;
  o.threads = 2;
  auto engine = HostGemv::create(o);
  ASSERT_TRUE(engine.ok());
  std::vector<uint16_t> x(8, 0), w(64, 0);
  std::vector<float> out(8);
  const Status short_stride = (*engine)->run(x.data(), w.data(), 4, 8, 8, out.data());
  ASSERT_FALSE(short_stride.ok());
  EXPECT_NE(short_stride.error().message.find("row stride 4"), std::string::npos);
  EXPECT_FALSE((*engine)->run(x.data(), nullptr, 8, 8, 8, out.data()).ok());
  EXPECT_TRUE((*engine)->run(nullptr, nullptr, 0, 0, 0, nullptr).ok());  // no rows: nothing to do
  HostGemvOptions negative;
  negative.threads = -1;
  EXPECT_FALSE(HostGemv::create(negative).ok());

  // Jobs still queued when the engine goes are finished first.
  std::mt19937 gen(9);
  const int64_t n = 640, k = 1024;
  const std::vector<uint16_t> xs = random_row(gen, k), ws = random_row(gen, n * k);
  std::vector<float> got(n, -1.0f), want(n);
  std::atomic<bool> done{false};
  {
    HostGemvOptions slow;
    slow.threads = 2;
    slow.before_task = [](int) { std::this_thread::sleep_for(std::chrono::milliseconds(2)); };
    auto e = HostGemv::create(slow);
    ASSERT_TRUE(e.ok());
    (*e)->submit({xs.data(), ws.data(), k, n, k, got.data(), [&](Status) { done = true; }});
  }
  EXPECT_TRUE(done.load());
  gemv_fixed_order_ref(xs.data(), ws.data(), k, n, k, want.data());
  EXPECT_TRUE(same_bits(got, want));
}

// ---- topology -------------------------------------------------------------------------------

TEST(CpuTopology, ParsesCpuLists) {
  auto v = parse_cpu_list("0-3,8,10-11\n");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_TRUE(parse_cpu_list("").ok());
  EXPECT_EQ(parse_cpu_list("5")->size(), 1u);
  for (const char* bad : {"a", "3-1", "1,,2", "-4", "1-", "99999999999"}) {
    EXPECT_FALSE(parse_cpu_list(bad).ok()) << bad;
  }
}

// A made-up sysfs: 2 nodes, 4 cores with 2 SMT threads each (cpu c and c + 4 are siblings).
class FakeSysfs : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() /
            ("ferry_sysfs_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
             "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(root_);
    write("node/node0/cpulist", "0-1,4-5\n");
    write("node/node1/cpulist", "2-3,6-7\n");
    for (int c = 0; c < 8; ++c) {
      const int core = c % 4;
      write("cpu/cpu" + std::to_string(c) + "/topology/thread_siblings_list",
            std::to_string(core) + "," + std::to_string(core + 4) + "\n");
    }
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  void write(const std::string& rel, const std::string& text) {
    const auto p = root_ / rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  std::filesystem::path root_;
};

TEST_F(FakeSysfs, FoldsSiblingsAndSpreadsWorkersOverNodes) {
  const CpuTopology t = read_cpu_topology(root_.string(), {0, 1, 2, 3, 4, 5, 6, 7});
  EXPECT_TRUE(t.from_sysfs);
  EXPECT_EQ(t.nodes, 2);
  EXPECT_EQ(t.logical_cpus, 8);
  ASSERT_EQ(t.cores.size(), 4u);
  EXPECT_EQ(t.cores[0].cpu, 0);
  EXPECT_EQ(t.cores[2].cpu, 2);
  EXPECT_EQ(t.cores[2].node, 1);
  const std::vector<CpuCore> w = worker_cores(t, 3);
  ASSERT_EQ(w.size(), 3u);
  EXPECT_EQ(w[0].node, 0);
  EXPECT_EQ(w[1].node, 1);
  EXPECT_EQ(w[2].node, 0);
  EXPECT_EQ(worker_cores(t, 99).size(), 4u);
  EXPECT_EQ(default_host_threads(t), 2);
  // An affinity mask of one sibling per core still gives each core once.
  const CpuTopology half = read_cpu_topology(root_.string(), {4, 5, 2});
  ASSERT_EQ(half.cores.size(), 3u);
  EXPECT_EQ(half.cores[0].cpu, 2);
  EXPECT_EQ(half.cores[1].cpu, 4);
}

TEST_F(FakeSysfs, FallsBackWhenSysfsIsUnreadable) {
  const CpuTopology t = read_cpu_topology((root_ / "missing").string(), {0, 1, 2});
  EXPECT_FALSE(t.from_sysfs);
  EXPECT_EQ(t.cores.size(), 3u);
  EXPECT_EQ(t.nodes, 1);
  EXPECT_EQ(default_host_threads(t), 1);
  // The real host: at least one core, every one on a node the topology counts.
  const CpuTopology host = host_cpu_topology();
  EXPECT_GE(host.cores.size(), 1u);
  EXPECT_GE(host.nodes, 1);
}

}  // namespace
}  // namespace ferry
