// The storage path (host/storage_reader.h, the bounce ring's storage source, HostPath::storage):
// reads of unaligned ranges through aligned direct reads give the file's bytes, with O_DIRECT and
// without, in one buffer and in many pieces, on one thread and several; a file truncated under
// the reads is an error naming it; the page-cache sample agrees with a full scan; and the rule
// that sends the automatic path to storage.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "format/mapped_file.h"
#include "host/bounce_ring.h"
#include "host/page_cache.h"
#include "host/storage_reader.h"
#include "measure/byte_probe.h"
#include "model/presets.h"
#include "scratch_dir.h"
#include "text_test_model.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;

class StorageTest : public ::testing::Test {
 protected:
  // A file of `bytes` seeded random bytes; returns its contents.
  std::vector<std::byte> write_file(const std::string& name, size_t bytes) {
    std::vector<std::byte> data(bytes);
    std::mt19937_64 rng(bytes);
    for (auto& b : data) b = static_cast<std::byte>(rng());
    std::ofstream out(dir_ / name, std::ios::binary);
    out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(bytes));
    return data;
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  testing::ScratchDir scratch_{"ferry_storage"};
  fs::path dir_ = scratch_.path();
};

TEST(AlignedRange, CoversTheRangeWithWholeBlocks) {
  const AlignedRange a = aligned_range(0, 4096);
  EXPECT_EQ(a.offset, 0u);
  EXPECT_EQ(a.bytes, 4096u);
  EXPECT_EQ(a.head, 0u);
  const AlignedRange b = aligned_range(5000, 10);
  EXPECT_EQ(b.offset, 4096u);
  EXPECT_EQ(b.bytes, 4096u);
  EXPECT_EQ(b.head, 904u);
  const AlignedRange c = aligned_range(4095, 2);  // straddles a block boundary
  EXPECT_EQ(c.offset, 0u);
  EXPECT_EQ(c.bytes, 8192u);
  EXPECT_EQ(c.head, 4095u);
  for (uint64_t off : {1ull, 4096ull, 123457ull}) {
    for (uint64_t n : {1ull, 4095ull, 4097ull, 1ull << 20}) {
      const AlignedRange r = aligned_range(off, n);
      EXPECT_EQ(r.offset % kStorageAlignment, 0u);
      EXPECT_EQ(r.bytes % kStorageAlignment, 0u);
      EXPECT_EQ(r.offset + r.head, off);
      EXPECT_GE(r.bytes, r.head + n);
      EXPECT_LT(r.bytes, r.head + n + kStorageAlignment);
    }
  }
}

// Random unaligned ranges (the file's end among them), copied to "device" memory through the
// ring's storage source: the file's bytes, whatever the buffer size, thread count or O_DIRECT.
TEST_F(StorageTest, RingReadsGiveTheFileBytes) {
  const size_t size = (size_t{5} << 20) + 1234;  // not a whole number of blocks
  const std::vector<std::byte> want = write_file("w.bin", size);
  const MappedFile file = MappedFile::open(path("w.bin")).value();
  std::mt19937_64 rng(7);
  std::vector<HostCopy> copies;
  uint64_t dst = 0;
  for (int i = 0; i < 40; ++i) {
    const uint64_t at = rng() % size;
    const uint64_t max = size - at;
    // Some small, some past the 1 MiB split between threads, the last to the file's end.
    uint64_t n = i == 39 ? max : std::min<uint64_t>(max, 1 + rng() % (i % 3 == 0 ? 3 << 20 : 9000));
    copies.push_back(HostCopy{dst, file.bytes().data() + at, n, &file});
    dst += n + rng() % 5;
  }
  auto backend = create_cpu_backend();
  for (bool direct : {true, false}) {
    for (const auto& [buffer, threads] :
         {std::pair<size_t, int>{16 << 10, 1}, {64 << 10, 3}, {4 << 20, 4}}) {
      BounceOptions o;
      o.source = BounceSource::storage;
      o.direct_io = direct;
      o.buffer_bytes = buffer;
      o.buffers = 3;
      o.fill_threads = threads;
      auto ring = BounceRing::create(*backend, o);
      ASSERT_TRUE(ring.ok()) << ring.error().to_string();
      auto out = backend->allocate(dst, "test");
      ASSERT_TRUE(out.ok());
      auto stream = backend->create_stream();
      ASSERT_TRUE((*ring)->copy(*stream, out->data(), copies).ok());
      ASSERT_TRUE(backend->synchronize(*stream).ok());
      const std::string what = std::string(direct ? "O_DIRECT" : "buffered") + ", buffers of " +
                               std::to_string(buffer) + ", " + std::to_string(threads) + " threads";
      const auto* got = static_cast<const std::byte*>(out->data());
      for (const HostCopy& c : copies) {
        const size_t at = static_cast<size_t>(c.src - file.bytes().data());
        ASSERT_EQ(std::memcmp(got + c.dst_offset, want.data() + at, c.bytes), 0)
            << what << ": " << c.bytes << " bytes at " << at;
      }
      const BounceStats st = (*ring)->stats();
      uint64_t bytes = 0;
      for (const HostCopy& c : copies) bytes += c.bytes;
      EXPECT_EQ(st.bytes, bytes) << what;
      EXPECT_GE(st.read_bytes, bytes) << what;  // whole blocks around each piece
      if (!direct) {
        EXPECT_FALSE((*ring)->reader()->direct()) << what;
      }
    }
  }
}

