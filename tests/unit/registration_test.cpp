// Registration in pieces (host/host_registrar.h) through a backend that keeps books of what is
// registered: no copy reads a range before it is registered (nor spans two registrations), the
// resident load starts before the last piece is registered, a piece refused part-way leaves
// nothing registered and the session falls back with the all-resident bytes, and the start
// breakdown adds up (exec/start_times.h, `run --json`'s "start").
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "cli_runner.h"
#include "exec/session.h"
#include "host/host_registrar.h"
#include "measure/profiler.h"
#include "tiny_checkpoint.h"

namespace ferry {
namespace {

using testing::expect_same;
using testing::TinyCheckpoint;

constexpr uint64_t kPiece = uint64_t{64} << 10;

// A CPU backend whose registrations are books: the ranges registered now, and one log of every
// registration, release, copy out of the mapping and stream synchronization, in order. It can
// refuse the n-th registration call, hold the n-th until a copy out of the mapping has been
// issued, and run a hook before each call (on the registering thread).
class RecordingBackend final : public Backend {
 public:
  enum class Kind { reg, unreg, copy, sync };
  struct Entry {
    Kind kind;
    const std::byte* begin = nullptr;
    uint64_t bytes = 0;
  };

  explicit RecordingBackend(const CpuBackendOptions& cpu = {}) : inner_(create_cpu_backend(cpu)) {}

  int refuse_call = 0;  // 1-based register_host call refused; 0: none
  int hold_call = 0;    // 1-based call that first waits (10 s at most) for a copy to be issued
  std::function<void(int)> before_register;  // called with the call's number

  int calls() const {
    std::lock_guard<std::mutex> lk(mu_);
    return calls_;
  }
  size_t live() const {
    std::lock_guard<std::mutex> lk(mu_);
    return live_.size();
  }
  int unregistered_copies() const {
    std::lock_guard<std::mutex> lk(mu_);
    return unregistered_copies_;
  }
  bool hold_timed_out() const {
    std::lock_guard<std::mutex> lk(mu_);
    return hold_timed_out_;
  }
  std::vector<Entry> log() const {
    std::lock_guard<std::mutex> lk(mu_);
    return log_;
  }

  std::string_view name() const override { return inner_->name(); }
  DeviceInfo info() const override { return inner_->info(); }
  Result<DeviceBuffer> allocate(size_t bytes, std::string_view purpose = "other") override {
    return inner_->allocate(bytes, purpose);
  }
  Status reserve(uint64_t bytes) override { return inner_->reserve(bytes); }
  MemoryLedger ledger() const override { return inner_->ledger(); }
  uint64_t compute_stream_bytes() const override { return inner_->compute_stream_bytes(); }
  bool reads_pageable_host_memory() const override { return inner_->reads_pageable_host_memory(); }
  Result<HostBuffer> allocate_host(size_t bytes) override { return inner_->allocate_host(bytes); }

  HostRegistrationResult register_host(const void* data, size_t bytes) override {
    int call = 0;
    {
      std::lock_guard<std::mutex> lk(mu_);
      call = ++calls_;
    }
    if (before_register) before_register(call);
    if (call == hold_call) {
      std::unique_lock<std::mutex> lk(mu_);
      hold_timed_out_ =
          !copied_.wait_for(lk, std::chrono::seconds(10), [&] { return copies_ > 0; });
    }
    HostRegistrationResult r;
    if (call == refuse_call) {
      r.how = "refused (test: call " + std::to_string(call) + ")";
      return r;
    }
    const Entry range{Kind::reg, static_cast<const std::byte*>(data), bytes};
    {
      std::lock_guard<std::mutex> lk(mu_);
      live_.push_back(range);
      log_.push_back(range);
    }
    r.handle = std::make_unique<Registration>(*this, range);
    r.registered = true;
    r.readable_in_place = true;
    r.how = "registered (recording test backend)";
    return r;
  }

