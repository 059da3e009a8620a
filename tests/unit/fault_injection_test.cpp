// Fault injection against the built binary: SIGINT/SIGTERM at random points of `synth --force`
// and of the --dump-* writers, a full disk (a small tmpfs where one can be mounted, and an
// LD_PRELOAD shim that plays a small disk everywhere), two writers of one folder, and a
// checkpoint truncated or rewritten under a running `run`. Every case ends with the old data
// intact or the new data complete, no death by a signal, and at most one line on stderr.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cli_process.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;
using testing::count_lines;
using testing::Ended;
using testing::FerryProcess;
using testing::folder_digest;
using testing::leftovers;
using testing::run_ferry_args;

std::vector<std::string> synth_args(const fs::path& out, int seed, bool force) {
  std::vector<std::string> a{"synth",  "--preset",           "qwen3-tiny",  "--out", out.string(),
                             "--seed", std::to_string(seed), "--max-shard", "8MB"};
  if (force) a.push_back("--force");
  return a;
}

// "iteration 3" (appended, not "literal" + string: GCC 12 warns falsely about that at -O3).
std::string describe(const char* what, int i) {
  std::string s(what);
  s.append(std::to_string(i));
  return s;
}

void sleep_s(double s) {
  std::this_thread::sleep_for(std::chrono::duration<double>(s));
}

// An ending that is not a death by a signal and says what went wrong in at most one line
// ("ferry CMD: ..." or "ferry: ..."); other lines may only be progress ("synth: waiting ...").
void expect_clean_end(const Ended& e, const std::string& what) {
  EXPECT_FALSE(e.signaled) << what << ": died of signal " << e.code - 128 << "\n" << e.err;
  size_t messages = 0;
  std::istringstream lines(e.err);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("ferry", 0) == 0) {
      ++messages;
    } else {
      EXPECT_TRUE(line.rfind("synth: ", 0) == 0 || line.rfind("run: ", 0) == 0)
          << what << ": " << line;
    }
  }
  EXPECT_LE(messages, 1u) << what << ":\n" << e.err;
  if (e.code != 0) {
    EXPECT_EQ(messages, 1u) << what << ":\n" << e.err;
  }
}

class FaultInjection : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = fs::temp_directory_path() / ("ferry_faults_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "ref");
  }
  static void TearDownTestSuite() {
    fs::remove_all(root_);
    for (fs::path& p : made_) p.clear();
  }

  // The reference checkpoint of `seed` (three shards and an index: more points to stop at),
  // made on first use, and its digest.
  static const fs::path& ref(int seed) {
    fs::path* made = made_;
    if (made[seed].empty()) {
      const fs::path p = root_ / "ref" / describe("s", seed);
      const Ended e = run_ferry_args(synth_args(p, seed, false));
      EXPECT_EQ(e.code, 0) << e.err;
      digest_[seed] = folder_digest(p);
      made[seed] = p;
    }
    return made[seed];
  }

  // A fresh folder holding the reference checkpoint of `seed`; the digests of `also` are known.
  static fs::path fresh(const std::string& name, int seed, std::initializer_list<int> also = {}) {
    for (int s : also) ref(s);
    const fs::path p = root_ / name;
    fs::remove_all(p);
    fs::copy(ref(seed), p);
    return p;
  }

  static fs::path root_;
  static uint64_t digest_[4];
  static fs::path made_[4];
};

fs::path FaultInjection::root_;
uint64_t FaultInjection::digest_[4];
fs::path FaultInjection::made_[4];