// A file cut short after it was mapped: the read that finds too few bytes is an io error naming
// the file (a mapping would have raised SIGBUS).
TEST_F(StorageTest, ATruncatedFileIsAnErrorNamingIt) {
  write_file("t.bin", size_t{1} << 20);
  const MappedFile file = MappedFile::open(path("t.bin")).value();
  ASSERT_EQ(::truncate(path("t.bin").c_str(), 4096 * 10), 0);
  auto backend = create_cpu_backend();
  for (bool direct : {true, false}) {
    BounceOptions o;
    o.source = BounceSource::storage;
    o.direct_io = direct;
    o.buffer_bytes = 64 << 10;
    o.buffers = 2;
    auto ring = BounceRing::create(*backend, o);
    ASSERT_TRUE(ring.ok());
    auto out = backend->allocate(size_t{1} << 20, "test");
    ASSERT_TRUE(out.ok());
    auto stream = backend->create_stream();
    const HostCopy c{0, file.bytes().data() + 100, (size_t{1} << 20) - 200, &file};
    const Status s = (*ring)->copy(*stream, out->data(), {&c, 1});
    (void)backend->synchronize(*stream);
    ASSERT_FALSE(s.ok()) << (direct ? "O_DIRECT" : "buffered");
    EXPECT_EQ(s.error().code, ErrorCode::io);
    EXPECT_NE(s.error().message.find("t.bin"), std::string::npos) << s.error().message;
    EXPECT_NE(s.error().message.find("truncated"), std::string::npos) << s.error().message;
  }
}

// A file system that opens with O_DIRECT and then refuses the reads: the file is read with plain
// preads instead, and the reader says why.
TEST_F(StorageTest, RefusedDirectReadsFallBackToPlainReads) {
  const std::vector<std::byte> want = write_file("r.bin", 3 * 4096 + 77);
  const MappedFile file = MappedFile::open(path("r.bin")).value();
  StorageReader reader(true);
  reader.refuse_direct_reads_for_tests = true;
  std::vector<std::byte> buf(4 * 4096 + 4096);
  auto* aligned =
      reinterpret_cast<std::byte*>((reinterpret_cast<uintptr_t>(buf.data()) + 4095) / 4096 * 4096);
  const AlignedRange r = aligned_range(100, want.size() - 100);
  ASSERT_TRUE(
      reader.read_aligned(file, r.offset, r.bytes, r.head + want.size() - 100, aligned).ok());
  EXPECT_EQ(std::memcmp(aligned + r.head, want.data() + 100, want.size() - 100), 0);
  EXPECT_FALSE(reader.direct());
  EXPECT_NE(reader.why_not_direct().find("refused"), std::string::npos) << reader.why_not_direct();
}

// Storage reads want room for a block on each side of a piece.
TEST(StorageRing, RefusesBuffersTooSmallForAlignedReads) {
  auto backend = create_cpu_backend();
  BounceOptions o;
  o.source = BounceSource::storage;
  o.buffer_bytes = 8 << 10;
  EXPECT_FALSE(BounceRing::create(*backend, o).ok());
  o.source = BounceSource::mapping;
  EXPECT_TRUE(BounceRing::create(*backend, o).ok());
}

