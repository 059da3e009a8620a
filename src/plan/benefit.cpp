#include "plan/benefit.h"

#include <array>
#include <optional>

namespace ferry {

const char* step_position_name(StepPosition p) {
  switch (p) {
    case StepPosition::first:
      return "first";
    case StepPosition::middle:
      return "middle";
    case StepPosition::last:
      return "last";
  }
  return "?";
}

namespace {

struct PhaseStats {
  int64_t calls = 0;
  double exe_sum = 0;
  std::optional<StepPosition> position;  // at the group's first call in the phase
};

// Positions of the copyable calls in [begin, end), one (phase, step) run.
void mark_positions(const Schedule& s, size_t begin, size_t end,
                    std::vector<std::array<PhaseStats, kPhaseCount>>& stats) {
  std::vector<size_t> copyable;
  for (size_t i = begin; i < end; ++i) {
    if (!s.host_allowed[static_cast<size_t>(s.calls[i].group)]) copyable.push_back(i);
  }
  for (size_t j = 0; j < copyable.size(); ++j) {
    const Call& c = s.calls[copyable[j]];
    PhaseStats& st = stats[static_cast<size_t>(c.group)][phase_index(c.phase)];
    if (st.position) continue;
    st.position = j == 0                     ? StepPosition::first
                  : j + 1 == copyable.size() ? StepPosition::last
                                             : StepPosition::middle;
  }
}

}  // namespace

std::vector<GroupBenefit> residency_benefits(const Schedule& s) {
  const size_t groups = s.group_count();
  std::vector<std::array<PhaseStats, kPhaseCount>> stats(groups);
  size_t run_begin = 0;
  for (size_t i = 0; i < s.calls.size(); ++i) {
    const Call& c = s.calls[i];
    PhaseStats& st = stats[static_cast<size_t>(c.group)][phase_index(c.phase)];
    ++st.calls;
    st.exe_sum += s.exe_s[i];
    const bool run_ends =
        i + 1 == s.calls.size() || s.calls[i + 1].phase != c.phase || s.calls[i + 1].step != c.step;
    if (run_ends) {
      mark_positions(s, run_begin, i + 1, stats);
      run_begin = i + 1;
    }
  }
  std::vector<GroupBenefit> out(groups);
  for (size_t g = 0; g < groups; ++g) {
    GroupBenefit& b = out[g];
    b.group = static_cast<int>(g);
    if (s.host_allowed[g]) continue;  // stays on the host: never copied, nothing to save
    const double dma = s.dma_s[g];
    for (size_t ph = 0; ph < kPhaseCount; ++ph) {
      const PhaseStats& st = stats[g][ph];
      if (st.calls == 0) continue;
      PhaseBenefit pb;
      pb.phase = static_cast<Phase>(ph);
      pb.repetitions = st.calls;
      const double exe = st.exe_sum / static_cast<double>(st.calls);
      pb.dma_bound = dma >= exe;
      pb.position = st.position.value_or(StepPosition::middle);
      double per_call = 0;
      if (pb.position == StepPosition::first) {
        per_call = dma;
      } else if (pb.dma_bound) {
        per_call = pb.position == StepPosition::middle ? dma : dma - exe;
      }
      pb.saved_s = static_cast<double>(st.calls) * per_call;
      b.saved_s += pb.saved_s;
      b.phases.push_back(pb);
    }
    b.per_byte = s.bytes[g] > 0 ? b.saved_s / static_cast<double>(s.bytes[g]) : 0.0;
  }
  return out;
}

}  // namespace ferry
