// libFuzzer target: the .npy reader of `ferry run --ego-history` (api/npy.h) and, when the bytes
// hold 48 numbers, the ego history built from them with its tokens and speed estimate
// (model/ego_history.h). Any crash, sanitizer report or broken invariant is a finding.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "api/npy.h"
#include "model/ego_history.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  ferry::Result<ferry::NpyArray> a = ferry::parse_npy(bytes, "fuzz.npy", 4096);
  if (!a.ok()) return 0;
  size_t count = 1;
  for (int64_t d : a->shape) count *= static_cast<size_t>(d);
  if (count != a->values.size()) __builtin_trap();
  if (a->values.size() == 48 || a->values.size() == 48 + 16) {
    const std::span<const double> v(a->values);
    auto h = ferry::ego_history_from(v.first(48), {}, v.subspan(48));
    if (h.ok()) {
      (void)ferry::history_tokens(*h);
      (void)ferry::estimate_v0(*h, 0.1);
    }
  }
  return 0;
}
