// The start breakdown (exec/start_times.h) as `run` and `bench` print it: a "start" JSON object
// and one line of text.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "exec/start_times.h"

namespace ferry::cli {

// Every part in seconds under its StartTimes name (before_main_s null when unknown;
// machine_limits_s only where measured), backend_parts as an object, and the derived other_s,
// register_blocked_s, register_hidden_s.
nlohmann::ordered_json start_json(const StartTimes& t);
// "1.523 s to the first inference ready: config 0.001, checkpoint 0.010, ...; registration 0.820 s
// in 86 pieces on 1 thread, 0.520 s of it hidden"
std::string start_text(const StartTimes& t);

}  // namespace ferry::cli
