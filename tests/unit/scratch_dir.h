// Test helper: a folder of a test's own under the system's temp folder, named by a prefix, the
// process id and a counter (the tests of one binary share a process; ctest runs binaries side by
// side), removed with everything in it when the object goes. `create`: made empty now (else it
// does not exist yet, for commands that make their output folder themselves).
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <system_error>

namespace ferry::testing {

class ScratchDir {
 public:
  explicit ScratchDir(const std::string& prefix, bool create = true) {
    static std::atomic<int> next{0};
    path_ = std::filesystem::temp_directory_path() /
            (prefix + "_" + std::to_string(::getpid()) + "_" + std::to_string(next++));
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
    if (create) std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;  // a destructor never throws; a folder left behind is only untidy
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace ferry::testing
