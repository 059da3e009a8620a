#include "api/session_args.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/parse_size.h"
#include "core/units.h"

namespace ferry::api {

namespace {

Error bad(const std::string& msg) {
  return make_error(ErrorCode::invalid_argument, msg);
}

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// "0,3,7,vision.merger" -> text layer groups for the numbers, names as given.
Result<std::vector<std::string>> group_names(const std::string& flag, const std::string& list) {
  std::vector<std::string> names;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) return bad(flag + ": an empty item in '" + list + "'");
    if (all_digits(item)) {
      if (item.size() > 6) return bad(flag + ": layer index " + item + " is out of range");
      names.push_back("text.layers." + std::to_string(std::stoi(item)));
    } else {
      names.push_back(item);
    }
  }
  return names;
}

// A plan or profile file: at most 16 MiB.
Result<std::string> read_small_file(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return bad(flag + ": cannot read " + path);
  std::string text;
  constexpr size_t kMax = size_t{16} << 20;
  text.resize(kMax + 1);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMax) return bad(flag + ": " + path + " is too large");
  return text;
}

}  // namespace

Result<SessionOptions> session_options(const SessionArgs& a, const ModelWeights& weights,
                                       const InferenceOptions& inference) {
  SessionOptions o;
  o.inference = inference;
  if (a.vram == "auto") {
    o.vram_auto = true;
  } else if (!a.vram.empty()) {
    Result<uint64_t> v = parse_size(a.vram);
    if (!v.ok()) return bad("--vram: " + v.error().message + ", or auto");
    o.vram = *v;
  }
  if (a.mode.empty() || a.mode == "pipelined") {
    o.plan.mode = StreamMode::pipelined;
  } else if (a.mode == "sequential") {
    o.plan.mode = StreamMode::sequential;
  } else {
    return bad("--mode: expected pipelined or sequential, got '" + a.mode + "'");
  }
  o.plan.mode_given = !a.mode.empty();
  if (a.slots && (*a.slots < 2 || *a.slots > 64)) return bad("--slots: expected 2 to 64");
  o.plan.slots = static_cast<int>(a.slots.value_or(2));
  o.plan.slots_given = a.slots.has_value();
  if (!a.profile_file.empty()) {
    FERRY_ASSIGN_OR_RETURN(Profile p, read_profile_file(a.profile_file));
    o.plan.profile = std::move(p);
  }
  const std::optional<HostPath> host_path = parse_host_path(a.host_path);
  if (!host_path) {
    return bad("--host-path: expected auto, registered, bounce, pageable or storage, got '" +
               a.host_path + "'");
  }
  o.host_path = *host_path;
  Result<uint64_t> piece = a.register_piece == "0" ? uint64_t{0} : parse_size(a.register_piece);
  if (!piece.ok()) return bad("--register-piece: " + piece.error().message + ", or 0");
  if (a.register_threads < 0 || a.register_threads > 64) {
    return bad("--register-threads: expected 0 to 64");
  }
  o.registration.piece_bytes = *piece;
  o.registration.threads = static_cast<int>(a.register_threads);
  const int given =
      int(!a.resident.empty()) + int(a.resident_count.has_value()) + int(!a.plan_file.empty());
  if (given > 1) return bad("give at most one of --plan, --resident and --resident-count");
  if (!a.resident.empty()) {
    std::vector<std::string> names;
    if (a.resident != "none") {
      FERRY_ASSIGN_OR_RETURN(names, group_names("--resident", a.resident));
    }
    o.plan.resident = std::move(names);
  }
  if (a.resident_count) {
    if (*a.resident_count < 0) return bad("--resident-count must not be negative");
    o.plan.resident_count = *a.resident_count;
  }
  if (!a.plan_file.empty()) {
    FERRY_ASSIGN_OR_RETURN(std::string text, read_small_file("--plan", a.plan_file));
    FERRY_ASSIGN_OR_RETURN(Plan p, plan_from_json(text, weights));
    o.plan.plan = std::move(p);
  }
  o.plan.lent_cache = !a.no_lent_cache;
  o.plan.thorough_search = a.thorough_search;
  if (!a.mapped.empty()) {
    FERRY_ASSIGN_OR_RETURN(o.plan.mapped, group_names("--map", a.mapped));
  }
  o.compress_at_open = a.compress_at_open;
  if (!a.compressed.empty()) {
    FERRY_ASSIGN_OR_RETURN(o.plan.compressed, group_names("--compressed", a.compressed));
  }
  o.streaming.poison_slots = a.check_streams;
  if (a.check_streams) o.streaming.bounce.max_fill_delay_us = 200;
  return o;
}

