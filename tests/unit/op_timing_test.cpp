// OpTimingBackend (`ferry bench --op-profile`): a tiny Alpamayo inference through the decorator
// gives the same outputs as without it, and every op the model emits lands in its phase's
// buckets. The reference for "what the model emits" is an independent recording decorator under
// the timer, labelled by its own provider wrapper from each Call.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/op_timing_backend.h"
#include "cli/op_timing_report.h"
#include "exec/executor.h"
#include "exec/session.h"
#include "measure/op_timing_provider.h"
#include "model/call_sequence.h"
#include "model/inference.h"
#include "model/presets.h"
#include "scratch_dir.h"
#include "text_test_model.h"

namespace ferry {
namespace {

// Counts what passes through, per (phase, kind) and per (phase, step), and forwards it all.
class RecordingBackend final : public Backend {
 public:
  explicit RecordingBackend(Backend& inner) : inner_(inner) {}

  std::string phase = "other";
  int step = 0;
  std::map<std::pair<std::string, std::string>, int64_t> counts;  // (phase, kind) -> ops
  std::map<std::pair<std::string, std::string>, uint64_t> bytes;  // (phase, kind) -> bytes
  std::map<std::pair<std::string, int>, int64_t> per_step;        // (phase, step) -> ops
  int64_t syncs = 0;

  std::string_view name() const override { return inner_.name(); }
  DeviceInfo info() const override { return inner_.info(); }
  Result<DeviceBuffer> allocate(size_t n, std::string_view purpose = "other") override {
    return inner_.allocate(n, purpose);
  }
  std::unique_ptr<Stream> create_stream() override { return inner_.create_stream(); }
  std::unique_ptr<Event> create_event() override { return inner_.create_event(); }
  std::unique_ptr<Event> create_timing_event() override { return inner_.create_timing_event(); }
  Result<double> elapsed_seconds(Event& start, Event& end) override {
    return inner_.elapsed_seconds(start, end);
  }
  std::optional<uint64_t> device_free_bytes() const override { return inner_.device_free_bytes(); }
  void copy_to_device(Stream& s, void* d, const void* h, size_t n) override {
    note("copy_to_device", n);
    inner_.copy_to_device(s, d, h, n);
  }
  void copy_to_host(Stream& s, void* h, const void* d, size_t n) override {
    note("copy_to_host", n);
    inner_.copy_to_host(s, h, d, n);
  }
  void copy_on_device(Stream& s, void* d, const void* src, size_t n) override {
    note("copy_on_device", n);
    inner_.copy_on_device(s, d, src, n);
  }
  void fill_zero(Stream& s, void* d, size_t n) override {
    note("fill_zero", n);
    inner_.fill_zero(s, d, n);
  }
  void fill_byte(Stream& s, void* d, uint8_t v, size_t n) override {
    note("fill_byte", n);
    inner_.fill_byte(s, d, v, n);
  }
  Status run(Stream& s, const Op& op) override {
    FERRY_RETURN_IF_ERROR(inner_.run(s, op));
    note(std::string(op_name(op)), 0);
    return {};
  }
  // Graphs would hide replayed ops from the counts: the profiled runs go ungraphed.
  Status begin_capture(Stream&) override { return make_error(ErrorCode::unsupported, "no graphs"); }
  Result<std::unique_ptr<Graph>> end_capture(Stream&) override {
    return make_error(ErrorCode::unsupported, "no graphs");
  }
  Status launch(Stream&, const Graph&) override {
    return make_error(ErrorCode::unsupported, "no graphs");
  }
  void record(Event& e, Stream& s) override { inner_.record(e, s); }
  void wait(Stream& s, Event& e) override { inner_.wait(s, e); }
  Status synchronize(Stream& s) override {
    ++syncs;
    return inner_.synchronize(s);
  }
  Status synchronize(Event& e) override { return inner_.synchronize(e); }

