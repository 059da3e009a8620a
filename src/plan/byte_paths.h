// Which byte path each weight group should take, from rates measured on this machine over the
// deployed working set (the second paper's Algorithm 2, per group). Pure functions: `ferry probe`
// measures the rates (measure/byte_probe.h) and prints the verdicts; the planner can read the same
// rates from the file the probe saves.
//
// The paths (per use of a group: one call that reads its weights):
//   map           a kernel reads the file pages in place (registered host memory)
//   resident      a kernel reads a copy made once in device memory
//   stream        the copy engine fills a slot of the ring while compute runs, the kernel reads
//                 the slot (ferry's pipelined demand layering)
//   per_use_copy  the group copied from pageable memory before each use, then read
// The rule, for a group of B bytes used U times per inference:
//   1. the storage-bound stop: a group of which less than kCachedEnough of the pages are in the
//      page cache is read from storage whatever the path; no in-memory rate applies (verdict
//      "storage"). A few evicted pages are read back once and do not make a group storage-bound;
//   2. resident is excluded when the group does not fit beside everything else (the caller says
//      which groups fit: the capacity gate);
//   3. among the measured paths left, time = U · B / rate; the fastest wins, except that map is
//      preferred whenever it is within the tie band (5%) of the fastest: it keeps one evictable
//      representation of the bytes instead of a second copy.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace ferry {

enum class BytePath : uint8_t { map, resident, stream, per_use_copy };
inline constexpr std::array<BytePath, 4> kBytePaths = {BytePath::map, BytePath::resident,
                                                       BytePath::stream, BytePath::per_use_copy};
const char* byte_path_name(BytePath p);

// A measured rate (bytes per second of weights read by the kernel), or why there is none.
struct PathRate {
  std::optional<double> bytes_per_s;
  uint64_t bytes = 0;  // bytes per measured pass
  int passes = 0;      // timed passes (the median is taken)
  std::string note;    // what exactly was measured, or why nothing was
};

// The rates the planner reads. `device` and `host_path` say where they were measured.
struct BytePathRates {
  std::string device;
  std::string host_path;  // the host tier's path when measured ("registered", ...)
  uint64_t working_set_bytes = 0;
  std::array<PathRate, 4> rates;  // indexed by BytePath
  const PathRate& of(BytePath p) const { return rates[static_cast<size_t>(p)]; }
  PathRate& of(BytePath p) { return rates[static_cast<size_t>(p)]; }
};

// Rates files: {"format": "ferry-byte-paths", "version": 1, "device": ..., "host_path": ...,
// "working_set_bytes": N, "rates": {"map": {"bytes_per_s": x or null, "bytes": N, "passes": N,
// "note": "..."}, ...}}. Parsing checks every field (a rate is finite and positive).
std::string byte_path_rates_to_json(const BytePathRates& rates);
Result<BytePathRates> byte_path_rates_from_json(std::string_view text);

struct GroupPathInput {
  std::string name;
  uint64_t bytes = 0;
  int64_t uses = 0;              // calls per inference
  double cached_fraction = 1.0;  // of its pages in the page cache before anything touched them
  bool resident_fits = true;     // the capacity gate's answer
  std::string fit_reason;        // when it does not fit: why
};

struct GroupPathVerdict {
  std::string group;
  std::optional<BytePath> path;  // nullopt: storage-bound (or nothing measured)
  bool storage_bound = false;
  std::array<std::optional<double>, 4> seconds;  // per inference, per path; empty when excluded
  std::string reason;
};

inline constexpr double kMapTieBand = 0.05;
inline constexpr double kCachedEnough = 0.95;

GroupPathVerdict choose_byte_path(const BytePathRates& rates, const GroupPathInput& group,
                                  double tie_band = kMapTieBand);

// The capacity gate for many groups: with `room` bytes of device memory for resident weights,
// groups are admitted by uses per inference (most used first; ties: smaller first, then earlier)
// while they fit. Sets resident_fits and fit_reason.
void gate_resident(std::vector<GroupPathInput>& groups, uint64_t room);

}  // namespace ferry
