// Residency benefit per byte (paper Eq. 4): B = Σ over the phases a group runs in of
// R · ΔC / M, where R is how many times the group is called in that phase (from the workload:
// decode steps, flow steps; once for vision and prefill), M its bytes, and ΔC the time one call
// saves when the group is resident, by its position in its step and the phase's kind
// (Tables IV-VI):
//
//   phase kind                      first      middle     last
//   EXE-bound (C_DMA <  C_EXE)      C_DMA      0          0
//   DMA-bound (C_DMA >= C_EXE)      C_DMA      C_DMA      C_DMA - C_EXE
//
// A hybrid group (EXE-bound in prefill, DMA-bound in decode) sums both rows, which gives
// Table VI: (N+1)·C_DMA first, N·C_DMA middle, N·(C_DMA - C_decode) last. Position is the
// group's place among the calls of its (phase, step) that can be copied (groups that may stay
// on the host are skipped); a step of one such call counts it first.
//
// These are the paper's closed forms, in which every step starts with an exposed copy. The
// executor prefetches across steps, so the real saving can be smaller (plan/predictor.h prices a
// plan exactly); the planner uses benefits only to order its first guess.
#pragma once

#include <cstdint>
#include <vector>

#include "model/call_sequence.h"
#include "plan/schedule.h"

namespace ferry {

enum class StepPosition : uint8_t { first, middle, last };
const char* step_position_name(StepPosition p);

struct PhaseBenefit {
  Phase phase = Phase::prefill;
  int64_t repetitions = 0;  // R: calls of the group in this phase
  bool dma_bound = false;   // C_DMA >= C_EXE in this phase
  StepPosition position = StepPosition::middle;
  double saved_s = 0;  // R · ΔC
};

struct GroupBenefit {
  int group = 0;
  double saved_s = 0;   // Σ over phases of R · ΔC, seconds per inference
  double per_byte = 0;  // saved_s / bytes (s/B; ×1e9 gives the paper's ms/MB); 0 for 0 bytes
  std::vector<PhaseBenefit> phases;  // the phases the group is called in, in Phase order
};

// One entry per group of the schedule's model. Groups never called, and groups that may stay on
// the host (they are never copied), get zero benefit.
std::vector<GroupBenefit> residency_benefits(const Schedule& schedule);

}  // namespace ferry