 protected:
  void free(void* data, size_t n) override { DeviceBuffer(&inner_, data, n).reset(); }
  Result<RawDeviceMemory> device_alloc(size_t) override {
    return make_error(ErrorCode::internal, "memory comes from the wrapped backend");
  }

 private:
  void note(const std::string& kind, size_t n) {
    counts[{phase, kind}] += 1;
    bytes[{phase, kind}] += n;
    per_step[{phase, step}] += 1;
  }
  Backend& inner_;
};

class RecordingProvider final : public GroupProvider {
 public:
  RecordingProvider(GroupProvider& inner, RecordingBackend& rec) : inner_(inner), rec_(rec) {}
  // The inputs go up before the first call, in its phase (as OpTimingProvider counts them).
  Status begin(Stream& stream, std::span<const Call> calls) override {
    if (!calls.empty()) rec_.phase = phase_name(calls.front().phase);
    return inner_.begin(stream, calls);
  }
  Result<void*> acquire(Stream& stream, const Call& call) override {
    rec_.phase = phase_name(call.phase);
    rec_.step = call.step;
    return inner_.acquire(stream, call);
  }
  Status release(Stream& stream, const Call& call) override { return inner_.release(stream, call); }

 private:
  GroupProvider& inner_;
  RecordingBackend& rec_;
};

class OpTimedAlpamayo : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = preset("alpamayo-tiny");
    ASSERT_TRUE(c.ok());
    config_ = *c;
    ASSERT_TRUE(testing::write_test_checkpoint(dir_, config_, 1).ok());
    auto weights = describe_weights(config_);
    ASSERT_TRUE(weights.ok());
    weights_ = std::move(*weights);
    auto ckpt = Checkpoint::open(dir_);
    ASSERT_TRUE(ckpt.ok());
    ASSERT_TRUE(bind_checkpoint(weights_, *ckpt).ok());
    ckpt_.emplace(std::move(*ckpt));
    cpu_ = create_cpu_backend();
    w_.num_images = 2;
    w_.image_height = 64;
    w_.image_width = 96;
    w_.prompt_tokens = 120;
    w_.gen_tokens = 4;
    w_.flow_steps = 3;
    w_.seed = 5;
    // As `bench --op-profile` does: a session with every group resident, whose provider the
    // profiled run then borrows.
    auto session = Session::open(*cpu_, config_, weights_, *ckpt_, w_, SessionOptions{});
    ASSERT_TRUE(session.ok()) << session.error().to_string();
    session_ = std::move(*session);
  }

  testing::ScratchDir scratch_{"ferry_op_timing", /*create=*/false};
  std::string dir_ = scratch_.str();
  ModelConfig config_;
  ModelWeights weights_;
  std::optional<Checkpoint> ckpt_;
  std::unique_ptr<Backend> cpu_;
  Workload w_;
  std::unique_ptr<Session> session_;
};

