#include "host/cpu_topology.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace ferry {
namespace {

// The whole (small) file, or nothing.
std::string read_small_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  if (!in) return {};
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

Result<int> parse_cpu_number(std::string_view s, std::string_view item) {
  int v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty() || v < 0 || v > 1 << 20) {
    return make_error(ErrorCode::invalid_argument,
                      "cpu list: '" + std::string(item) + "' is not a CPU number or range");
  }
  return v;
}

}  // namespace

Result<std::vector<int>> parse_cpu_list(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  std::vector<int> cpus;
  if (text.empty()) return cpus;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string_view item = text.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    const size_t dash = item.find('-');
    if (dash == std::string_view::npos) {
      FERRY_ASSIGN_OR_RETURN(const int v, parse_cpu_number(item, item));
      cpus.push_back(v);
    } else {
      FERRY_ASSIGN_OR_RETURN(const int lo, parse_cpu_number(item.substr(0, dash), item));
      FERRY_ASSIGN_OR_RETURN(const int hi, parse_cpu_number(item.substr(dash + 1), item));
      if (hi < lo || hi - lo > 1 << 16) {
        return make_error(ErrorCode::invalid_argument,
                          "cpu list: '" + std::string(item) + "' is not an increasing range");
      }
      for (int c = lo; c <= hi; ++c) cpus.push_back(c);
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

CpuTopology read_cpu_topology(const std::string& sysfs, const std::vector<int>& allowed) {
  namespace fs = std::filesystem;
  CpuTopology t;
  const std::set<int> ok(allowed.begin(), allowed.end());
  t.logical_cpus = static_cast<int>(ok.size());

  // cpu -> node, from every node's cpulist.
  std::map<int, int> node_of;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path(sysfs) / "node", ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("node", 0) != 0) continue;
    const Result<int> node = parse_cpu_number(std::string_view(name).substr(4), name);
    if (!node.ok()) continue;
    const Result<std::vector<int>> cpus = parse_cpu_list(read_small_file(e.path() / "cpulist"));
    if (!cpus.ok()) continue;
    for (int c : *cpus) node_of[c] = *node;
  }

  // One core per set of SMT siblings: its lowest allowed CPU.
  std::set<int> taken;
  bool all_read = !ok.empty();
  for (int cpu : ok) {
    if (taken.count(cpu) != 0) continue;
    const fs::path p =
        fs::path(sysfs) / "cpu" / ("cpu" + std::to_string(cpu)) / "topology/thread_siblings_list";
    const Result<std::vector<int>> siblings = parse_cpu_list(read_small_file(p));
    if (!siblings.ok() || siblings->empty()) {
      all_read = false;
      break;
    }
    for (int s : *siblings) taken.insert(s);
    const auto it = node_of.find(cpu);
    t.cores.push_back({cpu, it == node_of.end() ? 0 : it->second});
  }
  if (!all_read) {
    t.cores.clear();
    for (int cpu : ok) t.cores.push_back({cpu, 0});
    t.nodes = 1;
    t.from_sysfs = false;
    return t;
  }
  std::set<int> nodes;
  for (const CpuCore& c : t.cores) nodes.insert(c.node);
  t.nodes = std::max<int>(1, static_cast<int>(nodes.size()));
  t.from_sysfs = true;
  return t;
}

CpuTopology host_cpu_topology() {
  std::vector<int> allowed;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) allowed.push_back(c);
    }
  }
  if (allowed.empty()) allowed.push_back(0);
  return read_cpu_topology("/sys/devices/system", allowed);
}

std::vector<CpuCore> worker_cores(const CpuTopology& topology, int threads) {
  std::map<int, std::vector<CpuCore>> by_node;
  for (const CpuCore& c : topology.cores) by_node[c.node].push_back(c);
  std::vector<CpuCore> out;
  const size_t want = std::min(topology.cores.size(), static_cast<size_t>(std::max(0, threads)));
  for (size_t round = 0; out.size() < want; ++round) {
    for (auto& [node, cores] : by_node) {
      if (round < cores.size() && out.size() < want) out.push_back(cores[round]);
    }
  }
  return out;
}

bool pin_thread_to(std::thread& thread, int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(thread.native_handle(), sizeof set, &set) == 0;
}

int default_host_threads(const CpuTopology& topology) {
  return std::max(1, static_cast<int>(topology.cores.size()) - 2);
}

}  // namespace ferry
