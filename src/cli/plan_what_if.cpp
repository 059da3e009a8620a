#include "cli/plan_what_if.h"

#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "core/units.h"
#include "model/cost.h"

namespace ferry::cli {

Result<WhatIf> what_if_context(Backend& backend, const ModelConfig& config,
                               const ModelWeights& weights, const Workload& workload,
                               const SessionOptions& options, const WhatIfTarget& target,
                               uint64_t runtime_bytes, bool runtime_assumed, PlanningContext& ctx) {
  const CostContext cost = cost_context(config, workload, workload.prompt_tokens,
                                        expected_expert_keys(config, workload));
  const std::vector<CallCost> costs = call_costs(config, weights, ctx.calls, cost);
  WhatIf w;
  FERRY_ASSIGN_OR_RETURN(w.repricing,
                         reprice_profile(ctx.profile, weights, ctx.calls, costs, target));
  w.runtime_bytes = runtime_bytes;
  w.runtime_assumed = runtime_assumed;
  SessionOptions with = options;
  with.plan.profile = w.repricing.profile;
  with.plan.map_candidates = ctx.map_candidates;
  FERRY_ASSIGN_OR_RETURN(
      ctx, planning_context(backend, config, weights, workload, with, runtime_bytes, ctx.in_place));
  return w;
}

nlohmann::ordered_json what_if_json(const WhatIf& w) {
  const Repricing& r = w.repricing;
  auto figure = [](const ScaledFigure& f) {
    return nlohmann::ordered_json{{"from", f.from}, {"from_what", f.from_what}, {"to", f.to}};
  };
  nlohmann::ordered_json j;
  j["projection"] = true;
  j["target"] = r.target.label;
  j["card"] = r.target.card != nullptr ? nlohmann::ordered_json(r.target.card->key)
                                       : nlohmann::ordered_json();
  if (r.target.card != nullptr) j["card_link"] = r.target.card->link;
  j["integrated"] = r.target.integrated;
  j["vram"] = r.target.figures.vram ? nlohmann::ordered_json(*r.target.figures.vram)
                                    : nlohmann::ordered_json();
  j["link_bytes_per_s"] = figure(r.link);
  j["memory_bandwidth_bytes_per_s"] = figure(r.memory);
  j["peak_flops"] = figure(r.compute);
  j["copy_scale"] = r.copy_scale;
  j["exe_scale"] = {
      {"total", r.exe_scale_total}, {"min", r.exe_scale_min}, {"max", r.exe_scale_max}};
  j["calls"] = {{"memory_bound", r.memory_bound_calls},
                {"compute_bound", r.compute_bound_calls},
                {"row_gathers_with_link", r.link_bound_calls}};
  j["host_steps"] = "as measured";
  j["runtime_bytes"] = w.runtime_bytes;
  j["runtime_assumed"] = w.runtime_assumed;
  j["summary"] = describe_repricing(r);
  return j;
}

void print_what_if_header(std::FILE* out, const WhatIf& w) {
  const Repricing& r = w.repricing;
  std::fprintf(out, "%s\n", describe_repricing(r).c_str());  // "projection for ..."
  if (r.target.card != nullptr) {
    std::fprintf(
        out, "projection card: %s, %s, %s of VRAM (published figures; plan/what_if_cards.cpp)\n",
        r.target.card->name, r.target.card->link, binary_bytes(r.target.card->vram).c_str());
  }
  if (r.target.figures.vram && !r.target.integrated) {
    std::fprintf(out, "projection budgets up to the target's %s of device memory\n",
                 binary_bytes(*r.target.figures.vram).c_str());
  }
  std::fprintf(out, "projection %s set apart for the target's runtime and stream workspaces%s\n",
               binary_bytes(w.runtime_bytes).c_str(),
               w.runtime_assumed ? " (assumed: the H200's; --runtime gives the target's)" : "");
  if (r.memory.from_what != "published" || r.compute.from_what != "published") {
    std::fprintf(out,
                 "projection the card table does not know the profile's device: its %s peaks "
                 "are scaled against published figures, so the compute is optimistic by the gap "
                 "between them\n",
                 r.memory.from_what.c_str());
  }
}

void print_prefixed(std::FILE* out, const char* prefix,
                    const std::function<void(std::FILE*)>& print) {
  char* buf = nullptr;
  size_t size = 0;
  std::FILE* mem = open_memstream(&buf, &size);
  if (mem == nullptr) {
    print(out);  // no buffer: the report unprefixed rather than none
    return;
  }
  print(mem);
  std::fclose(mem);
  std::string_view text(buf, size);
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    std::fprintf(out, "%s%.*s\n", prefix, static_cast<int>(line.size()), line.data());
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  std::free(buf);
}

}  // namespace ferry::cli
