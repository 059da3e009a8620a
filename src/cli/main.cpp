#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <new>

#include "backend/backend.h"
#include "cli/commands.h"
#include "core/interrupt.h"
#include "exec/start_times.h"
#if defined(FERRY_HAVE_CUDA)
#include "backend/cuda/cuda_backend.h"
#endif

void ferry::cli::register_backends() {
#if defined(FERRY_HAVE_CUDA)
  ferry::register_backend(ferry::BackendKind::cuda, ferry::cuda_backend_factory());
#endif
}

int main(int argc, char** argv) {
  ferry::mark_process_start();          // the start's clock: `run` and `bench` report from here
  ferry::install_interrupt_handlers();  // first: a signal from here on ends with a message
  ferry::cli::register_backends();
  CLI::App app{"ferry: run models larger than GPU memory, on a VRAM budget, bit-exact"};
  app.require_subcommand(1);
  ferry::cli::add_synth_command(app);
  ferry::cli::add_inspect_command(app);
  ferry::cli::add_run_command(app);
  ferry::cli::add_bench_command(app);
  ferry::cli::add_tokenize_command(app);
  ferry::cli::add_verify_command(app);
  ferry::cli::add_plan_command(app);
  ferry::cli::add_profile_command(app);
  ferry::cli::add_pack_command(app);
  ferry::cli::add_probe_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    // A usage error (a bad flag value, an unknown flag) exits 2, as every command's own errors
    // do; --help stays 0, and a command's RuntimeError keeps the code it chose.
    return rc == 0 || dynamic_cast<const CLI::RuntimeError*>(&e) != nullptr ? rc : 2;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "ferry: out of host memory\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ferry: internal error: %s\n", e.what());
    return 2;
  }
  return 0;
}
