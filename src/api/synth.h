// `ferry synth` as a call (the Python package's ferry.synth uses it too): a preset's
// config.json, the synthetic tokenizer.json and seeded random weights, written into a staged
// folder and swapped in whole.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace ferry::api {

struct SynthOptions {
  std::string preset;
  std::string out;
  uint64_t seed = 0;
  std::string max_shard = "5GB";
  bool force = false;
  bool config_only = false;
  std::string init = "uniform";  // or "normal" (model/synth.h)
};

// Progress and the summary line go to stderr.
Status run_synth(const SynthOptions& options);

}  // namespace ferry::api