TEST_F(FaultInjection, SynthForceStoppedAnywhereLeavesOldOrNew) {
  const fs::path ck = fresh("ck", 1, {2});
  // How long one replacement takes here, so that the signals spread over all of it.
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(run_ferry_args(synth_args(ck, 2, true)).code, 0);
  const double span = testing::seconds_since(t0) * 1.2;
  ASSERT_EQ(folder_digest(ck), digest_[2]);
  int current = 2;
  std::mt19937 rng(12);
  int stopped_before = 0, finished = 0;
  for (int i = 0; i < 14; ++i) {
    const int next = current == 1 ? 2 : 1;
    const int sig = i % 2 == 0 ? SIGINT : SIGTERM;
    const double delay = std::uniform_real_distribution<double>(0.0, span)(rng);
    FerryProcess p(synth_args(ck, next, true));
    ASSERT_TRUE(p.started());
    ASSERT_TRUE(p.wait_handlers());
    sleep_s(delay);
    p.signal(sig);
    const Ended e = p.wait();
    const std::string what =
        describe("iteration ", i) + ", signal after " + std::to_string(delay) + " s";
    expect_clean_end(e, what);
    const uint64_t now = folder_digest(ck);
    if (e.code == 0) {  // done before the signal
      EXPECT_EQ(now, digest_[next]) << what;
      ++finished;
    } else {
      EXPECT_EQ(e.code, 128 + sig) << what << ": " << e.err;
      EXPECT_NE(e.err.find("interrupted by SIG"), std::string::npos) << e.err;
      const bool kept = e.err.find("was left as it was") != std::string::npos;
      EXPECT_EQ(now, kept ? digest_[current] : digest_[next]) << what << ": " << e.err;
      stopped_before += kept ? 1 : 0;
    }
    EXPECT_TRUE(leftovers(root_).empty()) << what << ": " << leftovers(root_).front();
    EXPECT_TRUE(leftovers(ck).empty()) << what;
    current = now == digest_[1] ? 1 : 2;
  }
  EXPECT_GT(stopped_before, 0);  // the signals did land inside writes
  (void)finished;
}

TEST_F(FaultInjection, DumpWritersStoppedAnywhereLeaveCompleteFiles) {
  const fs::path ck = fresh("dump_ck", 1);
  const fs::path logits = root_ / "logits.npy";
  const fs::path inputs = root_ / "inputs";
  auto args = [&](int seed) {
    return std::vector<std::string>{"run",           "--model",
                                    ck.string(),     "--backend",
                                    "cpu",           "--quiet",
                                    "--tokens",      "3",
                                    "--seed",        std::to_string(seed),
                                    "--dump-logits", logits.string(),
                                    "--dump-inputs", inputs.string()};
  };
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(run_ferry_args(args(0)).code, 0);
  const double span = testing::seconds_since(t0) * 1.1;
  const uintmax_t logits_size = fs::file_size(logits);
  std::mt19937 rng(5);
  for (int i = 1; i <= 8; ++i) {
    const int sig = i % 2 == 0 ? SIGINT : SIGTERM;
    FerryProcess p(args(i));
    ASSERT_TRUE(p.wait_handlers());
    sleep_s(std::uniform_real_distribution<double>(0.0, span)(rng));
    p.signal(sig);
    const Ended e = p.wait();
    expect_clean_end(e, describe("dump ", i));
    EXPECT_TRUE(e.code == 0 || e.code == 128 + sig) << e.code << ": " << e.err;
    // Whatever the moment: every file there is whole (same shape every time, so same size).
    EXPECT_EQ(fs::file_size(logits), logits_size);
    for (const auto& f : fs::directory_iterator(inputs)) {
      const std::string head = FerryProcess::slurp(f.path().string()).substr(0, 6);
      EXPECT_EQ(head, "\x93NUMPY") << f.path();
    }
    EXPECT_TRUE(leftovers(root_).empty());
    EXPECT_TRUE(leftovers(inputs).empty());
  }
}

TEST_F(FaultInjection, FullDiskInjectedLeavesOldCheckpointAndNoTemporaries) {
  const fs::path ck = fresh("full", 1);
  // A 20 MB "disk": the first 19 MB shard of the new checkpoint fits, the rest does not.
  const Ended e = run_ferry_args(
      synth_args(ck, 2, true), {"LD_PRELOAD=" FERRY_ENOSPC_SHIM, "FERRY_SHIM_DISK_BYTES=20000000"});
  expect_clean_end(e, "synth on a full disk");
  EXPECT_EQ(e.code, 2);
  EXPECT_NE(e.err.find("No space left on device"), std::string::npos) << e.err;
  EXPECT_NE(e.err.find(" (new)/model-000"), std::string::npos) << e.err;  // not a staging name
  EXPECT_NE(e.err.find("was left as it was"), std::string::npos) << e.err;
  EXPECT_EQ(folder_digest(ck), digest_[1]);
  EXPECT_TRUE(leftovers(root_).empty());

  const fs::path npy = root_ / "full.npy";
  std::ofstream(npy) << "old";
  const Ended d = run_ferry_args({"run", "--model", ck.string(), "--backend", "cpu", "--quiet",
                                  "--tokens", "2", "--dump-logits", npy.string()},
                                 {"LD_PRELOAD=" FERRY_ENOSPC_SHIM, "FERRY_SHIM_DISK_BYTES=4096"});
  expect_clean_end(d, "dump on a full disk");
  EXPECT_EQ(d.code, 2);
  EXPECT_NE(d.err.find("No space left on device"), std::string::npos) << d.err;
  EXPECT_EQ(FerryProcess::slurp(npy.string()), "old");
  EXPECT_TRUE(leftovers(root_).empty());
}

