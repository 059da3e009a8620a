// Runs the built `ferry` binary from a test, stdout and stderr apart, and says how it ended.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace ferry::testing {

struct CliRun {
  int code = -1;          // exit status, or 128 + signal
  bool signaled = false;  // killed by a signal (a crash): never acceptable
  std::string out;
  std::string err;
};

// `args` are appended to the binary's path as they are (the shell splits them).
inline CliRun run_ferry(const std::string& args) {
  static int counter = 0;
  const std::filesystem::path err_file =
      std::filesystem::temp_directory_path() /
      ("ferry_cli_err_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  const std::string cmd = std::string(FERRY_BINARY) + " " + args + " 2>" + err_file.string();
  CliRun r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = ::pclose(p);
  r.signaled = WIFSIGNALED(status);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream e(err_file);
  std::stringstream ss;
  ss << e.rdbuf();
  r.err = ss.str();
  std::filesystem::remove(err_file);
  return r;
}

}  // namespace ferry::testing
