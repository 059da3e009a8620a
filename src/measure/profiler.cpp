#include "measure/profiler.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <span>
#include <tuple>

#include "core/stats.h"
#include "plan/schedule.h"
#include "plan/timeline_stats.h"

namespace ferry {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Times the host around the executor's calls (see profiler.h): host steps and launch gaps.
class HostTimer final : public GroupProvider {
 public:
  HostTimer(Backend& backend, GroupProvider& inner, const ModelWeights& weights)
      : backend_(backend), inner_(inner), weights_(weights) {}

  Status begin(Stream& stream, std::span<const Call> calls) override {
    calls_.assign(calls.begin(), calls.end());
    next_ = 0;
    pending_ = HostStep::none;
    return inner_.begin(stream, calls);
  }

  Result<void*> acquire(Stream& stream, const Call& call) override {
    const Clock::time_point now = Clock::now();
    if (pending_ != HostStep::none) {
      (pending_ == HostStep::sampling ? sampling : euler).push_back(seconds_between(ready_, now));
      pending_ = HostStep::none;
    } else if (next_ > 0 && calls_[next_ - 1].phase == call.phase) {
      launch.push_back(seconds_between(last_acquire_, now));
    }
    last_acquire_ = now;
    return inner_.acquire(stream, call);
  }

  Status release(Stream& stream, const Call& call) override {
    FERRY_RETURN_IF_ERROR(inner_.release(stream, call));
    const HostStep step = host_step_after(calls_, weights_, next_++);
    if (step != HostStep::none) {
      // The host step reads this call's output: it starts when the call's compute is done.
      FERRY_RETURN_IF_ERROR(backend_.synchronize(stream));
      ready_ = Clock::now();
      pending_ = step;
    }
    return {};
  }

  Status end_run(Stream& stream) override { return inner_.end_run(stream); }

  // A host step after the last call ends with the inference.
  void finish() {
    if (pending_ == HostStep::none) return;
    (pending_ == HostStep::sampling ? sampling : euler)
        .push_back(seconds_between(ready_, Clock::now()));
    pending_ = HostStep::none;
  }

  std::vector<double> sampling, euler, launch;

 private:
  Backend& backend_;
  GroupProvider& inner_;
  const ModelWeights& weights_;
  std::vector<Call> calls_;
  size_t next_ = 0;
  HostStep pending_ = HostStep::none;
  Clock::time_point ready_{};
  Clock::time_point last_acquire_{};
};

}  // namespace

Result<GroupCopyTimes> measure_group_copies(Backend& backend, const ModelWeights& weights,
                                            const HostTier& tier, int runs) {
  if (runs < 1) return make_error(ErrorCode::invalid_argument, "profile: runs must be at least 1");
  FERRY_RETURN_IF_ERROR(tier.wait_all());
  uint64_t largest = 0;
  std::vector<std::vector<HostCopy>> copies;
  copies.reserve(weights.groups.size());
  for (const WeightGroup& g : weights.groups) {
    largest = std::max(largest, g.bytes);
    FERRY_ASSIGN_OR_RETURN(std::vector<HostCopy> c, tier.transfer_copies(g));
    copies.push_back(std::move(c));
  }
  FERRY_ASSIGN_OR_RETURN(DeviceBuffer slot,
                         backend.allocate(std::max<uint64_t>(largest, 256), "profile slot"));
  std::unique_ptr<Stream> copy = backend.create_copy_stream();
  std::unique_ptr<Event> start = backend.create_timing_event();
  std::unique_ptr<Event> end = backend.create_timing_event();
  auto enqueue = [&](size_t g) {
    for (const HostCopy& c : copies[g]) {
      backend.copy_from_mapping(*copy, static_cast<char*>(slot.data()) + c.dst_offset, c.src,
                                c.bytes, *c.file);
    }
  };
  // Untimed: pages into the cache and their translations warm, clocks up.
  for (size_t g = 0; g < copies.size(); ++g) enqueue(g);
  FERRY_RETURN_IF_ERROR(backend.synchronize(*copy));
  std::vector<std::vector<double>> times(copies.size());
  GroupCopyTimes out;
  for (int r = 0; r < runs; ++r) {
    double pass = 0;
    for (size_t g = 0; g < copies.size(); ++g) {
      backend.record(*start, *copy);
      enqueue(g);
      backend.record(*end, *copy);
      FERRY_RETURN_IF_ERROR(backend.synchronize(*copy));
      FERRY_ASSIGN_OR_RETURN(double t, backend.elapsed_seconds(*start, *end));
      times[g].push_back(std::max(t, 0.0));
      pass += times[g].back();
    }
    out.pass_s.push_back(pass);
  }
  out.dma_s.reserve(copies.size());
  for (std::vector<double>& t : times) out.dma_s.push_back(median(std::move(t)));
  return out;
}

