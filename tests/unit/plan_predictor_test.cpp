// The predictor against the paper's closed forms where they apply (Eq. 1, 2, 5, 6, 7 and the
// slope of Eq. 9), and against an independent longest-path evaluation of plan.h's schedule
// where they do not (consecutive residents, heterogeneous groups, 3+ slots, host steps,
// prefetch across stage and step boundaries).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "plan/lower_bound.h"
#include "plan/predictor.h"
#include "plan_toy_model.h"

namespace ferry {
namespace {

using testing::Toy;
using testing::ToyBuilder;

// A plan for a toy: the listed groups resident, the rest streamed through `slots` slots
// (1 = sequential), embeddings on the host.
Plan toy_plan(const Toy& t, const std::vector<int>& resident, int slots = 2) {
  Plan p;
  p.placement.assign(t.weights.groups.size(), Placement::streamed);
  for (size_t g = 0; g < t.weights.groups.size(); ++g) {
    if (host_placement_allowed(t.weights.groups[g])) p.placement[g] = Placement::host;
  }
  for (int g : resident) p.placement[static_cast<size_t>(g)] = Placement::resident;
  const uint64_t largest = largest_streamed_group(p, t.weights);
  p.mode = slots == 1 ? StreamMode::sequential : StreamMode::pipelined;
  p.slots = largest > 0 ? slots : 0;
  p.slot_bytes = align_group_bytes(largest);
  return p;
}

Prediction run(const Toy& t, const Plan& p, std::vector<CallTiming>* trace = nullptr) {
  auto r = predict(t.weights, t.schedule(), p, trace);
  EXPECT_TRUE(r.ok()) << r.error().message;
  return r.ok() ? r.value() : Prediction{};
}

// L uniform layers called `reps` times in one phase.
Toy chain(int layers, int reps, double dma, double exe, Phase phase = Phase::expert) {
  ToyBuilder b;
  const auto g =
      b.stack("expert.layers", GroupKind::expert_layer, layers, 1 << 20, dma, phase, exe);
  for (int r = 0; r < reps; ++r) b.step(g, phase, r);
  return b.build();
}

constexpr double kTol = 1e-12;

TEST(PlanPredictor, Eq1And2UniformChains) {
  const int L = 12;
  // Eq. 1: C_DMA < C_EXE, only the first copy shows.
  const Toy exe_bound = chain(L, 1, 2e-3, 5e-3);
  EXPECT_NEAR(run(exe_bound, toy_plan(exe_bound, {})).total_s, 2e-3 + L * 5e-3, kTol);
  // Eq. 2: C_DMA > C_EXE, copies back to back and the last layer's compute trails.
  const Toy dma_bound = chain(L, 1, 5e-3, 2e-3);
  const Prediction p = run(dma_bound, toy_plan(dma_bound, {}));
  EXPECT_NEAR(p.total_s, L * 5e-3 + 2e-3, kTol);
  EXPECT_EQ(p.copies, L);
  EXPECT_EQ(p.link_bytes, static_cast<uint64_t>(L) << 20);
  EXPECT_NEAR(p.copy_busy_s, L * 5e-3, kTol);
  EXPECT_NEAR(p.stall_s, L * 5e-3 - (L - 1) * 2e-3, kTol);
  // Every compute but the first overlaps a copy.
  EXPECT_NEAR(p.hidden_copy_s, (L - 1) * 2e-3, kTol);
}

TEST(PlanPredictor, Eq1And2HeterogeneousChains) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> low(1e-3, 2e-3), high(3e-3, 6e-3);
  for (int trial = 0; trial < 20; ++trial) {
    const int L = 3 + trial % 9;
    for (bool dma_heavy : {false, true}) {
      ToyBuilder b;
      std::vector<int> g;
      double sum_exe = 0, sum_dma = 0, first_dma = 0, last_exe = 0;
      for (int i = 0; i < L; ++i) {
        const double dma = dma_heavy ? high(rng) : low(rng);
        const double exe = dma_heavy ? low(rng) : high(rng);
        g.push_back(b.group("expert.layers." + std::to_string(i), GroupKind::expert_layer,
                            4096u * static_cast<uint64_t>(1 + i % 3), dma));
        b.exe(g.back(), Phase::expert, exe);
        sum_exe += exe;
        sum_dma += dma;
        if (i == 0) first_dma = dma;
        last_exe = exe;
      }
      b.step(g, Phase::expert, 0);
      const Toy t = b.build();
      const double expect = dma_heavy ? sum_dma + last_exe : first_dma + sum_exe;
      EXPECT_NEAR(run(t, toy_plan(t, {})).total_s, expect, kTol) << trial << " " << dma_heavy;
    }
  }
}

TEST(PlanPredictor, Eq5And6RepeatedModules) {
  const int L = 10;
  const double lo = 1e-3, hi = 4e-3;
  // One invocation: exactly Eq. 5 and Eq. 6 with R = 1.
  const Toy e1 = chain(L, 1, lo, hi), d1 = chain(L, 1, hi, lo);
  EXPECT_NEAR(run(e1, toy_plan(e1, {})).total_s, 1 * (lo + L * hi), kTol);
  EXPECT_NEAR(run(d1, toy_plan(d1, {})).total_s, 1 * (L * hi + lo), kTol);
  // R invocations: the paper's forms charge a leading copy (Eq. 5) or a trailing compute
  // (Eq. 6) per invocation; the executor prefetches across invocations, which hides all but
  // the first copy and all but the last compute.
  for (int R : {2, 5, 10}) {
    const Toy e = chain(L, R, lo, hi), d = chain(L, R, hi, lo);
    const double eq5 = R * (lo + L * hi), eq6 = R * (L * hi + lo);
    EXPECT_NEAR(run(e, toy_plan(e, {})).total_s, eq5 - (R - 1) * lo, kTol) << R;
    EXPECT_NEAR(run(d, toy_plan(d, {})).total_s, eq6 - (R - 1) * lo, kTol) << R;
  }
  // The first layer resident removes the one exposed copy of an EXE-bound module (Table IV).
  const Toy e = chain(L, 3, lo, hi);
  EXPECT_NEAR(run(e, toy_plan(e, {0})).total_s, 3 * L * hi, kTol);
}

TEST(PlanPredictor, Eq7HybridModule) {
  const int L = 8, N = 6;
  const double dma = 3e-3, prefill = 5e-3, decode = 0.5e-3;
  ToyBuilder b;
  const auto g =
      b.stack("text.layers", GroupKind::decoder_layer, L, 1 << 20, dma, Phase::prefill, prefill);
  for (int i : g) b.exe(i, Phase::decode, decode);
  b.step(g, Phase::prefill, 0);
  for (int s = 0; s < N; ++s) b.step(g, Phase::decode, s);
  const Toy t = b.build();
  const double eq7 = dma + L * prefill + N * (L * dma + decode);
  // Prefetch hides decode layer 0's copy behind prefill's last layer, and the trailing compute
  // of every decode step but the last behind the next step's copies.
  const Prediction p = run(t, toy_plan(t, {}));
  EXPECT_NEAR(p.total_s, eq7 - dma - (N - 1) * decode, kTol);
  // The split: prefill ends when its last layer does.
  EXPECT_NEAR(p.phases[phase_index(Phase::prefill)].wall_s, dma + L * prefill, kTol);
  EXPECT_NEAR(
      p.phases[phase_index(Phase::prefill)].wall_s + p.phases[phase_index(Phase::decode)].wall_s,
      p.total_s, kTol);
}

TEST(PlanPredictor, Eq9SlopeOfInterleavedResidents) {
  // Table III's VLM with N = 21: each middle layer kept resident saves N · C_DMA (Eq. 9's slope
  // B_mid · M = 21 × 10.9 ms), as long as residents stay apart.
  const Toy t = testing::paper_table3_toy(21, 10);
  std::vector<int> vlm;
  for (int i = 0; i < 36; ++i) {
    const WeightGroup* g = t.weights.find("text.layers." + std::to_string(i));
    vlm.push_back(static_cast<int>(g - t.weights.groups.data()));
  }
  const double base = run(t, toy_plan(t, {vlm[0]})).total_s;
  for (int k = 1; k <= 28; ++k) {
    std::vector<int> res;
    for (int i : interleaved_layers(k + 1, 36)) res.push_back(vlm[static_cast<size_t>(i)]);
    const double total = run(t, toy_plan(t, res)).total_s;
    EXPECT_NEAR(base - total, k * 21 * 10.9e-3, 1e-9) << k;
  }
}

TEST(PlanPredictor, ConsecutiveResidentsStarveTheCopyEngine) {
  // A DMA-bound chain with a run of c consecutive residents: with S slots the copy after the run
  // waits for the compute of the first streamed layer after it, which ends (c + 2) · C_EXE after
  // the last copy before the run; the ring lets the engine run S copies ahead. So the run costs
  // max(0, (c + 2) · C_EXE - S · C_DMA) against the same residents spread apart.
  const int L = 48;
  const double dma = 4e-3, exe = 1e-3;
  const Toy t = chain(L, 1, dma, exe);
  for (int slots : {2, 3, 4}) {
    for (int c = 1; c <= 12; ++c) {
      std::vector<int> run_of, spread;
      for (int i = 0; i < c; ++i) {
        run_of.push_back(12 + i);
        spread.push_back(8 + 3 * i);
      }
      const double consecutive = run(t, toy_plan(t, run_of, slots)).total_s;
      const double apart = run(t, toy_plan(t, spread, slots)).total_s;
      EXPECT_NEAR(consecutive - apart, std::max(0.0, (c + 2) * exe - slots * dma), 1e-12)
          << "slots " << slots << " c " << c;
    }
  }
}

TEST(PlanPredictor, SequentialModeOverlapsNothing) {
  const Toy t = chain(6, 2, 3e-3, 2e-3);
  const Prediction p = run(t, toy_plan(t, {2}, 1));
  EXPECT_NEAR(p.total_s, 2 * (5 * 3e-3 + 6 * 2e-3), kTol);
  EXPECT_EQ(p.hidden_copy_s, 0.0);
  EXPECT_EQ(p.hidden_fraction, 0.0);
}

TEST(PlanPredictor, PrefetchCrossesStagesAndHostSteps) {
  // EXE-bound vision, then DMA-bound decode steps ending in an LM head with a long sampling step.
  ToyBuilder b;
  const auto vit =
      b.stack("vision.blocks", GroupKind::vision_block, 4, 4096, 1e-3, Phase::vision, 5e-3);
  const int embed = b.group("text.embed", GroupKind::embedding, 1 << 20, 50e-3);
  const auto layers =
      b.stack("text.layers", GroupKind::decoder_layer, 4, 8192, 2e-3, Phase::decode, 0.5e-3);
  const int head = b.group("text.head", GroupKind::lm_head, 8192, 2e-3);
  b.exe(embed, Phase::decode, 0.1e-3).exe(head, Phase::decode, 0.5e-3);
  b.host(/*sampling*/ 3e-3, 0, 0);
  b.step(vit, Phase::vision, 0);
  std::vector<int> step = {embed};
  step.insert(step.end(), layers.begin(), layers.end());
  step.push_back(head);
  for (int s = 0; s < 3; ++s) b.step(step, Phase::decode, s);
  const Toy t = b.build();
  std::vector<CallTiming> trace;
  const Prediction p = run(t, toy_plan(t, {}), &trace);
  // The first decode layer's copy ran during the vision stage: it starts on time.
  const size_t first_layer = vit.size() + 1;
  EXPECT_LE(trace[first_layer].copy_end, trace[vit.size() - 1].compute_end);
  // The embedding stays on the host: never copied, no bytes over the link.
  EXPECT_LT(trace[vit.size()].copy_start, 0);
  EXPECT_EQ(p.link_bytes, 4u * 4096 + 3u * (4 * 8192 + 8192));
  // A copy runs during each sampling step but the last.
  for (int s = 0; s < 2; ++s) {
    const size_t h = vit.size() + 6 * static_cast<size_t>(s) + 5;  // the step's head call
    ASSERT_EQ(t.calls[h].group, head);
    const double host_start = trace[h].compute_end, host_end = trace[h].finished;
    EXPECT_NEAR(host_end - host_start, 3e-3, kTol);
    bool copying = false;
    for (const CallTiming& c : trace) {
      copying =
          copying || (c.copy_start >= 0 && c.copy_start < host_end && c.copy_end > host_start);
    }
    EXPECT_TRUE(copying) << s;
    // The next step's embedding waits for the host.
    EXPECT_NEAR(trace[h + 1].compute_start, host_end, kTol);
  }
  // The run ends with the last sampling step, and the phases add up to it.
  EXPECT_NEAR(p.total_s, trace.back().finished, kTol);
  double walls = 0;
  for (const PhaseTime& ph : p.phases) walls += ph.wall_s;
  EXPECT_NEAR(walls, p.total_s, kTol);
  EXPECT_NEAR(p.host_s, 3 * 3e-3, kTol);
  EXPECT_GE(p.hidden_fraction, 0.0);
  EXPECT_LE(p.hidden_fraction, 1.0);
}

TEST(PlanPredictor, LaunchOverheadShowsWhenComputeIsShorter) {
  ToyBuilder b;
  const auto g =
      b.stack("expert.layers", GroupKind::expert_layer, 5, 4096, 1e-3, Phase::expert, 1e-6);
  b.host(0, 0, 1e-5);
  b.step(g, Phase::expert, 0);
  const Toy t = b.build();
  Plan all = all_resident_plan(t.weights);
  EXPECT_NEAR(run(t, all).total_s, 5 * 1e-5 + 1e-6, kTol);
}

// plan.h's schedule as a graph: every event (copy k, compute i, host step i) ends at
// max over its predecessors' ends + its duration. Built from the rules' text, evaluated by a
// generic longest path; the predictor must agree on every event.
struct Event {
  double duration = 0;
  std::vector<int> after;  // events that must have ended
  double end = 0;
};

double longest_path(const Schedule& s, const Plan& plan, std::vector<double>* compute_end) {
  std::vector<Event> ev;
  auto add = [&](double d, std::vector<int> after) {
    ev.push_back(Event{d, std::move(after), 0});
    return static_cast<int>(ev.size() - 1);
  };
  const int slots = std::max(plan.slots, 1);
  std::vector<int> compute, copies, streamed_call;
  int host_prev = -1;  // the host's last event: a launch or a host step
  for (size_t i = 0; i < s.calls.size(); ++i) {
    const size_t g = static_cast<size_t>(s.calls[i].group);
    std::vector<int> launch_after;
    if (host_prev >= 0) launch_after.push_back(host_prev);
    const int launch = add(s.launch_s, launch_after);
    host_prev = launch;
    std::vector<int> after = {launch};
    if (!compute.empty()) after.push_back(compute.back());
    if (plan.placement[g] == Placement::streamed) {
      const size_t k = copies.size();
      std::vector<int> copy_after;
      if (k >= 1) copy_after.push_back(copies[k - 1]);
      if (k >= static_cast<size_t>(slots)) {
        copy_after.push_back(compute[static_cast<size_t>(streamed_call[k - slots])]);
      }
      if (plan.mode == StreamMode::sequential && !compute.empty()) {
        copy_after.push_back(compute.back());
      }
      copies.push_back(add(s.dma_s[g], copy_after));
      streamed_call.push_back(static_cast<int>(i));
      after.push_back(copies.back());
    }
    compute.push_back(add(s.exe_s[i], after));
    if (s.host_after[i] != HostStep::none) {
      host_prev = add(s.host_after_s[i], {host_prev, compute.back()});
    }
  }
  double total = 0;
  for (Event& e : ev) {  // events were added after all their predecessors
    double start = 0;
    for (int a : e.after) start = std::max(start, ev[static_cast<size_t>(a)].end);
    e.end = start + e.duration;
    total = std::max(total, e.end);
  }
  compute_end->clear();
  for (int c : compute) compute_end->push_back(ev[static_cast<size_t>(c)].end);
  return total;
}

TEST(PlanPredictor, AgreesWithTheScheduleAsAGraphOnRandomModels) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> time(0.1e-3, 5e-3), host(0, 2e-3);
  std::uniform_int_distribution<int> coin(0, 1), slots_pick(1, 5);
  for (int trial = 0; trial < 60; ++trial) {
    ToyBuilder b;
    b.host(host(rng), host(rng), coin(rng) ? host(rng) * 0.1 : 0);
    const int embed = b.group("text.embed", GroupKind::embedding, 1 << 16, 1e-2);
    std::vector<int> vit, text, expert;
    for (int i = 0; i < 3; ++i) {
      vit.push_back(b.group("vision.blocks." + std::to_string(i), GroupKind::vision_block,
                            4096u << (i % 3), time(rng)));
      b.exe(vit.back(), Phase::vision, time(rng));
    }
    for (int i = 0; i < 4; ++i) {
      text.push_back(b.group("text.layers." + std::to_string(i), GroupKind::decoder_layer,
                             8192u << (i % 2), time(rng)));
      b.exe(text.back(), Phase::prefill, time(rng)).exe(text.back(), Phase::decode, time(rng));
    }
    const int head = b.group("text.head", GroupKind::lm_head, 1 << 15, time(rng));
    b.exe(head, Phase::prefill, time(rng)).exe(head, Phase::decode, time(rng));
    b.exe(embed, Phase::prefill, time(rng)).exe(embed, Phase::decode, time(rng));
    expert.push_back(b.group("expert.in", GroupKind::expert_in, 2048, time(rng)));
    for (int i = 0; i < 3; ++i) {
      expert.push_back(
          b.group("expert.layers." + std::to_string(i), GroupKind::expert_layer, 8192, time(rng)));
    }
    expert.push_back(b.group("expert.out", GroupKind::expert_out, 2048, time(rng)));
    for (int g : expert) b.exe(g, Phase::expert, time(rng));
    std::vector<int> step = {embed};
    step.insert(step.end(), text.begin(), text.end());
    step.push_back(head);
    b.step(vit, Phase::vision, 0).step(step, Phase::prefill, 0);
    for (int s = 0; s < 3; ++s) b.step(step, Phase::decode, s);
    for (int s = 0; s < 2; ++s) b.step(expert, Phase::expert, s);
    const Toy t = b.build();
    std::vector<int> resident;
    for (size_t g = 1; g < t.weights.groups.size(); ++g) {
      if (coin(rng) && coin(rng)) resident.push_back(static_cast<int>(g));
    }
    const Plan plan = toy_plan(t, resident, slots_pick(rng));
    std::vector<CallTiming> trace;
    const Prediction p = run(t, plan, &trace);
    std::vector<double> compute_end;
    const double expect = longest_path(t.schedule(), plan, &compute_end);
    EXPECT_NEAR(p.total_s, expect, kTol) << trial;
    ASSERT_EQ(compute_end.size(), trace.size());
    for (size_t i = 0; i < trace.size(); ++i) {
      EXPECT_NEAR(trace[i].compute_end, compute_end[i], kTol) << trial << " call " << i;
    }
    double walls = 0;
    for (const PhaseTime& ph : p.phases) walls += ph.wall_s;
    EXPECT_NEAR(walls, p.total_s, kTol);
    EXPECT_LE(p.hidden_copy_s, p.copy_busy_s + kTol);
  }
}

