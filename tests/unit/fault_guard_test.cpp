// The SIGBUS guard and MappedFile::check_unchanged, in-process: a mapping truncated or rewritten
// under a reader is an error naming the file, on any number of threads at once, and a SIGBUS
// outside a guard still kills the process as before.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "exec/session.h"
#include "format/fault_guard.h"
#include "format/mapped_file.h"
#include "format/safetensors.h"
#include "model/presets.h"
#include "model/synth.h"
#include "model/weights.h"
#include "scratch_dir.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;

class FaultGuard : public ::testing::Test {
 protected:
  std::string file(const std::string& name, size_t bytes, char fill = 'a') {
    const std::string p = (dir_ / name).string();
    std::ofstream(p, std::ios::binary) << std::string(bytes, fill);
    return p;
  }

  testing::ScratchDir scratch_{"ferry_fault_guard"};
  fs::path dir_ = scratch_.path();
};

constexpr size_t kBytes = 1 << 20;

TEST_F(FaultGuard, TruncatedMappingIsAnErrorNamingTheFile) {
  const std::string p = file("t.bin", kBytes);
  auto m = MappedFile::open(p);
  ASSERT_TRUE(m.ok()) << m.error().to_string();
  ASSERT_TRUE(m->check_unchanged().ok());
  std::vector<char> buf(kBytes);
  ASSERT_TRUE(guarded_copy(buf.data(), m->bytes().data(), kBytes, *m).ok());
  ASSERT_EQ(::truncate(p.c_str(), 4096), 0);

  // The head is still there; the tail faults.
  EXPECT_TRUE(guarded_copy(buf.data(), m->bytes().data(), 4096, *m).ok());
  const Status s = guarded_copy(buf.data(), m->bytes().data(), kBytes, *m);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::io);
  EXPECT_NE(s.error().message.find(p), std::string::npos) << s.error().message;
  EXPECT_NE(s.error().message.find("changed or truncated while in use"), std::string::npos);
  EXPECT_NE(s.error().message.find("now has 4096 bytes"), std::string::npos) << s.error().message;
  const Status c = m->check_unchanged();
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("now 4096"), std::string::npos) << c.error().message;
}

TEST_F(FaultGuard, EveryThreadCatchesItsOwnFaults) {
  const std::string p = file("threads.bin", kBytes);
  auto m = MappedFile::open(p);
  ASSERT_TRUE(m.ok());
  ASSERT_EQ(::truncate(p.c_str(), kBytes / 2), 0);
  std::atomic<int> ok{0}, caught{0}, wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::vector<char> buf(kBytes / 4);
      for (int i = 0; i < 50; ++i) {
        // Even threads read the half that remains, odd ones the half that is gone.
        const size_t at = t % 2 == 0 ? 0 : kBytes / 2 + kBytes / 8;
        const Status s = guarded_copy(buf.data(), m->bytes().data() + at, kBytes / 8, *m);
        if (t % 2 == 0) {
          (s.ok() ? ok : wrong)++;
        } else {
          (!s.ok() ? caught : wrong)++;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), 200);
  EXPECT_EQ(caught.load(), 200);
  EXPECT_EQ(wrong.load(), 0);
}

TEST_F(FaultGuard, GuardsNestAndScansRunUnderThem) {
  const std::string p = file("nest.bin", kBytes);
  auto m = MappedFile::open(p);
  ASSERT_TRUE(m.ok());
  ASSERT_EQ(::truncate(p.c_str(), 8192), 0);
  uint64_t sum = 0;
  Status inner;
  auto outer = [&] {
    // An inner guard's fault stays inside it; the outer guard then reads what remains.
    char tmp[64];
    inner = guarded_copy(tmp, m->bytes().data() + kBytes - 64, 64, *m);
    for (size_t i = 0; i < 8192; ++i) sum += static_cast<unsigned char>(m->bytes()[i]);
  };
  EXPECT_TRUE(guarded_read(*m, outer).ok());
  EXPECT_FALSE(inner.ok());
  EXPECT_EQ(sum, 8192u * 'a');
}

