// Is the checkpoint in the page cache, and could the host hold it? What the host tier asks before
// it registers (pins, so faults in) every page of the mapping: a checkpoint that is neither
// cached nor able to fit beside what the host already holds would be read page by page and then
// thrash, where reads from storage into the bounce ring (host/storage_reader.h) go at the
// storage's rate and leave the page cache alone.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "format/safetensors.h"

namespace ferry {

struct PageCacheState {
  uint64_t file_bytes = 0;    // the weights files' sizes
  uint64_t cached_bytes = 0;  // of those, in the page cache (estimated from evenly spread samples)
  std::optional<uint64_t> available_bytes;  // the host's MemAvailable (nullopt: unknown)
};

// Pages of [data, data + bytes) in the page cache, and pages in all (mincore; where it cannot
// tell, every page is taken as cached, as registration would find it).
std::pair<uint64_t, uint64_t> cached_pages(const void* data, size_t bytes);
// Their fraction; 1 for an empty range.
double page_cache_fraction(const void* data, size_t bytes);

// Samples each file's mapping with mincore (at most `samples` windows of 16 pages per file: a
// few milliseconds for a 22 GB checkpoint, where a full scan takes tens).
PageCacheState page_cache_state(const Checkpoint& checkpoint, int samples = 1024);

// What this process may still fill: MemAvailable from /proc/meminfo, or less where its memory
// cgroup has a limit (limit less usage, a conservative room: the usage counts the cgroup's
// page cache too); nullopt where neither can be read.
std::optional<uint64_t> host_available_bytes();

// The room under this process's memory cgroup limit (cgroup v2 memory.max - memory.current, or
// v1 memory.limit_in_bytes - memory.usage_in_bytes), read below `root` ("/" on a real system;
// tests pass a folder that mimics one); nullopt without a limit or where it cannot be read.
std::optional<uint64_t> cgroup_memory_room(const std::string& root = "/");

// Whether a checkpoint in `state` should be read from storage rather than registered: its bytes
// not in the page cache exceed what the host has available (less its cached bytes, which pinning
// makes unreclaimable, and `reserve`): registration would evict what it just read, or fail.
// Unknown availability: no.
bool read_from_storage(const PageCacheState& state, uint64_t reserve = uint64_t{2} << 30);

// "8.1 of 22.2 GB in the page cache, 96.0 GB available" for start reports and errors.
std::string describe(const PageCacheState& state);

}  // namespace ferry
