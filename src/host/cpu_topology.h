// The host's cores as the host engine (host_gemv.h) places its workers: one worker per physical
// core (SMT siblings share a core's load ports, and a GEMV is nothing but loads), spread over the
// NUMA nodes in turn, and only on CPUs the process may run on.
#pragma once

#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/status.h"

namespace ferry {

struct CpuCore {
  int cpu = 0;   // the first logical CPU of the physical core (the one a worker is pinned to)
  int node = 0;  // its NUMA node
};

struct CpuTopology {
  std::vector<CpuCore> cores;  // physical cores the process may use, by cpu number
  int nodes = 1;               // NUMA nodes that hold at least one of them
  int logical_cpus = 0;        // logical CPUs the process may use
  bool from_sysfs = false;     // false: sysfs was unreadable, every logical CPU taken as a core
};

// "0-3,8,10-11" -> {0, 1, 2, 3, 8, 10, 11} (sysfs cpulist format; a trailing newline is allowed).
// An error names the malformed item.
Result<std::vector<int>> parse_cpu_list(std::string_view text);

// The topology under `sysfs` (normally /sys/devices/system: cpu/cpuN/topology/thread_siblings_list
// and node/nodeM/cpulist), restricted to the CPUs in `allowed` (the process's affinity mask).
// Unreadable files make it fall back, never fail: each allowed CPU a core on node 0.
CpuTopology read_cpu_topology(const std::string& sysfs, const std::vector<int>& allowed);

// This process's view: /sys/devices/system and its affinity mask.
CpuTopology host_cpu_topology();

// The cores `threads` workers are pinned to: nodes taken in turn (node 0's first core, node 1's
// first core, ..., node 0's second core, ...), so the workers' share of DRAM bandwidth is spread
// over every memory controller. threads > cores gives every core once.
std::vector<CpuCore> worker_cores(const CpuTopology& topology, int threads);

// Pins a started thread to one logical CPU; false where the system refuses (not an error: the
// thread runs unpinned).
bool pin_thread_to(std::thread& thread, int cpu);

// The default worker count: the physical cores less two (the thread that drives the GPU and the
// copy threads of the byte paths), at least one.
int default_host_threads(const CpuTopology& topology);

}  // namespace ferry
