// Test helper: writes what `ferry synth` writes (config.json + safetensors with the seeded
// synthetic weights of model/synth.h) for a config, in-process.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include "format/safetensors.h"
#include "model/config_json.h"
#include "model/synth.h"
#include "model/weights.h"

namespace ferry::testing {

inline Status write_test_checkpoint(const std::string& dir, const ModelConfig& config,
                                    uint64_t seed) {
  FERRY_ASSIGN_OR_RETURN(ModelWeights weights, describe_weights(config));
  std::filesystem::create_directories(dir);
  {
    std::ofstream f(dir + "/config.json");
    f << write_config(config);
    if (!f) return make_error(ErrorCode::io, "cannot write " + dir + "/config.json");
  }
  return write_checkpoint(dir, synth_tensors(weights, seed));
}

}  // namespace ferry::testing
