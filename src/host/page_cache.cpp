#include "host/page_cache.h"

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

std::pair<uint64_t, uint64_t> cached_pages(const void* data, size_t bytes) {
  if (bytes == 0) return {0, 0};
  static const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(data) / page * page;
  const auto end = (reinterpret_cast<uintptr_t>(data) + bytes + page - 1) / page * page;
  const size_t pages = (end - begin) / page;
  std::vector<unsigned char> vec(pages);
  if (::mincore(reinterpret_cast<void*>(begin), end - begin, vec.data()) != 0) {
    return {pages, pages};  // cannot tell: taken as cached
  }
  uint64_t in = 0;
  for (unsigned char v : vec) in += v & 1u;
  return {in, pages};
}

double page_cache_fraction(const void* data, size_t bytes) {
  const auto [in, all] = cached_pages(data, bytes);
  return all == 0 ? 1.0 : static_cast<double>(in) / static_cast<double>(all);
}

PageCacheState page_cache_state(const Checkpoint& checkpoint, int samples) {
  PageCacheState s;
  static const auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
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
      const auto [cached, all] = cached_pages(bytes.data() + first * page, n * page);
      in += cached;
      seen += all;
    }
    s.cached_bytes += static_cast<uint64_t>(static_cast<double>(bytes.size()) *
                                            static_cast<double>(in) / static_cast<double>(seen));
  }
  s.available_bytes = host_available_bytes();
  return s;
}

namespace {

std::optional<uint64_t> meminfo_available() {
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

// One number from a cgroup file; nullopt for "max", a missing file or anything else.
std::optional<uint64_t> read_number(const std::string& path) {
  std::ifstream in(path);
  std::string word;
  if (!(in >> word) || word.empty() || word.size() > 20) return std::nullopt;
  uint64_t v = 0;
  for (char c : word) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

}  // namespace

std::optional<uint64_t> cgroup_memory_room(const std::string& root) {
  std::ifstream in(root + "proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    // "0::/path" (v2) or "N:memory:/path" (v1; the controller list may name several).
    const size_t a = line.find(':');
    const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1);
    if (path.find("..") != std::string::npos) continue;
    if (!path.empty() && path.back() != '/') path += '/';
    std::optional<uint64_t> limit, usage;
    if (controllers.empty()) {
      const std::string dir = root + "sys/fs/cgroup" + path;
      limit = read_number(dir + "memory.max");
      usage = read_number(dir + "memory.current");
    } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {
      const std::string dir = root + "sys/fs/cgroup/memory" + path;
      limit = read_number(dir + "memory.limit_in_bytes");
      usage = read_number(dir + "memory.usage_in_bytes");
    } else {
      continue;
    }
    // v1 says "no limit" with a huge number: anything past an exbibyte is none.
    if (!limit || !usage || *limit >= (uint64_t{1} << 60)) continue;
    return *limit > *usage ? *limit - *usage : 0;
  }
  return std::nullopt;
}

std::optional<uint64_t> host_available_bytes() {
  const std::optional<uint64_t> host = meminfo_available();
  const std::optional<uint64_t> cgroup = cgroup_memory_room();
  if (host && cgroup) return std::min(*host, *cgroup);
  return host ? host : cgroup;
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
