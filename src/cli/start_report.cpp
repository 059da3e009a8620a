#include "cli/start_report.h"

#include <cstdio>

namespace ferry::cli {

nlohmann::ordered_json start_json(const StartTimes& t) {
  nlohmann::ordered_json j;
  j["total_s"] = t.total_s;
  j["before_main_s"] =
      t.before_main_s >= 0 ? nlohmann::ordered_json(t.before_main_s) : nlohmann::ordered_json();
  j["config_s"] = t.config_s;
  j["checkpoint_s"] = t.checkpoint_s;
  j["backend_s"] = t.backend_s;
  nlohmann::ordered_json parts = nlohmann::ordered_json::object();
  for (const auto& [name, seconds] : t.backend_parts) parts[name] = seconds;
  j["backend_parts"] = parts;
  if (t.machine_limits_s > 0) j["machine_limits_s"] = t.machine_limits_s;
  j["tier_s"] = t.tier_s;
  j["plan_s"] = t.plan_s;
  j["plan_parts"] = {{"context_s", t.plan_context_s},
                     {"choose_s", t.plan_choose_s},
                     {"evaluations", t.plan_evaluations}};
  j["reserve_s"] = t.reserve_s;
  j["upload_s"] = t.upload_s;
  j["upload_wait_s"] = t.upload_wait_s;
  j["upload_bytes"] = t.upload_bytes;
  j["register_wait_s"] = t.register_wait_s;
  j["slots_s"] = t.slots_s;
  j["link_check_s"] = t.link_check_s;
  j["fallback_s"] = t.fallback_s;
  j["runner_s"] = t.runner_s;
  j["open_s"] = t.open_s;
  j["other_s"] = t.other_s();
  j["register_s"] = t.register_s;
  j["register_calls_s"] = t.register_calls_s;
  j["register_pieces"] = t.register_pieces;
  j["register_threads"] = t.register_threads;
  j["register_bytes"] = t.register_bytes;
  j["register_blocked_s"] = t.register_blocked_s();
  j["register_hidden_s"] = t.register_hidden_s();
  if (t.files_bytes > 0) {
    j["page_cache"] = {{"files_bytes", t.files_bytes},
                       {"cached_bytes", t.cached_bytes},
                       {"available_bytes", t.available_bytes}};
  }
  return j;
}

std::string start_text(const StartTimes& t) {
  std::string s;
  char buf[160];
  auto add = [&](const char* name, double seconds) {
    std::snprintf(buf, sizeof buf, "%s%s %.3f", s.empty() ? "" : ", ", name, seconds);
    s += buf;
  };
  std::snprintf(buf, sizeof buf, "%.3f s to the first inference ready: ", t.total_s);
  const std::string head = buf;
  add("config", t.config_s);
  add("checkpoint", t.checkpoint_s);
  add("backend", t.backend_s);
  if (t.machine_limits_s > 0) add("machine limits", t.machine_limits_s);
  add("tier", t.tier_s);
  add("plan", t.plan_s);
  add("reserve", t.reserve_s);
  add("upload", t.upload_s);
  if (t.upload_s > 0 && t.upload_bytes > 0) {
    std::snprintf(buf, sizeof buf, " (%.3f waiting, %.1f GB/s)", t.upload_wait_s,
                  static_cast<double>(t.upload_bytes) / t.upload_s / 1e9);
  } else {
    std::snprintf(buf, sizeof buf, " (%.3f waiting)", t.upload_wait_s);
  }
  s += buf;
  add("registration wait", t.register_wait_s);
  add("slots", t.slots_s);
  add("link check", t.link_check_s);
  if (t.fallback_s > 0) add("fallback", t.fallback_s);
  add("runner", t.runner_s);
  add("other", t.other_s());
  if (t.register_pieces > 0) {
    std::snprintf(buf, sizeof buf,
                  "; registration %.3f s in %lld piece%s on %d thread%s, %.3f s of it hidden",
                  t.register_s, static_cast<long long>(t.register_pieces),
                  t.register_pieces == 1 ? "" : "s", t.register_threads,
                  t.register_threads == 1 ? "" : "s", t.register_hidden_s());
    s += buf;
  }
  if (t.files_bytes > 0) {
    std::snprintf(buf, sizeof buf, "; %.1f of %.1f GB in the page cache at the start",
                  static_cast<double>(t.cached_bytes) / 1e9,
                  static_cast<double>(t.files_bytes) / 1e9);
    s += buf;
  }
  if (t.before_main_s >= 0) {
    std::snprintf(buf, sizeof buf, "; %.2f s before main", t.before_main_s);
    s += buf;
  }
  return head + s;
}

}  // namespace ferry::cli