Result<Profile> read_profile_file(const std::string& path) {
  FERRY_ASSIGN_OR_RETURN(std::string text, read_small_file("--profile", path));
  Result<Profile> p = parse_profile(text);
  if (!p.ok()) return make_error(p.error().code, path + ": " + p.error().message);
  return p;
}

namespace {

// Consecutive groups with the same placement and form, as "text.layers.0..3" runs; the first
// of each pair is "resident", "streamed compressed", ...
std::vector<std::pair<std::string, std::string>> runs_of(const Plan& plan,
                                                         const ModelWeights& weights) {
  std::vector<std::pair<std::string, std::string>> runs;
  size_t i = 0;
  auto same = [&](size_t a, size_t b) {
    return plan.placement[a] == plan.placement[b] && form_of(plan, a) == form_of(plan, b);
  };
  while (i < weights.groups.size()) {
    size_t j = i + 1;
    while (j < weights.groups.size() && same(i, j)) ++j;
    std::string names = weights.groups[i].name;
    if (j - i > 1) names += " .. " + weights.groups[j - 1].name;
    names += " (" + std::to_string(j - i) + ")";
    std::string where = placement_name(plan.placement[i]);
    if (form_of(plan, i) == Form::compressed) where += " compressed";
    runs.emplace_back(where, names);
    i = j;
  }
  return runs;
}

}  // namespace

void print_plan(std::FILE* out, const Plan& plan, const ModelWeights& weights,
                const MemoryBudget& memory) {
  if (plan.slots == 0) {
    std::fprintf(out, "plan       nothing streamed; resident %s, host %s\n",
                 binary_bytes(resident_bytes(plan, weights)).c_str(),
                 binary_bytes(host_bytes(plan, weights)).c_str());
  } else {
    std::fprintf(out, "plan       %s, %d slot%s of %s; resident %s, streamed %s, host %s\n",
                 stream_mode_name(plan.mode), plan.slots, plan.slots == 1 ? "" : "s",
                 binary_bytes(plan.slot_bytes).c_str(),
                 binary_bytes(resident_bytes(plan, weights)).c_str(),
                 binary_bytes(streamed_bytes(plan, weights)).c_str(),
                 binary_bytes(host_bytes(plan, weights)).c_str());
  }
  for (const auto& [where, names] : runs_of(plan, weights)) {
    std::fprintf(out, "  %-9s %s\n", where.c_str(), names.c_str());
  }
  if (plan.staging > 0) {
    std::fprintf(out, "staging    %d buffer%s of %s for compressed copies\n", plan.staging,
                 plan.staging == 1 ? "" : "s", binary_bytes(plan.staging_bytes).c_str());
  }
  if (!plan.cached.empty()) {
    uint64_t bytes = 0, need = 0;
    for (const CacheEntry& e : plan.cached) {
      const uint64_t b = weights.groups[static_cast<size_t>(e.group)].bytes;
      bytes += b;
      need = std::max(need, e.offset + b);
    }
    std::fprintf(out,
                 "lent cache %zu streamed groups (%s) kept after prefill in %s of the runner's "
                 "idle activations:\n",
                 plan.cached.size(), binary_bytes(bytes).c_str(), binary_bytes(need).c_str());
    std::string line = " ";
    for (const CacheEntry& e : plan.cached) {
      const std::string& name = weights.groups[static_cast<size_t>(e.group)].name;
      if (line.size() + name.size() > 96) {
        std::fprintf(out, "%s\n", line.c_str());
        line.assign(1, ' ');  // not = " ": GCC 12 -O3 warns falsely (-Wrestrict, PR 105329)
      }
      line += " " + name;
    }
    std::fprintf(out, "%s\n", line.c_str());
  }
  std::fprintf(
      out, "memory     %s%s\n", memory.summary().c_str(),
      memory.budget > 0 ? (" of a " + binary_bytes(memory.budget) + " budget").c_str() : "");
}