// The sampled estimate agrees with a full mincore scan, with the checkpoint wholly cached and
// with the second half of its file dropped (where the file system can drop pages; where it
// cannot, both say cached).
TEST_F(StorageTest, PageCacheSampleAgreesWithAFullScan) {
  const ModelConfig config = preset("qwen3-tiny").value();
  const std::string dir = path("ck");
  ASSERT_TRUE(testing::write_test_checkpoint(dir, config, 4).ok());
  const Checkpoint ck = Checkpoint::open(dir).value();
  ASSERT_EQ(ck.files().size(), 1u);
  const auto bytes = ck.files().front().file_bytes();
  uint64_t sum = 0;  // every page touched: all cached
  for (size_t i = 0; i < bytes.size(); i += 4096) sum += static_cast<uint8_t>(bytes[i]);
  EXPECT_GE(sum, 0u);
  PageCacheState st = page_cache_state(ck);
  EXPECT_EQ(st.file_bytes, bytes.size());
  EXPECT_EQ(st.cached_bytes, bytes.size());
  {
    const int fd = ::open(ck.files().front().path().c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    ::fdatasync(fd);
    ::posix_fadvise(fd, static_cast<off_t>(bytes.size() / 2), 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
  const double scanned = page_cache_fraction(bytes.data(), bytes.size());
  st = page_cache_state(ck, 64);
  EXPECT_NEAR(static_cast<double>(st.cached_bytes) / static_cast<double>(bytes.size()), scanned,
              0.05)
      << "a full scan says " << scanned;
}

TEST(PageCache, ReadFromStorageOnlyWhenTheMissingBytesDoNotFit) {
  PageCacheState s;
  s.file_bytes = 22'000'000'000;
  s.cached_bytes = 22'000'000'000;
  s.available_bytes = 1'000'000'000;
  EXPECT_FALSE(read_from_storage(s, 0));  // all cached: registration reads nothing
  s.cached_bytes = 0;
  s.available_bytes = 100'000'000'000;
  EXPECT_FALSE(read_from_storage(s, 0));  // cold, but the host holds it
  s.available_bytes = 20'000'000'000;
  EXPECT_TRUE(read_from_storage(s, 0));  // cold and larger than the host has
  s.available_bytes = 23'000'000'000;
  EXPECT_FALSE(read_from_storage(s, 0));
  EXPECT_TRUE(read_from_storage(s, uint64_t{2} << 30));  // the reserve tips it
  // Half cached: the cached half is not reclaimable once pinned.
  s.cached_bytes = 11'000'000'000;
  s.available_bytes = 21'000'000'000;  // includes the 11 GB cached
  EXPECT_TRUE(read_from_storage(s, 0));
  s.available_bytes = 23'000'000'000;
  EXPECT_FALSE(read_from_storage(s, 0));
  s.available_bytes.reset();
  EXPECT_FALSE(read_from_storage(s, 0));  // unknown: registration as before
}

// A memory cgroup's limit bounds what the host tier counts as available: v2 and v1 layouts,
// "max" and v1's huge "no limit" as none, a usage above the limit as no room.
TEST_F(StorageTest, CgroupLimitBoundsTheRoom) {
  const fs::path root = dir_ / "root";
  auto put = [&](const std::string& rel, const std::string& text) {
    fs::create_directories((root / rel).parent_path());
    std::ofstream(root / rel) << text;
  };
  const std::string r = root.string() + "/";
  put("proc/self/cgroup", "0::/job\n");
  EXPECT_FALSE(cgroup_memory_room(r).has_value()) << "no memory files";
  put("sys/fs/cgroup/job/memory.max", "max\n");
  put("sys/fs/cgroup/job/memory.current", "1000\n");
  EXPECT_FALSE(cgroup_memory_room(r).has_value()) << "no limit";
  put("sys/fs/cgroup/job/memory.max", "8589934592\n");
  EXPECT_EQ(cgroup_memory_room(r), std::optional<uint64_t>(8589934592ull - 1000));
  put("sys/fs/cgroup/job/memory.current", "9000000000\n");
  EXPECT_EQ(cgroup_memory_room(r), std::optional<uint64_t>(0));
  put("proc/self/cgroup", "5:cpu,cpuacct:/x\n4:memory:/job1\n0::/\n");
  put("sys/fs/cgroup/memory/job1/memory.limit_in_bytes", "9223372036854771712\n");
  put("sys/fs/cgroup/memory/job1/memory.usage_in_bytes", "5\n");
  EXPECT_FALSE(cgroup_memory_room(r).has_value()) << "v1 without a limit";
  put("sys/fs/cgroup/memory/job1/memory.limit_in_bytes", "4096\n");
  EXPECT_EQ(cgroup_memory_room(r), std::optional<uint64_t>(4091));
  put("proc/self/cgroup", "4:memory:/../etc\n");
  EXPECT_FALSE(cgroup_memory_room(r).has_value()) << "a path out of the tree is ignored";
}

TEST(PageCache, HostAvailableIsReadOnLinux) {
  if (!fs::exists("/proc/meminfo")) GTEST_SKIP() << "no /proc/meminfo";
  const auto a = host_available_bytes();
  ASSERT_TRUE(a.has_value());
  EXPECT_GT(*a, 0u);
}

}  // namespace
}  // namespace ferry
