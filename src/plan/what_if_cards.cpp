// The cards `ferry plan --what-if NAME` knows, with their published figures.
//
// Where each number comes from:
//   - VRAM, memory bandwidth and the PCIe generation and width: the vendor's specification page
//     of each card (NVIDIA's GeForce product pages; the Jetson AGX Orin Series Technical Brief).
//   - Dense BF16 tensor TFLOPS with FP32 accumulation (what ferry's GEMMs run): the
//     architecture whitepapers' per-tensor-core rates times the card's tensor cores (TCs) and
//     boost clock. GeForce Ampere, Ada and Blackwell run FP16/BF16 with FP32 accumulation at half
//     their FP16-accumulate rate: 64 dense FMA, 128 FLOP, per tensor core and clock, written
//     below as "TCs x boost GHz x 128" (the GA102 whitepaper lists the 3090 at 71 TFLOPS, the
//     Ada whitepaper the 4080 at 97.5, both this way). The Jetson's GPU has the data-center
//     rate, 512 FLOP per tensor core and clock (its brief: 170 sparse INT8 TOPS from 64 tensor
//     cores at 1.3 GHz, so 42.5 dense FP16/BF16 TFLOPS).
//   - The link: what copies from page-locked memory achieve, not the signalling rate: PCIe 5.0
//     x16 55 GB/s (ferry measured 55.0 on the H200), 4.0 x16 25 GB/s (22-26 measured on such
//     hosts, issue 27), 4.0 x8 13 GB/s. The Jetson has no link: its "copies" are reads and writes
//     of the same LPDDR5, half its bandwidth; ferry reads weights in place there instead.
#include <string_view>

#include "plan/what_if.h"

namespace ferry {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

constexpr NamedCard kCards[] = {
    // RTX 3080 Ti: 12 GB GDDR6X, 384-bit at 19 Gbps = 912 GB/s; PCIe 4.0 x16;
    // 320 TCs x 1.665 GHz x 128 = 68.2 TFLOPS.
    {"rtx-3080-ti", "NVIDIA GeForce RTX 3080 Ti", "NVIDIA GeForce RTX 3080 Ti", "PCIe 4.0 x16",
     25e9, 912e9, 68.2e12, 12 * kGiB, false, false},
    // RTX 3090: 24 GB GDDR6X, 384-bit at 19.5 Gbps = 936 GB/s; PCIe 4.0 x16;
    // 328 TCs x 1.695 GHz x 128 = 71.2 TFLOPS (the GA102 whitepaper: 71).
    {"rtx-3090", "NVIDIA GeForce RTX 3090", "NVIDIA GeForce RTX 3090", "PCIe 4.0 x16", 25e9, 936e9,
     71.2e12, 24 * kGiB, false, false},
    // RTX 4060 Ti 16 GB: 128-bit GDDR6 at 18 Gbps = 288 GB/s; PCIe 4.0 x8;
    // 136 TCs x 2.535 GHz x 128 = 44.1 TFLOPS.
    {"rtx-4060-ti-16gb", "NVIDIA GeForce RTX 4060 Ti 16 GB", "NVIDIA GeForce RTX 4060 Ti",
     "PCIe 4.0 x8", 13e9, 288e9, 44.1e12, 16 * kGiB, false, false},
    // RTX 4070 Ti SUPER: 16 GB GDDR6X, 256-bit at 21 Gbps = 672 GB/s; PCIe 4.0 x16;
    // 264 TCs x 2.61 GHz x 128 = 88.2 TFLOPS.
    {"rtx-4070-ti-super", "NVIDIA GeForce RTX 4070 Ti SUPER", "NVIDIA GeForce RTX 4070 Ti SUPER",
     "PCIe 4.0 x16", 25e9, 672e9, 88.2e12, 16 * kGiB, false, false},
    // RTX 4080: 16 GB GDDR6X, 256-bit at 22.4 Gbps = 716.8 GB/s; PCIe 4.0 x16;
    // 304 TCs x 2.505 GHz x 128 = 97.5 TFLOPS (the Ada whitepaper: 97.5).
    {"rtx-4080", "NVIDIA GeForce RTX 4080", "NVIDIA GeForce RTX 4080", "PCIe 4.0 x16", 25e9,
     716.8e9, 97.5e12, 16 * kGiB, false, false},
    // RTX 5070 Ti: 16 GB GDDR7, 256-bit at 28 Gbps = 896 GB/s; PCIe 5.0 x16;
    // 280 TCs x 2.452 GHz x 128 = 87.9 TFLOPS.
    {"rtx-5070-ti", "NVIDIA GeForce RTX 5070 Ti", "NVIDIA GeForce RTX 5070 Ti", "PCIe 5.0 x16",
     55e9, 896e9, 87.9e12, 16 * kGiB, false, false},
    // RTX 5080: 16 GB GDDR7, 256-bit at 30 Gbps = 960 GB/s; PCIe 5.0 x16;
    // 336 TCs x 2.617 GHz x 128 = 112.6 TFLOPS.
    {"rtx-5080", "NVIDIA GeForce RTX 5080", "NVIDIA GeForce RTX 5080", "PCIe 5.0 x16", 55e9, 960e9,
     112.6e12, 16 * kGiB, false, false},
    // Jetson AGX Orin 64GB: 64 GB LPDDR5 shared with the CPU, 256-bit = 204.8 GB/s; integrated;
    // 64 TCs x 1.3 GHz x 512 = 42.5 TFLOPS.
    {"jetson-orin", "NVIDIA Jetson AGX Orin 64GB", "Orin",
     "integrated (LPDDR5 shared with the CPU)", 102.4e9, 204.8e9, 42.5e12, 64 * kGiB, true, false},
    // H200 SXM (a source, not a target: the committed profiles' machine): 141 GB HBM3e at
    // 4.8 TB/s, 989 dense BF16 TFLOPS (NVIDIA's H200 datasheet); PCIe 5.0 x16.
    {"h200", "NVIDIA H200", "NVIDIA H200", "PCIe 5.0 x16", 55e9, 4.8e12, 989e12,
     uint64_t{143771} << 20, false, true},
};

}  // namespace

std::span<const NamedCard> named_cards() {
  return kCards;
}

const NamedCard* find_card(std::string_view name) {
  for (const NamedCard& c : kCards) {
    if (name == c.key || name == c.device_name) return &c;
  }
  return nullptr;
}

}  // namespace ferry