TEST(PlanPredictor, CopiesSlowTheCallsTheyOverlap) {
  // A resident call, then two streamed ones through two slots. Copies: S1 [0, 6], S2 [6, 12].
  // R (4 alone, 8 copying) runs under copies all the way: ends at 8. S1 (5 alone, 10 copying)
  // starts at 8 under S2's copy: 4/10 of its work by 12, the rest alone (3): ends at 15. S2
  // starts at 15 with the link idle: ends at 20. With the link never slowing anything: 17.
  ToyBuilder b;
  const int r = b.group("expert.layers.0", GroupKind::expert_layer, 4096, 1);
  const int s1 = b.group("expert.layers.1", GroupKind::expert_layer, 4096, 6);
  const int s2 = b.group("expert.layers.2", GroupKind::expert_layer, 4096, 6);
  b.exe(r, Phase::expert, 4).exe(s1, Phase::expert, 5).exe(s2, Phase::expert, 5);
  b.step({r, s1, s2}, Phase::expert, 0);
  const Toy plain = b.build();
  b.exe_copying(r, Phase::expert, 8).exe_copying(s1, Phase::expert, 10);
  b.exe_copying(s2, Phase::expert, 10);
  const Toy slowed = b.build();
  const Plan plan = toy_plan(slowed, {r}, 2);
  EXPECT_NEAR(run(plain, plan).total_s, 17, kTol);
  std::vector<CallTiming> trace;
  const Prediction p = run(slowed, plan, &trace);
  EXPECT_NEAR(p.total_s, 20, kTol);
  ASSERT_EQ(trace.size(), 3u);
  EXPECT_NEAR(trace[0].compute_end, 8, kTol);
  EXPECT_NEAR(trace[1].compute_start, 8, kTol);
  EXPECT_NEAR(trace[1].compute_end, 15, kTol);
  EXPECT_NEAR(trace[2].compute_end, 20, kTol);
  EXPECT_NEAR(p.compute_busy_s, 8 + 7 + 5, kTol);
  // Sequential mode: copies and calls never overlap, so nothing is slowed.
  EXPECT_NEAR(run(slowed, toy_plan(slowed, {r}, 1)).total_s,
              run(plain, toy_plan(plain, {r}, 1)).total_s, kTol);
}

