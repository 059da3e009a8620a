// The Llama test data (tests/data/llama: tokenizers, tiny checkpoints, expected outputs) and a
// JSON reader for its files, shared by the Llama tests.
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace ferry::testing {

inline std::string llama_data_dir() {
  return std::string(FERRY_SOURCE_DIR) + "/tests/data/llama";
}

inline nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return nlohmann::json::parse(s.str());
}

}  // namespace ferry::testing
