// What the driver counts as device memory in use, read through NVML (libnvidia-ml, part of the
// driver; opened at run time, so nothing links against it and a machine without it just gets
// no answer). This is the view from outside ferry's own bookkeeping: it sees the CUDA context,
// loaded kernels, cuBLASLt and every allocation, and is what a budget is checked against.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace ferry::cuda {

class NvmlProbe {
 public:
  // For the device with this PCI bus id ("0000:17:00.0"); records the memory the device already
  // had in use (other processes, the driver) as the baseline. Call before creating a context.
  static std::unique_ptr<NvmlProbe> open(const std::string& pci_bus_id);
  ~NvmlProbe();
  NvmlProbe(const NvmlProbe&) = delete;
  NvmlProbe& operator=(const NvmlProbe&) = delete;

  // This process's device memory: NVML's per-process count when it lists this process (it may
  // not, in a container whose PIDs differ from the host's), else the device's used memory less
  // the baseline. nullopt when NVML cannot say.
  std::optional<uint64_t> process_bytes() const;
  // Which of the two process_bytes() reports ("nvml per process", "nvml device less baseline").
  std::string method() const;

  // The PCIe link: generation and width as trained now (a GPU trains its link down when idle)
  // and the most it can train to. Fields NVML cannot give stay empty.
  struct PcieLink {
    std::optional<int> generation, width, max_generation, max_width;
  };
  PcieLink pcie() const;

 private:
  NvmlProbe() = default;
  std::optional<uint64_t> listed_bytes() const;  // NVML's count for this PID, if it lists it
  struct Api;
  std::unique_ptr<Api> api_;
  void* device_ = nullptr;
  uint64_t baseline_ = 0;
};

}  // namespace ferry::cuda
