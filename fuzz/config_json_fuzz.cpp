// libFuzzer target: config.json parsing. Whatever parse_config accepts must validate, describe
// its weights without overflow and survive a write/parse round trip unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "model/config_json.h"
#include "model/weights.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto config = ferry::parse_config(text);
  if (!config.ok()) return 0;
  if (!ferry::validate_config(*config).ok()) std::abort();
  auto weights = ferry::describe_weights(*config);
  if (!weights.ok()) std::abort();
  auto again = ferry::parse_config(ferry::write_config(*config));
  if (!again.ok() || !(*again == *config)) std::abort();
  return 0;
}
