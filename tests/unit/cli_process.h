// The built `ferry` binary as a child process the test can signal: started with posix_spawn
// (stdout and stderr to files), then waited for. Plus what the fault-injection tests compare: a
// digest of a checkpoint folder's files, and the leftovers a writer may not leave.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace ferry::testing {

struct Ended {
  int code = -1;          // exit status (or 128 + signal)
  bool signaled = false;  // died of a signal: never acceptable
  std::string out;
  std::string err;
};

class FerryProcess {
 public:
  // `env` entries ("NAME=value") are added to this process's environment.
  explicit FerryProcess(const std::vector<std::string>& args,
                        const std::vector<std::string>& env = {}) {
    static int counter = 0;
    const auto base =
        std::filesystem::temp_directory_path() /
        ("ferry_proc_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    out_ = base.string() + ".out";
    err_ = base.string() + ".err";
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::vector<std::string> argv_s{FERRY_BINARY};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_s;
    for (char** e = environ; *e != nullptr; ++e) env_s.emplace_back(*e);
    env_s.insert(env_s.end(), env.begin(), env.end());
    std::vector<char*> envp;
    for (auto& e : env_s) envp.push_back(e.data());
    envp.push_back(nullptr);
    if (posix_spawn(&pid_, FERRY_BINARY, &fa, nullptr, argv.data(), envp.data()) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
  }
  ~FerryProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    std::filesystem::remove(out_);
    std::filesystem::remove(err_);
  }
  FerryProcess(const FerryProcess&) = delete;
  FerryProcess& operator=(const FerryProcess&) = delete;

  bool started() const { return pid_ > 0; }
  // Waits (up to `timeout_s`) until the process catches SIGINT and SIGTERM, as /proc/PID/status
  // shows: ferry's main installs its handlers first thing, but a signal that arrives while the
  // dynamic loader is still mapping the CUDA libraries kills any program, so "a random point of
  // the run" starts here.
  bool wait_handlers(double timeout_s = 30) const {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    const uint64_t want = (uint64_t{1} << (SIGINT - 1)) | (uint64_t{1} << (SIGTERM - 1));
    while (pid_ > 0 && std::chrono::steady_clock::now() < until) {
      std::ifstream f("/proc/" + std::to_string(pid_) + "/status");
      for (std::string line; std::getline(f, line);) {
        if (line.rfind("SigCgt:", 0) == 0) {
          const uint64_t caught = std::stoull(line.substr(7), nullptr, 16);
          if ((caught & want) == want) return true;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return false;
  }
  void signal(int sig) const {
    if (pid_ > 0) ::kill(pid_, sig);
  }
  Ended wait() {
    Ended e;
    int status = 0;
    if (pid_ <= 0 || ::waitpid(pid_, &status, 0) != pid_) return e;
    pid_ = -1;
    e.signaled = WIFSIGNALED(status);
    e.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    e.out = slurp(out_);
    e.err = slurp(err_);
    return e;
  }

  static std::string slurp(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }

 private:
  pid_t pid_ = -1;
  std::string out_;
  std::string err_;
};

inline Ended run_ferry_args(const std::vector<std::string>& args,
                            const std::vector<std::string>& env = {}) {
  FerryProcess p(args, env);
  return p.wait();
}

inline size_t count_lines(const std::string& s) {
  return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
}

// FNV-1a 64 over the names and bytes of the regular files in `dir`, in name order: equal
// digests mean the same checkpoint, file for file.
inline uint64_t folder_digest(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.is_regular_file()) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](const char* p, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      h ^= static_cast<unsigned char>(p[i]);
      h *= 0x100000001b3ull;
    }
  };
  for (const auto& n : names) {
    mix(n.data(), n.size() + 1);
    std::ifstream f(dir / n, std::ios::binary);
    std::vector<char> buf(1 << 20);
    while (f.read(buf.data(), static_cast<std::streamsize>(buf.size())) || f.gcount() > 0)
      mix(buf.data(), static_cast<size_t>(f.gcount()));
  }
  return h;
}

// Names in `dir` that only a writer in the middle of its work may leave: ferry's temporaries
// and staging folders, and the ".tmp" files of writers before them.
inline std::vector<std::string> leftovers(const std::filesystem::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (n.find(".ferry-") != std::string::npos ||
        (n.size() > 4 && n.compare(n.size() - 4, 4, ".tmp") == 0))
      out.push_back(n);
  }
  return out;
}

inline double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace ferry::testing
