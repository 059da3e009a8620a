#include <CLI/CLI.hpp>

#include "backend/backend.h"
#include "cli/commands.h"
#if defined(FERRY_HAVE_CUDA)
#include "backend/cuda/cuda_backend.h"
#endif

void ferry::cli::register_backends() {
#if defined(FERRY_HAVE_CUDA)
  ferry::register_backend(ferry::BackendKind::cuda, ferry::cuda_backend_factory());
#endif
}

int main(int argc, char** argv) {
  ferry::cli::register_backends();
  CLI::App app{"ferry: run models larger than GPU memory, on a VRAM budget, bit-exact"};
  app.require_subcommand(1);
  ferry::cli::add_synth_command(app);
  ferry::cli::add_inspect_command(app);
  ferry::cli::add_run_command(app);
  ferry::cli::add_bench_command(app);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
