// How a model is held on the device, as `run`, `bench`, `plan` and the Python Model take it: the
// budget (--vram, or auto), where the plan comes from (--plan, --resident, --resident-count, else
// the planner with --profile's times or estimated ones), the streaming mode, the host path; and
// what a session's plan and memory look like in text and JSON. The flags: cli/session_flags.h.
#pragma once

#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/status.h"
#include "exec/session.h"
#include "model/weights.h"

namespace ferry::api {

struct SessionArgs {
  std::string vram;  // "15GiB", "2500MB", "auto"; empty: no budget
  std::string mode;  // pipelined or sequential; empty: the planner's choice (pipelined for flags)
  std::optional<int64_t> slots;  // exact for --resident/--resident-count; the planner's most
  std::string resident;          // "0,3,7,vision.merger": text layer indexes or group names
  std::optional<int> resident_count;
  std::string mapped;  // --map: groups read in place (the map path), as --resident names them
  bool no_lent_cache = false;    // --no-lent-cache
  bool thorough_search = false;  // --thorough-search
  std::string plan_file;
  std::string profile_file;  // a `ferry profile` file: the times the planner uses
  std::string host_path = "auto";
  std::string register_piece = "256MiB";  // --register-piece: 0 for whole shards
  int64_t register_threads = 1;           // --register-threads: 0 for all before planning
  bool check_streams = false;             // CPU: poisoned slots and random stream delays
  bool compress_at_open = false;          // --compress-at-open: every group encoded at open
  std::string compressed;  // --compressed: groups run compressed, as --resident names them
};

// The options a session opens with (the inference options are the caller's).
Result<SessionOptions> session_options(const SessionArgs& args, const ModelWeights& weights,
                                       const InferenceOptions& inference);

// Reads a profile file (`ferry profile` writes them), checked for form (against the model when
// the session plans).
Result<Profile> read_profile_file(const std::string& path);

// The plan, one line per run of consecutive groups with the same placement and form, and the
// memory.
void print_plan(std::FILE* out, const Plan& plan, const ModelWeights& weights,
                const MemoryBudget& memory);
nlohmann::ordered_json plan_summary_json(const Plan& plan, const ModelWeights& weights,
                                         const MemoryBudget& memory);

// The host path a session took and its rate as measured when it opened (the largest streamed
// group copied once into a slot through that path; else the resident load): {"path", "how",
// "gb_per_s", "bytes", "seconds", "measured_on"}; and the same as one line of text.
nlohmann::ordered_json host_rate_json(const Session& session);
std::string host_rate_text(const Session& session);

}  // namespace ferry::api