Result<std::vector<StreamTimeline>> timed_runs(Session& session, int runs, int warmup) {
  if (runs < 1) return make_error(ErrorCode::invalid_argument, "profile: runs must be at least 1");
  for (int i = 0; i < warmup; ++i) FERRY_RETURN_IF_ERROR(session.run().status());
  StreamingProvider& streaming = session.streaming_provider();
  std::vector<StreamTimeline> timelines;
  streaming.set_timeline(true);
  for (int r = 0; r < runs; ++r) {
    Result<InferenceResult> run = session.run();
    Result<StreamTimeline> t =
        run.ok() ? streaming.timeline() : Result<StreamTimeline>(run.error());
    if (!t.ok()) {
      streaming.set_timeline(false);
      return t.error();
    }
    timelines.push_back(std::move(t).value());
  }
  streaming.set_timeline(false);
  return timelines;
}

void derive_call_times(CallMeasurements& m, const ModelWeights& weights,
                       const std::vector<StreamTimeline>* alone,
                       const std::vector<StreamTimeline>* under_copies) {
  const size_t groups = weights.groups.size();
  const ExeSplit piped = split_exe_times(m.timelines, groups);
  std::optional<ExeSplit> seq;
  if (alone != nullptr) seq = split_exe_times(*alone, groups);
  std::optional<ExeSplit> copying;
  if (under_copies != nullptr) copying = split_exe_times(*under_copies, groups);
  ExeTimes exe = exe_times(weights, piped, seq ? &*seq : nullptr, copying ? &*copying : nullptr);
  m.exe_s = std::move(exe.alone);
  m.exe_copying_s = std::move(exe.copying);
  m.idle_start_s = std::move(exe.idle_start);
  m.pipelined_dma_s = pipelined_copy_times(m.timelines, groups);
  // Host steps as the pipeline sees them (one launch of the gap is the predictor's own), alone
  // (from the sequential runs when there are some) and with a copy running; a step seen only
  // one way takes that time for both; a step no timeline shows, the host timer's time.
  const std::array<StepGaps, 3> gaps = host_step_gaps(m.timelines, weights);
  std::array<StepGaps, 3> alone_gaps{}, copying_gaps{};
  if (alone != nullptr) alone_gaps = host_step_gaps(*alone, weights);
  if (under_copies != nullptr) copying_gaps = host_step_gaps(*under_copies, weights);
  auto less_launch = [&](double gap) { return std::max(0.0, gap - m.host.launch_s); };
  auto set = [&](HostStep step, double timed, double& out_alone,
                 std::optional<double>& out_copying) {
    const StepGaps& g = gaps[static_cast<size_t>(step)];
    const StepGaps& sg = alone_gaps[static_cast<size_t>(step)];
    const std::optional<double> a = sg.any ? sg.any : g.alone;
    const std::optional<double> c =
        g.copying ? g.copying : copying_gaps[static_cast<size_t>(step)].any;
    out_copying.reset();
    if (!a && !g.any) {
      out_alone = timed;
      return;
    }
    out_alone = less_launch(a.value_or(c.value_or(g.any.value_or(0))));
    out_copying = less_launch(c.value_or(a.value_or(g.any.value_or(0))));
  };
  set(HostStep::sampling, m.timed_sampling_s, m.host.sampling_s, m.host.sampling_copying_s);
  set(HostStep::euler, m.timed_euler_s, m.host.euler_s, m.host.euler_copying_s);
  // Stage boundaries as the pipeline sees them, else as the sequential runs do.
  const std::array<std::optional<double>, kPhaseCount> entry = stage_entry_gaps(m.timelines);
  std::array<std::optional<double>, kPhaseCount> entry_alone{};
  if (alone != nullptr) entry_alone = stage_entry_gaps(*alone);
  for (size_t p = 0; p < entry.size(); ++p) {
    const std::optional<double> gap = entry[p] ? entry[p] : entry_alone[p];
    m.host.stage_entry_s[p].reset();
    if (gap) m.host.stage_entry_s[p] = less_launch(*gap);
  }
  m.event_s = piped.event_s;
  m.host.inputs_s = inputs_upload_time(m.timelines);
  if (!m.host.inputs_s && alone != nullptr) m.host.inputs_s = inputs_upload_time(*alone);
}