TEST_F(FaultInjection, FullTmpfsLeavesOldCheckpointAndNoTemporaries) {
  // A real full file system: a 60 MB tmpfs in a private mount namespace, where one is allowed.
  if (std::system("unshare -rm true >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "no private mount namespace here (the injected full disk covers it)";
  }
  const fs::path log = root_ / "tmpfs.log";
  const std::string ferry = FERRY_BINARY;
  const std::string script =
      "set -u; d=" + (root_ / "tmpfs").string() +
      "; mkdir -p \"$d\"; "
      "mount -t tmpfs -o size=60m none \"$d\" || exit 77; "
      "F=" +
      ferry +
      "; "
      "$F synth --preset qwen3-tiny --out \"$d/ck\" --seed 1 2>/dev/null || exit 78; "
      "before=$(cat \"$d\"/ck/* | cksum); "
      "$F synth --preset qwen3-tiny --out \"$d/ck\" --seed 2 --force 2>" +
      root_.string() +
      "/tmpfs.err; echo rc=$?; "
      "echo same=$([ \"$(cat \"$d\"/ck/* | cksum)\" = \"$before\" ] && echo yes || echo no); "
      "echo left=$(ls -A \"$d\" | grep -c ferry-); "
      "head -c $(( $(df --output=avail -B1 \"$d\" | tail -1) - 100000 )) /dev/zero > \"$d/fill\"; "
      "$F run --model \"$d/ck\" --backend cpu --quiet --tokens 2 --dump-logits \"$d/l.npy\" 2>>" +
      root_.string() +
      "/tmpfs.err; echo dump_rc=$?; "
      "echo npy=$(ls -A \"$d\" | grep -c npy)";
  const std::string cmd = "unshare -rm bash -c '" + script + "' > " + log.string() + " 2>&1";
  const int status = std::system(cmd.c_str());
  const std::string out = FerryProcess::slurp(log.string());
  if (WEXITSTATUS(status) == 77) GTEST_SKIP() << "tmpfs cannot be mounted here: " << out;
  ASSERT_EQ(WEXITSTATUS(status), 0) << out;
  EXPECT_NE(out.find("rc=2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("same=yes"), std::string::npos) << out;
  EXPECT_NE(out.find("left=0"), std::string::npos) << out;
  EXPECT_NE(out.find("dump_rc=2"), std::string::npos) << out;
  EXPECT_NE(out.find("npy=0"), std::string::npos) << out;
  const std::string err = FerryProcess::slurp((root_ / "tmpfs.err").string());
  EXPECT_EQ(count_lines(err), 2u) << err;
  EXPECT_NE(err.find("No space left on device"), std::string::npos) << err;
}

TEST_F(FaultInjection, TwoWritersOfOneFolderTakeTurns) {
  // Two writers of `dir` started together (seeds 2 and 3); both must end cleanly.
  auto race = [](const fs::path& dir, bool force) {
    FerryProcess a(synth_args(dir, 2, force));
    FerryProcess b(synth_args(dir, 3, force));
    std::pair<Ended, Ended> ends{a.wait(), b.wait()};
    expect_clean_end(ends.first, "writer a");
    expect_clean_end(ends.second, "writer b");
    return ends;
  };
  for (int round = 0; round < 3; ++round) {
    const fs::path ck = fresh("two", 1, {2, 3});
    const auto [ea, eb] = race(ck, true);
    EXPECT_EQ(ea.code, 0) << ea.err;
    EXPECT_EQ(eb.code, 0) << eb.err;
    const uint64_t now = folder_digest(ck);
    EXPECT_TRUE(now == digest_[2] || now == digest_[3]);
    EXPECT_TRUE(leftovers(root_).empty());
  }
  // Into a new folder without --force: one writes it, the other finds a checkpoint there.
  const fs::path fresh_dir = root_ / "two_new";  // (digests 2 and 3 known from above)
  fs::remove_all(fresh_dir);
  const auto [ea, eb] = race(fresh_dir, false);
  EXPECT_EQ((ea.code == 0) + (eb.code == 0), 1) << ea.err << eb.err;
  EXPECT_NE((ea.code == 0 ? eb : ea).err.find("holds a checkpoint (use --force"),
            std::string::npos);
  const uint64_t now = folder_digest(fresh_dir);
  EXPECT_TRUE(now == digest_[2] || now == digest_[3]);
}

TEST_F(FaultInjection, CheckpointChangedUnderARunningReader) {
  const fs::path ck = fresh("reader", 1, {2});
  const fs::path shard = ck / "model-00001-of-00003.safetensors";
  const std::string s1 = FerryProcess::slurp(shard.string());
  const std::string s2 =
      FerryProcess::slurp((root_ / "ref/s2/model-00001-of-00003.safetensors").string());
  ASSERT_EQ(s1.size(), s2.size());
  const std::vector<std::string> args{"run",     "--model", ck.string(), "--backend", "cpu",
                                      "--quiet", "--json",  "--tokens",  "2"};
  auto logits_hash = [](const Ended& e) {
    return nlohmann::json::parse(e.out)["logits_hash"].get<std::string>();
  };
  // The file is read early in a run (opening, then the load): aim there, timing from the moment
  // ferry's main runs (not from the dynamic loader's mapping of the CUDA libraries).
  FerryProcess ref(args);
  ASSERT_TRUE(ref.wait_handlers());
  const auto t0 = std::chrono::steady_clock::now();
  const Ended ref1 = ref.wait();
  const double span = testing::seconds_since(t0) * 0.5;
  ASSERT_EQ(ref1.code, 0) << ref1.err;
  std::ofstream(shard, std::ios::binary | std::ios::in | std::ios::out)
      .write(s2.data(), static_cast<std::streamsize>(s2.size()));
  const Ended ref2 = run_ferry_args(args);
  ASSERT_EQ(ref2.code, 0) << ref2.err;
  ASSERT_NE(logits_hash(ref1), logits_hash(ref2));

  std::mt19937 rng(3);
  int caught = 0;
  for (int i = 0; i < 12; ++i) {
    {  // the shard back to seed 1, by a new file renamed over it (no change to a reader)
      const fs::path tmp = ck / "restore.tmp.bin";
      std::ofstream(tmp, std::ios::binary)
          .write(s1.data(), static_cast<std::streamsize>(s1.size()));
      fs::rename(tmp, shard);
    }
    FerryProcess p(args);
    ASSERT_TRUE(p.wait_handlers());
    sleep_s(std::uniform_real_distribution<double>(0.0, span)(rng));
    if (i % 2 == 0) {
      ::truncate(shard.c_str(), static_cast<off_t>(s1.size() / 3));
    } else {  // rewritten in place, the same size, in 1 MB pieces
      std::fstream f(shard, std::ios::binary | std::ios::in | std::ios::out);
      for (size_t off = 0; off < s2.size(); off += 1 << 20) {
        f.seekp(static_cast<std::streamoff>(off));
        f.write(s2.data() + off,
                static_cast<std::streamsize>(std::min<size_t>(1 << 20, s2.size() - off)));
        f.flush();
      }
    }
    const Ended e = p.wait();
    const std::string what = describe("iteration ", i);
    expect_clean_end(e, what);
    if (e.code == 0) {
      // It read the whole file before the change, or only after it was complete.
      const std::string h = logits_hash(e);
      EXPECT_TRUE(h == logits_hash(ref1) || (i % 2 == 1 && h == logits_hash(ref2)))
          << what << ": a run over changing bytes gave " << h;
    } else {
      EXPECT_EQ(e.code, 2) << what << ": " << e.err;
      EXPECT_EQ(e.err.rfind("ferry run: ", 0), 0u) << e.err;
      EXPECT_EQ(e.err.find("internal"), std::string::npos) << e.err;
      caught += e.err.find("changed or truncated while in use") != std::string::npos;
    }
  }
  EXPECT_GT(caught, 0);  // some changes did land while the file was in use
}

}  // namespace
}  // namespace ferry