nlohmann::ordered_json plan_summary_json(const Plan& plan, const ModelWeights& weights,
                                         const MemoryBudget& memory) {
  nlohmann::ordered_json j;
  j["mode"] = stream_mode_name(plan.mode);
  j["slots"] = plan.slots;
  j["slot_bytes"] = plan.slot_bytes;
  j["resident_bytes"] = resident_bytes(plan, weights);
  j["streamed_bytes"] = streamed_bytes(plan, weights);
  j["host_bytes"] = host_bytes(plan, weights);
  std::vector<std::string> resident, streamed, host;
  for (size_t i = 0; i < weights.groups.size(); ++i) {
    auto& list = plan.placement[i] == Placement::resident   ? resident
                 : plan.placement[i] == Placement::streamed ? streamed
                                                            : host;
    list.push_back(weights.groups[i].name);
  }
  j["resident"] = resident;
  j["streamed"] = streamed;
  j["host"] = host;
  std::vector<std::string> compressed;
  for (size_t i = 0; i < weights.groups.size(); ++i) {
    if (form_of(plan, i) == Form::compressed) compressed.push_back(weights.groups[i].name);
  }
  j["compressed"] = compressed;
  j["staging"] = plan.staging;
  j["staging_bytes"] = plan.staging_bytes;
  auto cached = nlohmann::ordered_json::array();
  for (const CacheEntry& e : plan.cached) {
    cached.push_back(
        {{"name", weights.groups[static_cast<size_t>(e.group)].name}, {"lent_offset", e.offset}});
  }
  j["lent_cache"] = std::move(cached);
  nlohmann::ordered_json m;
  for (const auto& [name, bytes] : memory.items) m[name] = bytes;
  m["total"] = memory.total();
  if (memory.budget > 0) m["budget"] = memory.budget;
  j["memory"] = m;
  return j;
}

namespace {

struct HostRate {
  uint64_t bytes = 0;
  double seconds = 0.0;
  const char* measured_on = "nothing (no weight left host memory)";
  double gb_per_s() const { return seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0; }
};

HostRate host_rate(const Session& session) {
  const StreamingStats& st = session.streaming();
  HostRate r;
  if (st.host_probe_bytes > 0) {
    r = {st.host_probe_bytes, st.host_probe_seconds, "the largest streamed group, into a slot"};
  } else if (st.resident_bytes > 0) {
    // Beside a registration in pieces the load also waited for pieces: a rate that low is the
    // registration's, and says so.
    r = {st.resident_bytes, st.resident_load_seconds,
         st.resident_wait_seconds > 0 ? "the resident load, its waits for registration included"
                                      : "the resident load"};
  }
  return r;
}

}  // namespace

nlohmann::ordered_json host_rate_json(const Session& session) {
  const HostRate r = host_rate(session);
  nlohmann::ordered_json j;
  j["path"] = host_path_name(session.tier().path());
  j["how"] = session.tier().how();
  j["gb_per_s"] = r.gb_per_s();
  j["bytes"] = r.bytes;
  j["seconds"] = r.seconds;
  j["measured_on"] = r.measured_on;
  return j;
}

std::string host_rate_text(const Session& session) {
  const HostRate r = host_rate(session);
  char rate[96];
  std::snprintf(rate, sizeof rate, "%.2f GB/s over %.1f MB", r.gb_per_s(),
                static_cast<double>(r.bytes) / 1e6);
  return std::string(host_path_name(session.tier().path())) + ", " + rate + " (" + r.measured_on +
         ")";
}

}  // namespace ferry::api
