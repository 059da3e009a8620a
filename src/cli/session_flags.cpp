#include "cli/session_flags.h"

#include "cli/flags.h"

namespace ferry::cli {

void add_session_options(CLI::App* cmd, api::SessionArgs* a) {
  cmd->add_option("--vram", a->vram,
                  "Device memory budget for everything ferry takes (e.g. 8GiB, 15GiB, 2500MB; "
                  "auto: the device's free memory less a margin); weights that do not fit are "
                  "streamed")
      ->check(not_empty());
  cmd->add_option("--mode", a->mode,
                  "How streamed groups arrive: pipelined (a ring of slots, copies ahead of "
                  "compute) or sequential (copy, then run); default: the planner's choice, "
                  "pipelined for --resident and --resident-count")
      ->check(not_empty());
  add_int_option(cmd, "--slots", &a->slots, 2, 64,
                 "Slots of the pipelined ring (default 2); for the planner, the most it may use "
                 "(default 4)");
  cmd->add_option("--profile", a->profile_file,
                  "A profile (`ferry profile` writes them): the planner's and the predictor's "
                  "times; default: estimated from the cost model")
      ->check(not_empty());
  cmd->add_option("--resident", a->resident,
                  "Exactly these groups resident, the rest streamed: text layer indexes and group "
                  "names as `ferry inspect` prints them (0,3,7,text.head.0); 'none' for none");
  cmd->add_option("--resident-count", a->resident_count,
                  "K text layers resident at the paper's interleaved positions (Eq. 8), plus the "
                  "groups that are not layers");
  cmd->add_flag("--no-lent-cache", a->no_lent_cache,
                "The planner keeps no streamed group in the runner's activations while they idle "
                "after prefill (the lent cache; on by default)");
  cmd->add_flag("--thorough-search", a->thorough_search,
                "The planner prices every plan it tries with its lent cache, not only the plan "
                "it ends with (finds plans a few percent faster where the cache matters, and "
                "takes about 10x longer to plan: for `ferry plan --out` once, then run --plan)");
  cmd->add_option("--map", a->mapped,
                  "These groups read in place from the registered host mapping by their kernels "
                  "(the map path: no device copy, no slot), on top of the plan; names as for "
                  "--resident; groups of several tensors need a packed checkpoint (`ferry pack`)")
      ->check(not_empty());
  cmd->add_flag("--compress-at-open", a->compress_at_open,
                "Encode every weight group losslessly at open (docs/compression.md), so that "
                "groups may run compressed: a development path until compressed checkpoints are "
                "read (it encodes the whole model at every open)");
  cmd->add_option("--compressed", a->compressed,
                  "These groups run compressed (decoded into a slot before each call), in the "
                  "placement the plan gives them; names as for --resident; needs "
                  "--compress-at-open")
      ->check(not_empty());
  cmd->add_option("--plan", a->plan_file, "A plan file (`ferry plan` writes them)");
  cmd->add_option("--host-path", a->host_path,
                  "How weights leave host memory: auto (registered read-only where possible, "
                  "else bounce, else pageable), registered, bounce (page-locked buffers filled "
                  "by host threads), pageable, or storage (the bounce buffers filled by reads of "
                  "the files, O_DIRECT where allowed: for a checkpoint not in the page cache; "
                  "auto takes it when the checkpoint is neither cached nor able to fit in the "
                  "host's available memory)")
      ->capture_default_str();
  cmd->add_option("--register-piece", a->register_piece,
                  "Register the checkpoint's mapping in pieces of this size (whole pages), so "
                  "that the resident load starts while the rest registers; 0: each shard in one "
                  "piece")
      ->capture_default_str()
      ->check(not_empty());
  add_int_option(cmd, "--register-threads", &a->register_threads, 0, 64,
                 "Host threads registering the pieces beside planning and the resident load; 0: "
                 "every piece registered before planning (nothing overlaps)")
      ->default_str(std::to_string(a->register_threads));
  cmd->add_flag("--check-streams", a->check_streams,
                "CPU backend: random delays on every stream and poisoned slots, so that a missing "
                "wait between copy and compute changes the output");
}

}  // namespace ferry::cli
