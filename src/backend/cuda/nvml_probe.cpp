#include "backend/cuda/nvml_probe.h"

#include <dlfcn.h>
#include <unistd.h>

#include <vector>

namespace ferry::cuda {

// The few NVML entry points used, declared here: the toolkit on the build machine ships no
// nvml.h, and the library comes with the driver. Layouts as documented by NVML's API reference.
namespace {
using nvmlReturn = int;  // 0: success
struct NvmlMemory {
  unsigned long long total, free, used;
};
struct NvmlProcessInfo {
  unsigned int pid;
  unsigned long long used_gpu_memory;
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};
}  // namespace

struct NvmlProbe::Api {
  void* lib = nullptr;
  nvmlReturn (*init)() = nullptr;
  nvmlReturn (*shutdown)() = nullptr;
  nvmlReturn (*by_pci)(const char*, void**) = nullptr;
  nvmlReturn (*memory)(void*, NvmlMemory*) = nullptr;
  nvmlReturn (*processes)(void*, unsigned int*, NvmlProcessInfo*) = nullptr;
  // nvmlDeviceGet{Curr,Max}PcieLink{Generation,Width}, in that order (optional).
  nvmlReturn (*pcie[4])(void*, unsigned int*) = {};
  ~Api() {
    if (shutdown != nullptr) shutdown();
    if (lib != nullptr) dlclose(lib);
  }
};

namespace {
template <class F>
bool load(void* lib, const char* name, F& f) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  return f != nullptr;
}
}  // namespace

std::unique_ptr<NvmlProbe> NvmlProbe::open(const std::string& pci_bus_id) {
  auto api = std::make_unique<Api>();
  api->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (api->lib == nullptr) return nullptr;
  decltype(api->shutdown) shutdown = nullptr;
  if (!load(api->lib, "nvmlInit_v2", api->init) || !load(api->lib, "nvmlShutdown", shutdown) ||
      !load(api->lib, "nvmlDeviceGetHandleByPciBusId_v2", api->by_pci) ||
      !load(api->lib, "nvmlDeviceGetMemoryInfo", api->memory)) {
    return nullptr;
  }
  if (!load(api->lib, "nvmlDeviceGetComputeRunningProcesses_v3", api->processes)) {
    (void)load(api->lib, "nvmlDeviceGetComputeRunningProcesses_v2", api->processes);
  }
  const char* pcie_names[4] = {
      "nvmlDeviceGetCurrPcieLinkGeneration", "nvmlDeviceGetCurrPcieLinkWidth",
      "nvmlDeviceGetMaxPcieLinkGeneration", "nvmlDeviceGetMaxPcieLinkWidth"};
  for (int i = 0; i < 4; ++i) (void)load(api->lib, pcie_names[i], api->pcie[i]);
  if (api->init() != 0) return nullptr;
  api->shutdown = shutdown;
  std::unique_ptr<NvmlProbe> p(new NvmlProbe());
  if (api->by_pci(pci_bus_id.c_str(), &p->device_) != 0) return nullptr;
  NvmlMemory m{};
  if (api->memory(p->device_, &m) != 0) return nullptr;
  p->baseline_ = m.used;
  p->api_ = std::move(api);
  return p;
}

NvmlProbe::~NvmlProbe() = default;

std::optional<uint64_t> NvmlProbe::listed_bytes() const {
  if (!api_ || api_->processes == nullptr) return std::nullopt;
  std::vector<NvmlProcessInfo> infos(64);
  auto count = static_cast<unsigned int>(infos.size());
  if (api_->processes(device_, &count, infos.data()) != 0) return std::nullopt;
  const auto self = static_cast<unsigned int>(getpid());
  for (unsigned int i = 0; i < count && i < infos.size(); ++i) {
    if (infos[i].pid == self) return infos[i].used_gpu_memory;
  }
  return std::nullopt;
}

std::optional<uint64_t> NvmlProbe::process_bytes() const {
  if (!api_) return std::nullopt;
  if (auto listed = listed_bytes()) return listed;
  NvmlMemory m{};
  if (api_->memory(device_, &m) != 0) return std::nullopt;
  return m.used > baseline_ ? m.used - baseline_ : 0;
}

NvmlProbe::PcieLink NvmlProbe::pcie() const {
  PcieLink link;
  if (!api_) return link;
  std::optional<int>* out[4] = {&link.generation, &link.width, &link.max_generation,
                                &link.max_width};
  for (int i = 0; i < 4; ++i) {
    unsigned int v = 0;
    if (api_->pcie[i] != nullptr && api_->pcie[i](device_, &v) == 0 && v > 0 && v < 1024) {
      *out[i] = static_cast<int>(v);
    }
  }
  return link;
}

std::string NvmlProbe::method() const {
  if (!api_) return "none";
  if (listed_bytes()) return "nvml, this process";
  return "nvml, the device's used memory less what was in use before ferry started";
}

}  // namespace ferry::cuda