TEST_F(OpTimedAlpamayo, SameOutputsEveryOpCountedInItsPhaseTimesWithinTheWall) {
  auto plain = session_->run();
  ASSERT_TRUE(plain.ok()) << plain.error().to_string();

  RecordingBackend rec(*cpu_);
  OpTimingBackend timer(rec);
  RecordingProvider rec_provider(session_->provider(), rec);
  OpTimingProvider provider(rec_provider, timer);
  InferenceOptions ungraphed;
  ungraphed.exec.graphs = false;
  auto prof = run_inference(timer, config_, weights_, provider, w_, ungraphed);
  ASSERT_TRUE(prof.ok()) << prof.error().to_string();

  // Identical outputs.
  EXPECT_EQ(prof->tokens, plain->tokens);
  EXPECT_EQ(prof->logits_hash, plain->logits_hash);
  EXPECT_EQ(prof->prefill_logits_hash, plain->prefill_logits_hash);
  EXPECT_EQ(prof->actions_hash, plain->actions_hash);
  EXPECT_EQ(prof->actions, plain->actions);

  // Every (phase, kind) the model emitted has the same count and bytes in the op timing.
  const std::vector<OpBucket> buckets = timer.buckets();
  std::map<std::pair<std::string, std::string>, int64_t> counts;
  std::map<std::pair<std::string, std::string>, uint64_t> bytes;
  std::map<std::string, double> op_seconds;
  std::map<std::string, int64_t> phase_ops;
  for (const OpBucket& b : buckets) {
    EXPECT_GT(b.count, 0) << b.label();
    EXPECT_GE(b.seconds, 0.0) << b.label();
    counts[{b.phase, b.kind}] += b.count;
    bytes[{b.phase, b.kind}] += b.bytes;
    op_seconds[b.phase] += b.seconds;
    phase_ops[b.phase] += b.count;
  }
  EXPECT_EQ(counts, rec.counts);
  EXPECT_EQ(bytes, rec.bytes);
  // The timer synchronized after each of them, and nothing ran before the first call.
  int64_t total = 0;
  for (const auto& [key, n] : rec.counts) total += n;
  EXPECT_GE(rec.syncs, total);
  EXPECT_EQ(phase_ops.count("other"), 0u);

  // The model's op kinds, each phase: none missing (a floor, whatever else a model adds).
  std::set<std::string> kinds;
  for (const auto& [key, n] : counts) kinds.insert(key.first + " " + key.second);
  for (const char* k : {"vision linear",       "vision layer_norm",     "vision attention",
                        "vision rope",         "vision copy_to_device", "prefill linear",
                        "prefill rms_norm",    "prefill attention",     "prefill qk_norm_rope",
                        "prefill swiglu",      "prefill gather_rows",   "prefill copy_to_host",
                        "decode linear",       "decode attention",      "decode rms_norm",
                        "decode copy_to_host", "expert linear",         "expert attention",
                        "expert rms_norm",     "expert copy_to_host",   "decode add_rms_norm",
                        "expert add_rms_norm", "expert qk_norm_rope"}) {
    EXPECT_TRUE(kinds.count(k)) << k;
  }

  // Decode and expert: every step emits the same ops, so a phase's count is steps x ops per step,
  // with the steps from the call sequence. The expert's first step also builds its rotary table
  // (one copy_to_device of positions, one rope_table), reused by the later steps.
  auto calls = call_sequence(weights_, config_, w_);
  ASSERT_TRUE(calls.ok());
  std::map<std::string, std::set<int>> steps;
  for (const Call& c : *calls) steps[phase_name(c.phase)].insert(c.step);
  ASSERT_EQ(steps["decode"].size(), static_cast<size_t>(decode_steps(config_, w_)));
  ASSERT_EQ(steps["expert"].size(), static_cast<size_t>(w_.flow_steps));
  ASSERT_GE(w_.flow_steps, 2);
  EXPECT_EQ((counts[{"expert", "rope_table"}]), 1);
  for (const char* phase : {"decode", "expert"}) {
    const int64_t once = std::string(phase) == "expert" ? 2 : 0;
    const int64_t per_step = rec.per_step[{phase, 1}];
    EXPECT_GT(per_step, 0) << phase;
    for (int s : steps[phase]) {
      EXPECT_EQ((rec.per_step[{phase, s}]), per_step + (s == 0 ? once : 0)) << phase << s;
    }
    EXPECT_EQ(phase_ops[phase], static_cast<int64_t>(steps[phase].size()) * per_step + once)
        << phase;
  }

  // Op times are disjoint intervals inside their phase's wall time.
  for (Phase p : {Phase::vision, Phase::prefill, Phase::decode, Phase::expert}) {
    const std::string name = phase_name(p);
    EXPECT_GT(phase_ops[name], 0) << name;
    EXPECT_GT(op_seconds[name], 0.0) << name;
    EXPECT_LE(op_seconds[name], prof->times.of(p)) << name;
  }

  // The summary keeps every op and orders by time.
  const std::vector<cli::PhaseOpTimes> summary = cli::summarize_op_times(buckets, prof->times);
  ASSERT_EQ(summary.size(), kPhaseCount);
  for (const cli::PhaseOpTimes& p : summary) {
    EXPECT_EQ(p.ops, phase_ops[p.phase]) << p.phase;
    EXPECT_DOUBLE_EQ(p.op_seconds, op_seconds[p.phase]) << p.phase;
    for (size_t i = 1; i < p.buckets.size(); ++i) {
      EXPECT_GE(p.buckets[i - 1].seconds, p.buckets[i].seconds);
    }
  }
}