  std::unique_ptr<Stream> create_stream() override { return inner_->create_stream(); }
  std::unique_ptr<Stream> create_copy_stream() override { return inner_->create_copy_stream(); }
  std::unique_ptr<Event> create_event() override { return inner_->create_event(); }
  std::unique_ptr<Event> create_timing_event() override { return inner_->create_timing_event(); }
  Result<double> elapsed_seconds(Event& a, Event& b) override {
    return inner_->elapsed_seconds(a, b);
  }
  void copy_to_device(Stream& s, void* dst, const void* src, size_t bytes) override {
    inner_->copy_to_device(s, dst, src, bytes);
  }
  void copy_to_host(Stream& s, void* dst, const void* src, size_t bytes) override {
    inner_->copy_to_host(s, dst, src, bytes);
  }
  void copy_from_mapping(Stream& s, void* dst, const void* src, size_t bytes,
                         const MappedFile& file) override {
    {
      std::lock_guard<std::mutex> lk(mu_);
      const auto* b = static_cast<const std::byte*>(src);
      const bool inside = std::any_of(live_.begin(), live_.end(), [&](const Entry& e) {
        return b >= e.begin && b + bytes <= e.begin + e.bytes;
      });
      if (!inside) ++unregistered_copies_;
      log_.push_back(Entry{Kind::copy, b, bytes});
      ++copies_;
    }
    copied_.notify_all();
    inner_->copy_from_mapping(s, dst, src, bytes, file);
  }
  void copy_on_device(Stream& s, void* dst, const void* src, size_t bytes) override {
    inner_->copy_on_device(s, dst, src, bytes);
  }
  void fill_zero(Stream& s, void* dst, size_t bytes) override { inner_->fill_zero(s, dst, bytes); }
  void fill_byte(Stream& s, void* dst, uint8_t value, size_t bytes) override {
    inner_->fill_byte(s, dst, value, bytes);
  }
  Status run(Stream& s, const Op& op) override { return inner_->run(s, op); }
  Status begin_capture(Stream& s) override { return inner_->begin_capture(s); }
  Result<std::unique_ptr<Graph>> end_capture(Stream& s) override { return inner_->end_capture(s); }
  Status launch(Stream& s, const Graph& g) override { return inner_->launch(s, g); }
  void record(Event& e, Stream& s) override { inner_->record(e, s); }
  void wait(Stream& s, Event& e) override { inner_->wait(s, e); }
  Status synchronize(Stream& s) override {
    Status st = inner_->synchronize(s);
    std::lock_guard<std::mutex> lk(mu_);
    log_.push_back(Entry{Kind::sync});
    return st;
  }
  Status synchronize(Event& e) override { return inner_->synchronize(e); }

 protected:
  void free(void* data, size_t bytes) override { DeviceBuffer(inner_.get(), data, bytes).reset(); }
  Result<RawDeviceMemory> device_alloc(size_t /*bytes*/) override {
    return make_error(ErrorCode::internal, "recording backend: memory comes from the CPU one");
  }

 private:
  class Registration final : public HostRegistration {
   public:
    Registration(RecordingBackend& owner, Entry range) : owner_(owner), range_(range) {}
    ~Registration() override { owner_.release(range_); }
    Registration(const Registration&) = delete;
    Registration& operator=(const Registration&) = delete;

   private:
    RecordingBackend& owner_;
    Entry range_;
  };

  void release(const Entry& range) {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = std::find_if(live_.begin(), live_.end(), [&](const Entry& e) {
      return e.begin == range.begin && e.bytes == range.bytes;
    });
    if (it != live_.end()) live_.erase(it);
    log_.push_back(Entry{Kind::unreg, range.begin, range.bytes});
  }

