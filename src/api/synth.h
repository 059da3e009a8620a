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

// What was written: the report `ferry synth` and ferry.synth render as one line.
struct SynthReport {
  std::string out;
  bool weights = false;  // false with config_only: config.json and tokenizer.json alone
  uint64_t bytes = 0;
  size_t tensors = 0;
  int64_t params = 0;
  double seconds = 0.0;  // writing the weights
};

// Progress goes to stderr while the weights are written.
Result<SynthReport> run_synth(const SynthOptions& options);

// The summary line on stderr ("synth: wrote 40.6 MB (179 tensors, 20.3M params) to DIR in
// 0.2 s, 0.24 GB/s"); nothing when no weights were written. Shared by both front ends.
void print_synth_report(const SynthReport& report);

}  // namespace ferry::api