TEST(PlanPredictor, EveryCallDoesItsWorkAtTheRateOfTheLinkAroundIt) {
  // Random toys with copying times: from the trace alone, every copy obeys plan.h's rule and
  // every call's span holds exactly one call's work at 1/alone outside copies, 1/copying inside.
  std::mt19937 rng(23);
  std::uniform_real_distribution<double> time(0.1e-3, 5e-3), slow(1.0, 3.0);
  std::uniform_int_distribution<int> coin(0, 1), slots_pick(2, 5);
  for (int trial = 0; trial < 40; ++trial) {
    ToyBuilder b;
    b.host(time(rng), 0, coin(rng) ? 1e-5 : 0);
    std::vector<int> text;
    for (int i = 0; i < 6; ++i) {
      text.push_back(b.group("text.layers." + std::to_string(i), GroupKind::decoder_layer,
                             8192u << (i % 2), time(rng)));
      for (Phase ph : {Phase::prefill, Phase::decode}) {
        const double alone = time(rng);
        b.exe(text.back(), ph, alone).exe_copying(text.back(), ph, alone * slow(rng));
      }
    }
    const int head = b.group("text.head", GroupKind::lm_head, 1 << 14, time(rng));
    b.exe(head, Phase::prefill, time(rng)).exe(head, Phase::decode, time(rng));
    std::vector<int> step = text;
    step.push_back(head);
    b.step(step, Phase::prefill, 0);
    for (int s = 0; s < 3; ++s) b.step(step, Phase::decode, s);
    const Toy t = b.build();
    const Schedule s = t.schedule();
    std::vector<int> resident;
    for (size_t g = 0; g < t.weights.groups.size(); ++g) {
      if (coin(rng)) resident.push_back(static_cast<int>(g));
    }
    const Plan plan = toy_plan(t, resident, slots_pick(rng));
    std::vector<CallTiming> trace;
    run(t, plan, &trace);
    std::vector<std::pair<double, double>> copies;
    std::vector<size_t> user;  // per copy: its call
    for (size_t i = 0; i < trace.size(); ++i) {
      if (trace[i].copy_start < 0) continue;
      copies.emplace_back(trace[i].copy_start, trace[i].copy_end);
      user.push_back(i);
    }
    for (size_t k = 0; k < copies.size(); ++k) {
      double start = k > 0 ? copies[k - 1].second : 0;
      const size_t slots = static_cast<size_t>(plan.slots);
      if (k >= slots) start = std::max(start, trace[user[k - slots]].compute_end);
      EXPECT_NEAR(copies[k].first, start, kTol) << trial << " copy " << k;
    }
    for (size_t i = 0; i < trace.size(); ++i) {
      const double a = trace[i].compute_start, e = trace[i].compute_end;
      double under = 0;
      for (const auto& [cs, ce] : copies) under += std::max(0.0, std::min(e, ce) - std::max(a, cs));
      const double work = (e - a - under) / s.exe_s[i] + under / s.exe_copying_s[i];
      EXPECT_NEAR(work, 1.0, 1e-9) << trial << " call " << i;
    }
  }
}

