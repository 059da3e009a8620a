// AtomicFile, FileLock and StagedFolder in-process: a write not committed leaves the old contents
// and no temporary; leftovers of dead writers are removed, a live writer's are not; a folder swap
// carries the files it does not supersede and refuses what it must not replace.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "format/atomic_write.h"
#include "format/safetensors.h"
#include "scratch_dir.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;

// A PID that names no process (above Linux's largest pid_max).
constexpr const char* kDeadPid = "999999999";

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<std::string> names(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

class AtomicWrite : public ::testing::Test {
 protected:
  testing::ScratchDir scratch_{"ferry_atomic"};
  fs::path dir_ = scratch_.path();
};

TEST_F(AtomicWrite, FileIsOldOrNewAndNeverHalf) {
  const fs::path p = dir_ / "plan.json";
  ASSERT_TRUE(write_file_atomic(p.string(), "old").ok());
  {
    auto f = AtomicFile::create(p.string());
    ASSERT_TRUE(f.ok()) << f.error().to_string();
    ASSERT_TRUE(f->write("new, but never committed", 24).ok());
    EXPECT_EQ(read(p), "old");  // the target is untouched while the temporary fills
  }
  EXPECT_EQ(read(p), "old");
  EXPECT_EQ(names(dir_), std::vector<std::string>{"plan.json"});  // no temporary left
  ASSERT_TRUE(write_file_atomic(p.string(), "new").ok());
  EXPECT_EQ(read(p), "new");
  EXPECT_EQ(names(dir_), std::vector<std::string>{"plan.json"});
}

TEST_F(AtomicWrite, DeadWritersTemporariesGoLiveOnesStay) {
  const std::string dead = std::string(".plan.json.ferry-tmp.") + kDeadPid + ".0";
  const std::string live = ".plan.json.ferry-tmp." + std::to_string(::getppid()) + ".0";
  const std::string other = ".other.json.ferry-tmp." + std::string(kDeadPid) + ".0";
  for (const auto& n : {dead, live, other}) std::ofstream(dir_ / n) << "partial";
  ASSERT_TRUE(write_file_atomic((dir_ / "plan.json").string(), "x").ok());
  const auto left = names(dir_);
  EXPECT_EQ(std::count(left.begin(), left.end(), dead), 0);
  EXPECT_EQ(std::count(left.begin(), left.end(), live), 1);   // its writer may still be running
  EXPECT_EQ(std::count(left.begin(), left.end(), other), 1);  // another target's: not ours to judge
}

TEST_F(AtomicWrite, ErrorsNameTheRealCause) {
  auto f = AtomicFile::create((dir_ / "missing" / "x.npy").string());
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.error().message.find("No such file or directory"), std::string::npos)
      << f.error().message;
  auto g = AtomicFile::create(dir_.string());
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.error().message.find("is a folder"), std::string::npos) << g.error().message;
  if (::geteuid() != 0) {  // root may write anywhere
    fs::create_directories(dir_ / "ro");
    fs::permissions(dir_ / "ro", fs::perms::owner_read | fs::perms::owner_exec);
    auto h = AtomicFile::create((dir_ / "ro" / "x").string());
    ASSERT_FALSE(h.ok());
    EXPECT_NE(h.error().message.find("Permission denied"), std::string::npos);
    fs::permissions(dir_ / "ro", fs::perms::owner_all);
  }
}

TEST_F(AtomicWrite, LockWaitsAndTellsOnce) {
  const std::string p = (dir_ / "locked").string();
  fs::create_directories(p);
  auto held = FileLock::acquire(p);
  ASSERT_TRUE(held.ok());
  const int fd = ::open(p.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  EXPECT_NE(::flock(fd, LOCK_EX | LOCK_NB), 0);  // another open file description is refused
  int told = 0;
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    *held = FileLock();  // released
  });
  auto second = FileLock::acquire(p, [&] { ++told; });
  later.join();
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(told, 1);
  ::close(fd);
}

FolderPolicy checkpoint(bool force) {
  return checkpoint_folder_policy(force);
}

