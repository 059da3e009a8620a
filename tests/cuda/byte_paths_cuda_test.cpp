// The byte-path probes on the GPU: the probe kernel folds exactly what the CPU backend folds, at
// every alignment and length, from device memory and from a registered read-only file mapping
// read in place (the "map" path); the platform facts and registration trials are answered.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "harness.h"

namespace ferry::cuda_test {
namespace {

uint64_t fold(const unsigned char* p, size_t len) {
  uint64_t v = 0;
  for (size_t r = 0; r < len; ++r) v ^= uint64_t{p[r]} << (8 * (r % 8));
  return v;
}

// The fold of [p, p + len) by the CUDA probe kernel (p: device memory or readable host memory).
uint64_t gpu_fold(Backend& gpu, Stream& stream, const void* p, size_t len) {
  auto sum = gpu.allocate(256);
  EXPECT_TRUE(sum.ok());
  gpu.fill_zero(stream, sum->data(), 8);
  EXPECT_TRUE(gpu.read_reduce(stream, p, len, sum->data()).ok());
  uint64_t out = 0;
  gpu.copy_to_host(stream, &out, sum->data(), 8);
  EXPECT_TRUE(gpu.synchronize(stream).ok());
  return out;
}

// `data` in a temporary file, mapped read-only and shared (as a checkpoint is), unlinked at once.
class TempMapping {
 public:
  explicit TempMapping(const std::vector<unsigned char>& data) : bytes_(data.size()) {
    char path[] = "/tmp/ferry_map_XXXXXX";
    const int fd = ::mkstemp(path);
    if (fd < 0) return;
    if (::write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size())) {
      void* m = ::mmap(nullptr, data.size(), PROT_READ, MAP_SHARED, fd, 0);
      if (m != MAP_FAILED) map_ = m;
    }
    ::close(fd);
    ::unlink(path);
  }
  ~TempMapping() {
    if (map_ != nullptr) ::munmap(map_, bytes_);
  }
  TempMapping(const TempMapping&) = delete;
  TempMapping& operator=(const TempMapping&) = delete;
  const unsigned char* data() const { return static_cast<const unsigned char*>(map_); }

 private:
  void* map_ = nullptr;
  size_t bytes_ = 0;
};

std::vector<unsigned char> random_bytes(size_t n, uint64_t seed) {
  std::vector<unsigned char> data(n);
  std::mt19937_64 rng(seed);
  for (auto& b : data) b = static_cast<unsigned char>(rng());
  return data;
}

TEST(BytePathsCuda, ReadReduceMatchesTheFoldAtEveryAlignment) {
  SKIP_WITHOUT_CUDA();
  Backend& gpu = *backends(nullptr)->cuda;
  auto stream = gpu.create_stream();
  const std::vector<unsigned char> data = random_bytes((size_t{64} << 20) + 64, 3);
  auto dev = gpu.allocate(data.size());
  ASSERT_TRUE(dev.ok());
  gpu.copy_to_device(*stream, dev->data(), data.data(), data.size());
  const auto* base = static_cast<const unsigned char*>(dev->data());
  for (size_t off : {0, 1, 3, 8, 15, 16, 17}) {
    for (size_t len : {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{33}, size_t{4099},
                       (size_t{1} << 20) + 7, size_t{64} << 20}) {
      EXPECT_EQ(gpu_fold(gpu, *stream, base + off, len), fold(data.data() + off, len))
          << "offset " << off << ", " << len << " bytes";
    }
  }
}

// The map path: a read-only shared file mapping, registered read-only, read in place by the
// kernel at its host address.
TEST(BytePathsCuda, RegisteredFileMappingIsReadInPlace) {
  SKIP_WITHOUT_CUDA();
  Backend& gpu = *backends(nullptr)->cuda;
  const std::vector<unsigned char> data = random_bytes(size_t{32} << 20, 4);
  const TempMapping map(data);
  ASSERT_NE(map.data(), nullptr);
  Backend::HostRegistrationResult r = gpu.register_host(map.data(), data.size());
  ASSERT_TRUE(r.registered) << r.how;
  if (!r.readable_in_place) GTEST_SKIP() << "this device cannot read registered memory in place";
  auto stream = gpu.create_stream();
  EXPECT_EQ(gpu_fold(gpu, *stream, map.data(), data.size()), fold(data.data(), data.size()));
  EXPECT_EQ(gpu_fold(gpu, *stream, map.data() + 5, 12345), fold(data.data() + 5, 12345));
}

TEST(BytePathsCuda, FactsAndRegistrationTrials) {
  SKIP_WITHOUT_CUDA();
  Backend& gpu = *backends(nullptr)->cuda;
  const PlatformFacts f = gpu.platform_facts();
  EXPECT_FALSE(f.device.empty());
  ASSERT_TRUE(f.integrated.has_value());
  ASSERT_TRUE(f.copy_engines.has_value());
  EXPECT_GT(*f.copy_engines, 0);
  ASSERT_TRUE(f.pageable_memory_access.has_value());
  EXPECT_EQ(*f.pageable_memory_access, gpu.reads_pageable_host_memory());
  std::printf(
      "facts: %s, integrated %d, pageable access %d, copy engines %d, PCIe gen %d x%d (%s)\n",
      f.device.c_str(), int(*f.integrated), int(*f.pageable_memory_access), *f.copy_engines,
      f.pcie_generation.value_or(-1), f.pcie_width.value_or(-1), f.pcie_source.c_str());
  const std::vector<unsigned char> data = random_bytes(size_t{4} << 20, 5);
  const TempMapping map(data);
  ASSERT_NE(map.data(), nullptr);
  const std::vector<RegistrationTrial> trials = gpu.try_host_registration(map.data(), data.size());
  ASSERT_EQ(trials.size(), 3u);
  for (const RegistrationTrial& t : trials) {
    std::printf("  %s, %s: %s\n", t.memory.c_str(), t.flags.c_str(), t.how.c_str());
  }
  EXPECT_TRUE(trials[2].ok) << "anonymous memory registers everywhere CUDA registers at all";
  // The trial undid its registration: the tier's own registration still works afterwards.
  Backend::HostRegistrationResult r = gpu.register_host(map.data(), data.size());
  EXPECT_EQ(r.registered, trials[1].ok) << r.how;
}

}  // namespace
}  // namespace ferry::cuda_test