TEST(PlanPredictor, RefusesAPlanForAnotherModel) {
  const Toy t = chain(4, 1, 1e-3, 1e-3);
  Plan p = toy_plan(t, {});
  p.placement.pop_back();
  EXPECT_FALSE(predict(t.weights, t.schedule(), p).ok());
}

// A call that starts on an idle engine (after its copy here) first spends its idle_start_s; one
// that follows the previous call's end does not.
TEST(PlanPredictor, AnIdleStartAddsItsTimeOnlyAfterAWait) {
  testing::ToyBuilder b(1e3);
  const int a = b.group("text.layers.0", GroupKind::decoder_layer, 1000, 2.0);
  const int r = b.group("text.layers.1", GroupKind::decoder_layer, 1000, 2.0);
  b.exe(a, Phase::decode, 1.0).exe(r, Phase::decode, 1.0);
  b.step({a, r}, Phase::decode, 0);
  b.host(0, 0, 0);
  testing::Toy t = b.build();
  for (GroupProfile& g : t.profile.groups) g.idle_start_s[phase_index(Phase::decode)] = 0.5;
  const Schedule s = t.schedule();
  Plan p;
  p.placement = {Placement::streamed, Placement::resident};
  p.slots = 2;
  p.slot_bytes = align_group_bytes(1000);
  std::vector<CallTiming> trace;
  auto got = predict(t.weights, s, p, &trace);
  ASSERT_TRUE(got.ok()) << got.error().message;
  EXPECT_DOUBLE_EQ(trace[0].compute_start, 2.0);  // waited for its copy [0, 2]
  EXPECT_DOUBLE_EQ(trace[0].compute_end, 3.5);    // 0.5 idle start + 1.0
  EXPECT_DOUBLE_EQ(trace[1].compute_end, 4.5);    // back to back: 1.0
  EXPECT_DOUBLE_EQ(got->total_s, 4.5);
}