TEST(OpTimingBackend, ShapeSignatures) {
  uint16_t d = 0;  // never read: signatures look at shapes only
  Linear lin{make_view(&d, DType::bf16, 11520, 1152), make_view(&d, DType::bf16, 3456, 1152),
             make_view(&d, DType::bf16, 1, 3456), make_view(&d, DType::bf16, 11520, 3456),
             Activation::gelu_tanh};
  OpSignature s = op_signature(lin);
  EXPECT_EQ(s.kind, "linear");
  EXPECT_EQ(s.shape, "11520x1152 -> 3456 +bias gelu_tanh");
  EXPECT_EQ(s.keys, -1);

  lin.bias = {};
  lin.act = Activation::none;
  lin.x.dtype = DType::f32;
  lin.y.dtype = DType::f32;
  EXPECT_EQ(op_signature(lin).shape, "11520x1152 -> 3456 in f32 out f32");

  Attention a;
  a.q = make_view(&d, DType::bf16, 1, 4096);
  a.kv[0] = KvSpan{make_view(&d, DType::bf16, 3000, 1024), make_view(&d, DType::bf16, 3000, 1024)};
  a.kv[1] = KvSpan{make_view(&d, DType::bf16, 8, 1024), make_view(&d, DType::bf16, 8, 1024)};
  a.num_spans = 2;
  a.num_heads = 32;
  a.num_kv_heads = 8;
  a.head_dim = 128;
  a.causal = true;
  s = op_signature(a);
  EXPECT_EQ(s.kind, "attention");
  EXPECT_EQ(s.shape, "S=1 h=32/8 d=128 causal spans=2");
  EXPECT_EQ(s.keys, 3008);
}

TEST(OpTimingBackend, AttentionBucketKeepsTheKeyRangeAndCopiesTheirBytes) {
  auto cpu = create_cpu_backend();
  OpTimingBackend timer(*cpu);
  auto stream = timer.create_stream();
  std::vector<uint16_t> q(2 * 8, 0x3f80), k(6 * 4, 0x3f80), out(2 * 8);
  timer.set_phase("decode");
  for (int64_t keys : {4, 6, 5}) {
    Attention a;
    a.q = make_view(q.data(), DType::bf16, 2, 8);
    a.kv[0] = KvSpan{make_view(k.data(), DType::bf16, keys, 4),
                     make_view(k.data(), DType::bf16, keys, 4)};
    a.out = make_view(out.data(), DType::bf16, 2, 8);
    a.num_heads = 2;
    a.num_kv_heads = 1;
    a.head_dim = 4;
    a.causal = true;
    a.q_pos0 = keys - 2;
    ASSERT_TRUE(timer.run(*stream, a).ok());
  }
  std::vector<uint16_t> host(16);
  timer.copy_to_host(*stream, host.data(), out.data(), 32);
  timer.copy_to_host(*stream, host.data(), out.data(), 32);
  ASSERT_TRUE(timer.synchronize(*stream).ok());

  const std::vector<OpBucket> b = timer.buckets();
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].count, 3);
  EXPECT_EQ(b[0].phase, "decode");
  EXPECT_EQ(b[0].label(), "attention S=2 h=2/1 d=4 causal L=4..6");
  EXPECT_EQ(b[1].label(), "copy_to_host 32 B");
  EXPECT_EQ(b[1].count, 2);
  EXPECT_EQ(b[1].bytes, 64u);
  timer.clear();
  EXPECT_TRUE(timer.buckets().empty());
}