TEST_F(FaultGuard, SigbusOutsideAGuardStillKills) {
  const std::string p = file("kill.bin", kBytes);
  auto m = MappedFile::open(p);
  ASSERT_TRUE(m.ok());
  char tmp = 0;
  ASSERT_TRUE(guarded_copy(&tmp, m->bytes().data(), 1, *m).ok());  // the handler is installed
  ASSERT_EQ(::truncate(p.c_str(), 0), 0);
  EXPECT_EXIT(
      {
        volatile char c = static_cast<char>(m->bytes()[kBytes - 1]);
        (void)c;
        std::_Exit(0);
      },
      ::testing::KilledBySignal(SIGBUS), "");
}

TEST_F(FaultGuard, AbsorbedRegionTakesAStoreTheFileRefuses) {
  const std::string p = file("w.bin", 4 * 4096);
  const int fd = ::open(p.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  void* map = ::mmap(nullptr, 4 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT_NE(map, MAP_FAILED);
  {
    AbsorbedRegion region(map, 4 * 4096);
    ASSERT_TRUE(region.armed());
    ASSERT_EQ(::ftruncate(fd, 4096), 0);  // as a full disk or another process would
    auto* bytes = static_cast<char*>(map);
    bytes[0] = 'x';             // still file-backed
    bytes[3 * 4096 + 5] = 'y';  // faults, absorbed
    bytes[2 * 4096] = 'z';      // faults, absorbed
    EXPECT_EQ(region.faults(), 2);
  }
  ::munmap(map, 4 * 4096);
  ::close(fd);
  EXPECT_EQ(fs::file_size(p), 4096u);
}

TEST_F(FaultGuard, CheckUnchangedSeesARewriteOfTheSameSize) {
  const std::string p = file("same.bin", 8192, 'a');
  auto m = MappedFile::open(p);
  ASSERT_TRUE(m.ok());
  EXPECT_TRUE(m->check_unchanged().ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // past the timestamp granularity
  {
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f << 'b';
  }
  const Status s = m->check_unchanged();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("changed or truncated while in use"), std::string::npos);
}

TEST_F(FaultGuard, ReadLeaseSeesAWriterOpeningTheFile) {
  const std::string p = file("lease.bin", 8192);
  auto m = MappedFile::open(p);
  ASSERT_TRUE(m.ok());
  if (!m->leased()) GTEST_SKIP() << "the kernel grants no read lease here";
  // Opening for writing breaks the lease (this process gives it up at once, so the open goes
  // on); no byte is written and the timestamps do not move, yet the change is noticed.
  const int fd = ::open(p.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  ::close(fd);
  const Status s = m->check_unchanged();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("opened for writing by another program"), std::string::npos)
      << s.error().message;
}

TEST_F(FaultGuard, ReplacingTheFileByRenameIsNotAChange) {
  const std::string p = file("r.bin", 8192, 'a');
  auto m = MappedFile::open(p);
  ASSERT_TRUE(m.ok());
  const std::string q = file("r2.bin", 100, 'b');
  ASSERT_EQ(::rename(q.c_str(), p.c_str()), 0);  // what ferry's own writers do
  EXPECT_TRUE(m->check_unchanged().ok());
  char c = 0;
  ASSERT_TRUE(guarded_copy(&c, m->bytes().data() + 8000, 1, *m).ok());
  EXPECT_EQ(c, 'a');  // the old file's bytes, kept alive by the mapping
}

TEST_F(FaultGuard, ALoadFromATruncatedShardIsAnErrorNotASignal) {
  const ModelConfig config = preset("qwen3-tiny").value();
  const ModelWeights w = describe_weights(config).value();
  const std::string dir = (dir_ / "ckpt").string();
  ASSERT_TRUE(write_checkpoint(dir, synth_tensors(w, 1)).ok());
  auto ckpt = Checkpoint::open(dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.error().to_string();
  const std::string shard = (fs::path(dir) / "model.safetensors").string();
  ASSERT_EQ(::truncate(shard.c_str(), 1 << 20), 0);
  auto backend = create_backend(BackendKind::cpu);
  ASSERT_TRUE(backend.ok());
  Workload workload;
  workload.prompt_tokens = 8;
  // check_unchanged at the start of the session's open sees it first; the guard is what protects
  // a truncation that comes after that check (the multi-threaded test above).
  auto r = Session::open(**backend, config, w, *ckpt, workload, SessionOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find(shard), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("changed or truncated while in use"), std::string::npos);
}

}  // namespace
}  // namespace ferry