// A stage boundary with a measured entry: the host waits for the stage's last call (the executor
// synchronizes there) and spends the entry before the next stage's first call, in place of the
// host step that call had (prefill's sampling); boundaries without one keep their own step.
TEST(PlanPredictor, AStageEntryIsAHostStepAtTheBoundary) {
  testing::ToyBuilder b(1e3);
  const int v = b.group("vision.blocks.0", GroupKind::vision_block, 1000, 2.0);
  const int l = b.group("text.layers.0", GroupKind::decoder_layer, 1000, 2.0);
  const int h = b.group("text.head", GroupKind::lm_head, 1000, 2.0);
  b.exe(v, Phase::vision, 1.0).exe(l, Phase::prefill, 1.0).exe(h, Phase::prefill, 1.0);
  b.exe(l, Phase::decode, 0.5).exe(h, Phase::decode, 0.5);
  b.step({v}, Phase::vision, 0).step({l, h}, Phase::prefill, 0).step({l, h}, Phase::decode, 0);
  b.host(/*sampling*/ 0.25, 0, 0);
  testing::Toy t = b.build();
  const Plan all = toy_plan(t, {v, l, h});
  // Without entries: vision runs straight into prefill, the sampling after prefill is 0.25.
  auto plain = predict(t.weights, t.schedule(), all);
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  EXPECT_DOUBLE_EQ(plain->total_s, 1.0 + 2.0 + 0.25 + 1.0 + 0.25);
  t.profile.host.stage_entry_s[phase_index(Phase::prefill)] = 0.125;
  t.profile.host.stage_entry_s[phase_index(Phase::decode)] = 0.5;  // sampling and setup
  const Schedule s = t.schedule();
  EXPECT_EQ(s.host_after[0], HostStep::stage);
  EXPECT_EQ(s.host_after[2], HostStep::stage);
  EXPECT_EQ(s.host_after[4], HostStep::sampling);  // the last call: no stage after it
  std::vector<CallTiming> trace;
  auto got = predict(t.weights, s, all, &trace);
  ASSERT_TRUE(got.ok()) << got.error().message;
  EXPECT_DOUBLE_EQ(trace[1].compute_start, 1.125);
  EXPECT_DOUBLE_EQ(trace[3].compute_start, 1.125 + 2.0 + 0.5);
  EXPECT_DOUBLE_EQ(got->total_s, 1.125 + 2.0 + 0.5 + 1.0 + 0.25);
  // The entry is counted as host time of the stage it ends.
  EXPECT_DOUBLE_EQ(got->phases[phase_index(Phase::vision)].host_s, 0.125);
  EXPECT_DOUBLE_EQ(got->phases[phase_index(Phase::prefill)].host_s, 0.5);
}

