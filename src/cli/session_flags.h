// The command-line flags of api/session_args.h's SessionArgs, shared by run, bench, plan and
// profile.
#pragma once

#include <CLI/CLI.hpp>

#include "api/session_args.h"

namespace ferry::cli {

void add_session_options(CLI::App* cmd, api::SessionArgs* args);

}  // namespace ferry::cli
