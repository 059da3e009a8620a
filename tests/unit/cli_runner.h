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

// A shell command line, run as it is, stdout and stderr apart.
inline CliRun run_command(const std::string& command) {
  static int counter = 0;
  const std::filesystem::path err_file =
      std::filesystem::temp_directory_path() /
      ("ferry_cli_err_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  const std::string cmd = command + " 2>" + err_file.string();
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

// `args` are appended to the binary's path as they are (the shell splits them).
inline CliRun run_ferry(const std::string& args) {
  return run_command(std::string(FERRY_BINARY) + " " + args);
}

// scripts/timeline_gaps.py with `args`.
inline CliRun run_timeline_gaps(const std::string& args) {
  return run_command("python3 " + std::string(FERRY_SOURCE_DIR) + "/scripts/timeline_gaps.py " +
                     args);
}

}  // namespace ferry::testing