// The inputs' upload takes the compute stream and the link first: the first call and the first
// copy both start after it, and the lower bound counts it on both sides.
TEST(PlanPredictor, TheInputsUploadComesBeforeEveryCallAndCopy) {
  testing::ToyBuilder b(1e3);
  const int patch = b.group("vision.patch", GroupKind::vision_patch, 1000, 2.0);
  const int block = b.group("vision.blocks.0", GroupKind::vision_block, 1000, 2.0);
  b.exe(patch, Phase::vision, 1.0).exe(block, Phase::vision, 3.0);
  b.step({patch, block}, Phase::vision, 0);
  b.host(0, 0, 0);
  testing::Toy t = b.build();
  const Plan all = toy_plan(t, {patch, block});
  const Plan streamed = toy_plan(t, {patch});  // the block through two slots
  auto before = predict(t.weights, t.schedule(), streamed);
  ASSERT_TRUE(before.ok()) << before.error().message;
  EXPECT_DOUBLE_EQ(before->total_s, 2.0 + 3.0);  // the block waits for its copy [0, 2]
  t.profile.host.inputs_s = 1.5;
  const Schedule s = t.schedule();
  EXPECT_DOUBLE_EQ(s.inputs_s, 1.5);
  std::vector<CallTiming> trace;
  auto got = predict(t.weights, s, streamed, &trace);
  ASSERT_TRUE(got.ok()) << got.error().message;
  EXPECT_DOUBLE_EQ(trace[0].compute_start, 1.5);  // right after the upload
  EXPECT_DOUBLE_EQ(trace[1].copy_start, 1.5);     // the copy waited for it too
  EXPECT_DOUBLE_EQ(trace[1].compute_start, 3.5);  // its copy [1.5, 3.5]
  EXPECT_DOUBLE_EQ(got->total_s, 6.5);
  EXPECT_DOUBLE_EQ(got->phases[phase_index(Phase::vision)].wall_s, 6.5);
  auto resident = predict(t.weights, s, all);
  ASSERT_TRUE(resident.ok());
  EXPECT_DOUBLE_EQ(resident->total_s, 1.5 + 1.0 + 3.0);
  // Room for everything: nothing must cross but the inputs.
  auto lb = latency_lower_bound(s, 1u << 30);
  ASSERT_TRUE(lb.ok()) << lb.error().message;
  EXPECT_DOUBLE_EQ(lb->compute_s, 1.5 + 4.0);
  EXPECT_DOUBLE_EQ(lb->link_s, 1.5);
  EXPECT_DOUBLE_EQ(lb->total_s, 5.5);
}

}  // namespace
}  // namespace ferry