Result<CallMeasurements> measure_calls(Session& session, const ModelWeights& weights, int runs,
                                       int warmup) {
  CallMeasurements m;
  m.runs = runs;
  FERRY_ASSIGN_OR_RETURN(m.timelines, timed_runs(session, runs, warmup));
  HostTimer timer(session.backend(), session.provider(), weights);
  for (int r = 0; r < runs; ++r) {
    FERRY_RETURN_IF_ERROR(session.run(&timer).status());
    timer.finish();
  }
  m.host.launch_s = median(timer.launch);
  m.timed_sampling_s = median(std::move(timer.sampling));
  m.timed_euler_s = median(std::move(timer.euler));
  derive_call_times(m, weights, nullptr);
  return m;
}

Profile measured_profile(const ModelWeights& weights, const std::vector<double>& dma_s,
                         const CallMeasurements& calls, const MachineLimits& limits,
                         const std::string& device, const std::string& byte_path,
                         const Workload& workload, double* pipeline_ratio) {
  MachineRates rates;
  rates.device = device;
  rates.byte_path = byte_path;
  rates.peak_flops = limits.gemm_flops;
  rates.memory_bandwidth = limits.copy_bandwidth;
  rates.host = calls.host;
  double link = limits.h2d_bandwidth;
  for (size_t g = 0; g < weights.groups.size() && g < dma_s.size(); ++g) {
    if (dma_s[g] > 0) {
      link = std::max(link, static_cast<double>(weights.groups[g].bytes) / dma_s[g]);
    }
  }
  rates.link_bytes_per_s = std::clamp(link, 1.0, kMaxLinkRate);
  Profile p = profile_skeleton(weights, rates, "measured");
  p.runs = calls.runs;
  p.workload = profile_workload(workload);
  const std::vector<double> dma = pipelined_dma(dma_s, calls.pipelined_dma_s, pipeline_ratio);
  for (size_t g = 0; g < weights.groups.size(); ++g) {
    if (g < dma.size()) p.groups[g].dma_s = dma[g];
    if (g < calls.exe_s.size()) p.groups[g].exe_s = calls.exe_s[g];
    if (g < calls.exe_copying_s.size()) p.groups[g].exe_copying_s = calls.exe_copying_s[g];
    if (g < calls.idle_start_s.size()) {
      for (size_t ph = 0; ph < kPhaseCount; ++ph) {
        if (p.groups[g].exe_s[ph]) p.groups[g].idle_start_s[ph] = calls.idle_start_s[g][ph];
      }
    }
    if (g < calls.exe_mapped_s.size()) {
      for (size_t ph = 0; ph < kPhaseCount; ++ph) {
        if (p.groups[g].exe_s[ph]) p.groups[g].exe_mapped_s[ph] = calls.exe_mapped_s[g][ph];
      }
    }
  }
  return p;
}

}  // namespace ferry