TEST(OpTimingBackend, RejectedOpIsReturnedAndNotRecorded) {
  auto cpu = create_cpu_backend();
  OpTimingBackend timer(*cpu);
  auto stream = timer.create_stream();
  std::vector<uint16_t> x(64), y(64);
  const Cast bad{make_view(x.data(), DType::bf16, 8, 8), make_view(y.data(), DType::i32, 8, 8)};
  const Status st = timer.run(*stream, bad);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("cast"), std::string::npos) << st.error().message;
  EXPECT_TRUE(timer.buckets().empty());
  EXPECT_EQ(timer.phase(), "other");
}

TEST(OpTimingReport, PhasesInExecutionOrderSharesOfTheWallOthersLast) {
  auto bucket = [](std::string phase, std::string kind, std::string shape, int64_t count,
                   double seconds) {
    OpBucket b;
    b.phase = std::move(phase);
    b.kind = std::move(kind);
    b.shape = std::move(shape);
    b.count = count;
    b.seconds = seconds;
    return b;
  };
  const std::vector<OpBucket> buckets = {
      bucket("other", "fill_zero", "64 B", 1, 0.001),
      bucket("decode", "linear", "1x64 -> 64", 20, 0.002),
      bucket("decode", "attention", "S=1 h=2/1 d=4 causal", 10, 0.004),
      bucket("prefill", "linear", "8x64 -> 64", 2, 0.003),
      bucket("decode", "linear", "1x64 -> 256", 10, 0.003),
  };
  PhaseTimes times;
  times.seconds = {0.0, 0.004, 0.010, 0.0};
  const auto phases = cli::summarize_op_times(buckets, times);
  ASSERT_EQ(phases.size(), 3u);  // vision and expert had no ops
  EXPECT_EQ(phases[0].phase, "prefill");
  EXPECT_EQ(phases[1].phase, "decode");
  EXPECT_EQ(phases[2].phase, "other");
  EXPECT_DOUBLE_EQ(phases[2].wall_seconds, -1.0);
  const cli::PhaseOpTimes& d = phases[1];
  EXPECT_EQ(d.ops, 40);
  EXPECT_DOUBLE_EQ(d.op_seconds, 0.009);
  ASSERT_EQ(d.buckets.size(), 3u);
  EXPECT_EQ(d.buckets[0].kind, "attention");
  EXPECT_EQ(d.buckets[1].shape, "1x64 -> 256");  // equal times keep first-seen order
  ASSERT_EQ(d.kinds.size(), 2u);
  EXPECT_EQ(d.kinds[0].kind, "linear");
  EXPECT_EQ(d.kinds[0].count, 30);
  EXPECT_DOUBLE_EQ(d.kinds[0].seconds, 0.005);

  const nlohmann::json j = cli::op_times_json(phases);
  EXPECT_TRUE(j["method"].get<std::string>().find("10 us") != std::string::npos);
  const auto& jd = j["phases"]["decode"];
  EXPECT_DOUBLE_EQ(jd["wall_s"].get<double>(), 0.010);
  EXPECT_EQ(jd["ops"].get<int64_t>(), 40);
  EXPECT_EQ(jd["ops_by_time"].size(), 3u);
  EXPECT_DOUBLE_EQ(jd["ops_by_time"][0]["share"].get<double>(), 0.4);
  EXPECT_DOUBLE_EQ(jd["ops_by_time"][0]["mean_us"].get<double>(), 400.0);
  EXPECT_TRUE(j["phases"]["other"]["wall_s"].is_null());
  // Without a wall time, shares are of the op sum.
  EXPECT_DOUBLE_EQ(j["phases"]["other"]["ops_by_time"][0]["share"].get<double>(), 1.0);
}

}  // namespace
}  // namespace ferry
