// Each subcommand of the `ferry` CLI registers itself on the app (one file per command).
#pragma once

#include <CLI/CLI.hpp>

namespace ferry::cli {

void add_synth_command(CLI::App& app);
void add_inspect_command(CLI::App& app);
void add_run_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);
void add_verify_command(CLI::App& app);
void add_plan_command(CLI::App& app);
void add_profile_command(CLI::App& app);
void add_pack_command(CLI::App& app);
void add_probe_command(CLI::App& app);

// Registers the backends compiled into this binary (CUDA when FERRY_HAVE_CUDA).
void register_backends();

}  // namespace ferry::cli