TEST_F(AtomicWrite, StagedFolderSwapsWholeAndCarriesOtherFiles) {
  const fs::path target = dir_ / "ckpt";
  fs::create_directories(target);
  std::ofstream(target / "config.json") << "old config";
  std::ofstream(target / "model.safetensors") << "old weights";
  std::ofstream(target / "notes.txt") << "tokens";
  std::ofstream(target / "model.safetensors.tmp") << "a crashed old ferry's";
  {
    auto s = StagedFolder::begin(target.string(), checkpoint(true));
    ASSERT_TRUE(s.ok()) << s.error().to_string();
    std::ofstream(fs::path(s->path()) / "config.json") << "new config";
    // Not committed: the old folder as it was.
  }
  EXPECT_EQ(read(target / "config.json"), "old config");
  EXPECT_EQ(names(dir_), std::vector<std::string>{"ckpt"});  // no staging folder left
  {
    auto s = StagedFolder::begin(target.string(), checkpoint(true));
    ASSERT_TRUE(s.ok()) << s.error().to_string();
    std::ofstream(fs::path(s->path()) / "config.json") << "new config";
    std::ofstream(fs::path(s->path()) / "model-00001-of-00001.safetensors") << "new";
    ASSERT_TRUE(s->commit().ok());
  }
  EXPECT_EQ(names(dir_), std::vector<std::string>{"ckpt"});
  EXPECT_EQ(names(target), (std::vector<std::string>{
                               "config.json", "model-00001-of-00001.safetensors", "notes.txt"}));
  EXPECT_EQ(read(target / "config.json"), "new config");
  EXPECT_EQ(read(target / "notes.txt"), "tokens");
}

TEST_F(AtomicWrite, StagedFolderRefusesWhatItMustNotReplace) {
  const fs::path target = dir_ / "t";
  fs::create_directories(target);
  std::ofstream(target / "notes.txt") << "mine";
  auto a = StagedFolder::begin(target.string(), checkpoint(false));
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.error().message.find("is not empty and holds no checkpoint"), std::string::npos)
      << a.error().message;
  auto b = StagedFolder::begin(target.string(), checkpoint(true));
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message.find("--force replaces only a checkpoint folder"), std::string::npos)
      << b.error().message;
  std::ofstream(target / "config.json") << "{}";
  auto c = StagedFolder::begin(target.string(), checkpoint(false));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("holds a checkpoint (use --force"), std::string::npos);
  fs::create_directories(target / "sub");
  auto d = StagedFolder::begin(target.string(), checkpoint(true));
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message.find("holds sub, which is not a file"), std::string::npos)
      << d.error().message;
  EXPECT_TRUE(fs::exists(target / "notes.txt"));
  EXPECT_EQ(names(dir_), std::vector<std::string>{"t"});
  std::ofstream(dir_ / "file") << "x";
  auto e = StagedFolder::begin((dir_ / "file").string(), checkpoint(true));
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message.find("is not a folder"), std::string::npos);
}

TEST_F(AtomicWrite, StagedFolderCleansAndRestoresAfterCrashes) {
  const fs::path target = dir_ / "m";
  // A staging folder of a writer that died beside a live folder: removed.
  fs::create_directories(target);
  std::ofstream(target / "config.json") << "kept";
  const fs::path stale = dir_ / (std::string(".m.ferry-new.") + kDeadPid + ".0");
  fs::create_directories(stale);
  std::ofstream(stale / "model.safetensors") << "half";
  {
    auto s = StagedFolder::begin(target.string(), checkpoint(true));
    ASSERT_TRUE(s.ok()) << s.error().to_string();
  }
  EXPECT_EQ(names(dir_), std::vector<std::string>{"m"});
  // A crash between the two renames of the fallback swap: the old folder is put back.
  fs::rename(target, dir_ / (std::string(".m.ferry-old.") + kDeadPid + ".0"));
  {
    auto s = StagedFolder::begin(target.string(), checkpoint(true));
    ASSERT_TRUE(s.ok()) << s.error().to_string();
  }
  EXPECT_EQ(names(dir_), std::vector<std::string>{"m"});
  EXPECT_EQ(read(target / "config.json"), "kept");
}

TEST_F(AtomicWrite, StagedFolderMadeForNothingLeavesNothing) {
  const fs::path target = dir_ / "new";
  {
    auto s = StagedFolder::begin(target.string(), checkpoint(false));
    ASSERT_TRUE(s.ok()) << s.error().to_string();
    EXPECT_TRUE(fs::is_directory(target));
  }
  EXPECT_FALSE(fs::exists(target));  // created for the write, removed with it
  EXPECT_TRUE(names(dir_).empty());
}

TEST_F(AtomicWrite, WeightsFileNames) {
  EXPECT_TRUE(is_weights_file_name("model.safetensors"));
  EXPECT_TRUE(is_weights_file_name("model.safetensors.index.json"));
  EXPECT_TRUE(is_weights_file_name("model-00002-of-00010.safetensors"));
  EXPECT_FALSE(is_weights_file_name("model-2-of-10.safetensors"));
  EXPECT_FALSE(is_weights_file_name("model-0000a-of-00010.safetensors"));
  EXPECT_FALSE(is_weights_file_name("tokenizer.json"));
}

}  // namespace
}  // namespace ferry
