#include "exec/page_cache.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <vector>

namespace ferry {
namespace {

constexpr uint64_t kWindowPages = 16;

std::string gb(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(bytes) / 1e9);
  return buf;
}

}  // namespace

PageCacheState page_cache_state(const Checkpoint& checkpoint, int samples) {
  PageCacheState s;
  static const auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> vec(kWindowPages);
  for (const SafetensorsFile& f : checkpoint.files()) {
    const auto bytes = f.file_bytes();
    s.file_bytes += bytes.size();
    const uint64_t pages = (bytes.size() + page - 1) / page;
    if (pages == 0) continue;
    const uint64_t windows = std::min<uint64_t>(static_cast<uint64_t>(std::max(1, samples)),
                                                (pages + kWindowPages - 1) / kWindowPages);
    uint64_t seen = 0;
    uint64_t in = 0;
    for (uint64_t w = 0; w < windows; ++w) {
      const uint64_t first = pages * w / windows;
      const uint64_t n = std::min(kWindowPages, pages - first);
      auto* at = const_cast<std::byte*>(bytes.data()) + first * page;
      if (::mincore(at, n * page, vec.data()) != 0) {
        in += n;  // cannot tell: taken as cached, as registration would find it
      } else {
        for (uint64_t i = 0; i < n; ++i) in += vec[i] & 1u;
      }
      seen += n;
    }
    s.cached_bytes += static_cast<uint64_t>(static_cast<double>(bytes.size()) *
                                            static_cast<double>(in) / static_cast<double>(seen));
  }
  s.available_bytes = host_available_bytes();
  return s;
}

std::optional<uint64_t> host_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    uint64_t kb = 0;
    std::string unit;
    if (fields >> kb >> unit && unit == "kB") return kb * 1024;
    return std::nullopt;
  }
  return std::nullopt;
}

bool read_from_storage(const PageCacheState& state, uint64_t reserve) {
  if (!state.available_bytes) return false;
  const uint64_t missing = state.file_bytes - std::min(state.file_bytes, state.cached_bytes);
  // MemAvailable counts the checkpoint's cached pages as reclaimable; pinned, they are not.
  uint64_t room = *state.available_bytes - std::min(*state.available_bytes, state.cached_bytes);
  room = room > reserve ? room - reserve : 0;
  return missing > room;
}

std::string describe(const PageCacheState& state) {
  std::string s = gb(state.cached_bytes) + " of " + gb(state.file_bytes) + " GB in the page cache";
  if (state.available_bytes) s += ", " + gb(*state.available_bytes) + " GB available";
  return s;
}

}  // namespace ferry