  std::unique_ptr<Backend> inner_;
  mutable std::mutex mu_;
  std::condition_variable copied_;
  int calls_ = 0;
  int copies_ = 0;
  int unregistered_copies_ = 0;
  bool hold_timed_out_ = false;
  std::vector<Entry> live_;
  std::vector<Entry> log_;
};

// Pieces of `piece` bytes over every shard of the checkpoint.
int pieces_of(const Checkpoint& c, uint64_t piece) {
  int n = 0;
  for (const SafetensorsFile& f : c.files()) {
    n += static_cast<int>((f.file_bytes().size() + piece - 1) / piece);
  }
  return n;
}

size_t first_index(const std::vector<RecordingBackend::Entry>& log, RecordingBackend::Kind k) {
  for (size_t i = 0; i < log.size(); ++i) {
    if (log[i].kind == k) return i;
  }
  return log.size();
}

size_t last_index(const std::vector<RecordingBackend::Entry>& log, RecordingBackend::Kind k,
                  size_t before) {
  size_t found = log.size();
  for (size_t i = 0; i < std::min(before, log.size()); ++i) {
    if (log[i].kind == k) found = i;
  }
  return found;
}

SessionOptions in_pieces(int threads, HostPath path = HostPath::registered) {
  SessionOptions o;
  o.inference.keep_all_logits = true;
  o.host_path = path;
  o.registration = {kPiece, threads};
  return o;
}

// The reference: all resident, the whole mapping registered in one call per shard.
InferenceResult all_resident(const TinyCheckpoint& m) {
  SessionOptions o;
  o.inference.keep_all_logits = true;
  o.registration = {0, 0};
  auto r = m.run(o);
  EXPECT_TRUE(r.ok()) << r.error().to_string();
  return r.ok() ? *r : InferenceResult{};
}

// Cut copies cover what they were cut from, and each lies in one piece.
TEST(HostRegistrar, SplitCutsCopiesWherePiecesEnd) {
  TinyCheckpoint m("qwen3-tiny", "reg_split");
  RecordingBackend backend;
  auto reg = HostRegistrar::start(backend, m.checkpoint(), {kPiece, 0});
  ASSERT_TRUE(reg.ok()) << reg.error().to_string();
  EXPECT_EQ((*reg)->stats().pieces, static_cast<size_t>(pieces_of(m.checkpoint(), kPiece)));
  EXPECT_EQ(backend.live(), (*reg)->stats().pieces);
  auto tier = HostTier::open(backend, m.checkpoint(), HostPath::pageable);
  ASSERT_TRUE(tier.ok());
  size_t cut = 0;
  for (const WeightGroup& g : m.weights().groups) {
    const std::vector<HostCopy> whole = tier->copies(g).value();
    const std::vector<HostCopy> parts = (*reg)->split(whole);
    cut += parts.size() - whole.size();
    size_t k = 0;
    for (const HostCopy& c : whole) {
      uint64_t done = 0;
      while (done < c.bytes) {
        ASSERT_LT(k, parts.size());
        const HostCopy& p = parts[k++];
        EXPECT_EQ(p.src, c.src + done);
        EXPECT_EQ(p.dst_offset, c.dst_offset + done);
        EXPECT_EQ(p.file, c.file);
        EXPECT_TRUE((*reg)->ready(std::span<const HostCopy>(&p, 1)));
        // Inside one piece: the first and last byte in the same kPiece-sized block of its shard.
        const std::byte* base = nullptr;
        for (const SafetensorsFile& f : m.checkpoint().files()) {
          if (&f.mapping() == p.file) base = f.file_bytes().data();
        }
        ASSERT_NE(base, nullptr);
        EXPECT_EQ(static_cast<uint64_t>(p.src - base) / kPiece,
                  static_cast<uint64_t>(p.src + p.bytes - 1 - base) / kPiece);
        done += p.bytes;
      }
      EXPECT_EQ(done, c.bytes);
    }
    EXPECT_EQ(k, parts.size());
  }
  EXPECT_GT(cut, 0u) << "some group crosses a piece boundary";
  reg->reset();
  EXPECT_EQ(backend.live(), 0u);
}

// The pieces prioritize() names are registered next, in its order, before the rest in file order.
TEST(HostRegistrar, PrioritizedPiecesComeFirst) {
  TinyCheckpoint m("qwen3-tiny", "reg_order");
  RecordingBackend backend;
  std::promise<void> entered, go;
  std::shared_future<void> released = go.get_future().share();
  backend.before_register = [&](int call) {
    if (call != 2) return;
    entered.set_value();
    released.wait();
  };
  auto reg = HostRegistrar::start(backend, m.checkpoint(), {kPiece, 1});
  ASSERT_TRUE(reg.ok()) << reg.error().to_string();
  entered.get_future().wait();  // piece 1 is being registered; the rest wait in the queue
  auto tier = HostTier::open(backend, m.checkpoint(), HostPath::pageable);
  ASSERT_TRUE(tier.ok());
  const std::vector<HostCopy> last = tier->copies(m.weights().groups.back()).value();
  (*reg)->prioritize(last);
  go.set_value();
  ASSERT_TRUE((*reg)->wait_all().ok());
  const std::byte* base = m.checkpoint().files()[0].file_bytes().data();
  std::vector<uint64_t> order;  // piece index of each registration, in order
  for (const auto& e : backend.log()) {
    if (e.kind == RecordingBackend::Kind::reg && e.begin >= base &&
        e.begin < base + m.checkpoint().files()[0].file_bytes().size()) {
      order.push_back(static_cast<uint64_t>(e.begin - base) / kPiece);
    }
  }
  std::vector<uint64_t> want = {0, 1};
  for (const HostCopy& c : last) {
    if (&m.checkpoint().files()[0].mapping() != c.file) continue;
    for (uint64_t k = static_cast<uint64_t>(c.src - base) / kPiece;
         k <= static_cast<uint64_t>(c.src + c.bytes - 1 - base) / kPiece; ++k) {
      if (std::find(want.begin(), want.end(), k) == want.end()) want.push_back(k);
    }
  }
  ASSERT_GE(order.size(), want.size());
  EXPECT_EQ(std::vector<uint64_t>(order.begin(), order.begin() + static_cast<long>(want.size())),
            want);
  // The rest in file order.
  EXPECT_TRUE(std::is_sorted(order.begin() + static_cast<long>(want.size()), order.end()));
}

// (a) no copy reads a range before it is registered, nor spans two registrations; (b) a resident
// group is copied before the last piece is registered; the bytes are the all-resident run's, and
// every piece is released with the session.
void expect_overlapped_and_exact(const char* preset, int threads, SessionOptions o) {
  TinyCheckpoint m(preset, "reg_overlap");
  const InferenceResult want = all_resident(m);
  RecordingBackend backend(testing::hostile_streams());
  const int pieces = pieces_of(m.checkpoint(), kPiece);
  ASSERT_GT(pieces, 8);
  backend.hold_call = pieces;  // the last piece waits for a copy: overlap, or a 10 s stall
  {
    auto s = m.open(backend, o);
    ASSERT_TRUE(s.ok()) << s.error().to_string();
    EXPECT_EQ((*s)->tier().path(), HostPath::registered);
    EXPECT_EQ(backend.calls(), pieces);
    EXPECT_EQ(backend.live(), static_cast<size_t>(pieces));
    const StartTimes& t = (*s)->start_times();
    EXPECT_EQ(t.register_pieces, pieces);
    EXPECT_EQ(t.register_threads, threads);
    auto got = (*s)->run();
    ASSERT_TRUE(got.ok()) << got.error().to_string();
    expect_same(*got, want, std::string(preset) + ", " + std::to_string(threads) + " threads");
    auto again = (*s)->run();
    ASSERT_TRUE(again.ok()) << again.error().to_string();
    expect_same(*again, want, "second run");
  }
  EXPECT_EQ(backend.live(), 0u) << "every piece released with the session";
  EXPECT_EQ(backend.unregistered_copies(), 0);
  EXPECT_FALSE(backend.hold_timed_out()) << "no copy before the last piece: nothing overlapped";
  const auto log = backend.log();
  size_t last_reg = 0;
  for (size_t i = 0; i < log.size(); ++i) {
    if (log[i].kind == RecordingBackend::Kind::reg) last_reg = i;
  }
  EXPECT_LT(first_index(log, RecordingBackend::Kind::copy), last_reg);
}

TEST(RegistrationInPieces, ResidentLoadOverlapsTheRegistration) {
  for (const char* preset : {"qwen3-tiny", "alpamayo-tiny"}) {
    expect_overlapped_and_exact(preset, 1, in_pieces(1));
  }
}

TEST(RegistrationInPieces, ThreeThreadsAndStreamedGroups) {
  SessionOptions o = in_pieces(3);
  o.plan.resident = std::vector<std::string>{"text.layers.0", "text.head.0"};
  o.streaming.poison_slots = true;
  expect_overlapped_and_exact("qwen3-tiny", 3, o);
}

// The profiler times copies as a session streams them: none before the last piece is registered
// (copies beside the pinning threads time their contention), none across two pieces, every group
// once per pass, the passes one after the other.
TEST(RegistrationInPieces, TheProfilerTimesCopiesOnlyAfterTheLastPiece) {
  TinyCheckpoint m("qwen3-tiny", "reg_profile");
  RecordingBackend backend;
  // Slow pinning: a copy issued before the registration ends would come before its last piece.
  backend.before_register = [](int) { std::this_thread::sleep_for(std::chrono::milliseconds(2)); };
  auto tier = HostTier::open(backend, m.checkpoint(), HostPath::registered, {}, {kPiece, 1});
  ASSERT_TRUE(tier.ok()) << tier.error().to_string();
  constexpr int kRuns = 3;
  auto times = measure_group_copies(backend, m.weights(), *tier, kRuns);
  ASSERT_TRUE(times.ok()) << times.error().to_string();
  const size_t groups = m.weights().groups.size();
  ASSERT_EQ(times->dma_s.size(), groups);
  ASSERT_EQ(times->pass_s.size(), static_cast<size_t>(kRuns));
  for (size_t g = 0; g < groups; ++g) EXPECT_GE(times->dma_s[g], 0.0) << g;
  for (double t : times->pass_s) EXPECT_GT(t, 0.0);
  EXPECT_EQ(backend.unregistered_copies(), 0);
  const auto log = backend.log();
  const size_t last_reg = last_index(log, RecordingBackend::Kind::reg, log.size());
  ASSERT_LT(last_reg, log.size());
  EXPECT_GT(first_index(log, RecordingBackend::Kind::copy), last_reg);
  // One untimed pass and kRuns timed ones, each copying every group: the copies of the first
  // group (its first piece's start) come 1 + kRuns times, each pass's after the last group's.
  const std::vector<HostCopy> first_group = tier->transfer_copies(m.weights().groups[0]).value();
  const std::vector<HostCopy> last_group =
      tier->transfer_copies(m.weights().groups[groups - 1]).value();
  ASSERT_FALSE(first_group.empty());
  ASSERT_FALSE(last_group.empty());
  std::vector<size_t> firsts, lasts;
  for (size_t i = 0; i < log.size(); ++i) {
    if (log[i].kind != RecordingBackend::Kind::copy) continue;
    if (log[i].begin == first_group[0].src) firsts.push_back(i);
    if (log[i].begin == last_group[0].src) lasts.push_back(i);
  }
  ASSERT_EQ(firsts.size(), static_cast<size_t>(1 + kRuns));
  ASSERT_EQ(lasts.size(), static_cast<size_t>(1 + kRuns));
  for (size_t r = 0; r + 1 < firsts.size(); ++r) {
    EXPECT_LT(firsts[r], lasts[r]);
    EXPECT_LT(lasts[r], firsts[r + 1]) << "pass " << r << " ends before the next begins";
  }
  EXPECT_FALSE(measure_group_copies(backend, m.weights(), *tier, 0).ok());
}

// (c) a piece refused part-way, after copies out of earlier pieces were issued: auto falls back
// to the bounce ring with the all-resident bytes, registered is an error naming the piece; either
// way nothing stays registered, and no piece is released before a synchronization that follows
// every copy out of the mapping.
TEST(RegistrationInPieces, APieceRefusedPartWayLeavesNothingRegistered) {
  TinyCheckpoint m("qwen3-tiny", "reg_refused");
  const InferenceResult want = all_resident(m);
  const int pieces = pieces_of(m.checkpoint(), kPiece);
  for (HostPath path : {HostPath::automatic, HostPath::registered}) {
    for (int threads : {1, 0}) {
      const std::string what =
          std::string(host_path_name(path)) + ", " + std::to_string(threads) + " threads";
      RecordingBackend backend(testing::hostile_streams());
      backend.refuse_call = pieces / 2;
      if (threads > 0) backend.hold_call = pieces / 2;  // refused once copies are in flight
      auto s = m.open(backend, in_pieces(threads, path));
      EXPECT_EQ(backend.live(), 0u) << what;
      const auto log = backend.log();
      const size_t first_unreg = first_index(log, RecordingBackend::Kind::unreg);
      ASSERT_LT(first_unreg, log.size()) << what;
      const size_t last_copy = last_index(log, RecordingBackend::Kind::copy, first_unreg);
      if (last_copy < log.size()) {
        EXPECT_LT(last_copy, last_index(log, RecordingBackend::Kind::sync, first_unreg))
            << what << ": a piece released while a copy out of it may still run";
      }
      if (threads > 0) {
        EXPECT_LT(last_copy, log.size()) << what << ": the refusal came after copies began";
      }
      if (path == HostPath::registered) {
        ASSERT_FALSE(s.ok()) << what;
        EXPECT_NE(s.error().message.find("refused (test: call"), std::string::npos)
            << s.error().message;
        continue;
      }
      ASSERT_TRUE(s.ok()) << what << ": " << s.error().to_string();
      EXPECT_EQ((*s)->tier().path(), HostPath::bounce) << what;
      EXPECT_NE((*s)->tier().how().find("refused (test: call"), std::string::npos)
          << (*s)->tier().how();
      if (threads > 0) {
        EXPECT_NE((*s)->tier().how().find("part-way"), std::string::npos) << (*s)->tier().how();
        EXPECT_GT((*s)->start_times().fallback_s, 0.0);
      }
      auto got = (*s)->run();
      ASSERT_TRUE(got.ok()) << what << ": " << got.error().to_string();
      expect_same(*got, want, what);
      EXPECT_EQ(backend.live(), 0u);
    }
  }
}

// The session's parts fit in its open time, and the CLI's total holds them all.
TEST(StartTimes, SessionPartsAddUp) {
  TinyCheckpoint m("qwen3-tiny", "reg_times");
  auto backend = create_cpu_backend();
  auto s = m.open(*backend, in_pieces(1));
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  const StartTimes& t = (*s)->start_times();
  for (double v : {t.tier_s, t.plan_s, t.reserve_s, t.upload_s, t.upload_wait_s, t.register_wait_s,
                   t.slots_s, t.runner_s, t.register_s}) {
    EXPECT_GE(v, 0.0);
  }
  EXPECT_LE(t.upload_wait_s, t.upload_s);
  EXPECT_GE(t.plan_context_s, 0.0);
  EXPECT_GE(t.plan_choose_s, 0.0);
  EXPECT_LE(t.plan_context_s + t.plan_choose_s, t.plan_s + 1e-6);  // parts of planning
  const double parts =
      t.tier_s + t.plan_s + t.reserve_s + t.upload_s + t.register_wait_s + t.slots_s + t.runner_s;
  EXPECT_LE(parts, t.open_s + 1e-6);
  EXPECT_GT(t.open_s, 0.0);
  EXPECT_GE(t.register_pieces, 1);
  StartTimes cli;
  cli.config_s = 0.5;
  cli.total_s = 2.0;
  cli.take_session(t);
  EXPECT_DOUBLE_EQ(cli.other_s(), 2.0 - 0.5 - t.open_s);
  EXPECT_EQ(cli.register_pieces, t.register_pieces);
}

// `run --json` and `bench --json` carry the start object, its parts within its total.
TEST(StartTimes, RunAndBenchReportTheStart) {
  TinyCheckpoint m("qwen3-tiny", "reg_cli");
  const std::string model = " --model " + m.dir() + " --backend cpu --register-piece 64KiB";
  const testing::CliRun run = testing::run_ferry("run" + model + " --json --tokens 2 --quiet");
  ASSERT_EQ(run.code, 0) << run.err;
  const testing::CliRun bench = testing::run_ferry(
      "bench" + model + " --json --runs 1 --warmup 0 --prompt-tokens 20 --tokens 2 --quiet");
  ASSERT_EQ(bench.code, 0) << bench.err;
  for (const testing::CliRun* o : {&run, &bench}) {
    const nlohmann::json j = nlohmann::json::parse(o->out);
    ASSERT_TRUE(j.contains("start")) << o->out;
    const nlohmann::json& s = j["start"];
    for (const char* key :
         {"total_s", "config_s", "checkpoint_s", "backend_s", "tier_s", "plan_s", "reserve_s",
          "upload_s", "upload_wait_s", "register_wait_s", "slots_s", "fallback_s", "runner_s",
          "open_s", "other_s", "register_s", "register_pieces", "register_hidden_s"}) {
      EXPECT_TRUE(s.contains(key)) << key;
    }
    EXPECT_GT(s["register_pieces"].get<int>(), 1);
    ASSERT_TRUE(s.contains("plan_parts"));
    EXPECT_LE(
        s["plan_parts"]["context_s"].get<double>() + s["plan_parts"]["choose_s"].get<double>(),
        s["plan_s"].get<double>() + 1e-6);
    EXPECT_GE(s["plan_parts"]["evaluations"].get<int64_t>(), 0);
    EXPECT_GE(s["total_s"].get<double>(), s["open_s"].get<double>() + s["config_s"].get<double>() +
                                              s["checkpoint_s"].get<double>() +
                                              s["backend_s"].get<double>());
    EXPECT_GE(s["other_s"].get<double>(), 0.0);
    EXPECT_DOUBLE_EQ(j["open_s"].get<double>(), s["open_s"].get<double>());
  }
  // The old order: one piece per shard, all before planning.
  const testing::CliRun serial = testing::run_ferry("run --model " + m.dir() +
                                                    " --backend cpu --json --tokens 2 --quiet "
                                                    "--register-piece 0 --register-threads 0");
  ASSERT_EQ(serial.code, 0) << serial.err;
  const nlohmann::json s = nlohmann::json::parse(serial.out)["start"];
  EXPECT_EQ(s["register_pieces"].get<size_t>(), m.checkpoint().files().size());
  EXPECT_EQ(s["register_threads"].get<int>(), 0);
  EXPECT_EQ(s["upload_wait_s"].get<double>(), 0.0);
  const testing::CliRun bad = testing::run_ferry("run" + model + " --register-piece 1x");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--register-piece"), std::string::npos) << bad.err;
  const testing::CliRun text = testing::run_ferry("run" + model + " --tokens 2 --quiet");
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("\nstart      "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("to the first inference ready"), std::string::npos) << text.out;
}

}  // namespace
}  // namespace ferry
