// What the `ferry` subcommands share: how an error ends a command and the --graphs flag (opening
// a model and the --backend flag are api/open_model.h).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <utility>

#include "api/open_model.h"
#include "cli/flags.h"
#include "core/status.h"

namespace ferry::cli {

// The commands are the library's front end: its names are theirs.
using namespace ferry::api;  // NOLINT(google-build-using-namespace)

// Errors end the command: "ferry NAME: message" on stderr, exit status 2 (128 + the signal when
// SIGINT/SIGTERM stopped it, core/interrupt.h).
class Reporter {
 public:
  explicit Reporter(std::string command) : command_(std::move(command)) {}

  [[noreturn]] void fail(const std::string& message) const;
  template <class T>
  T check(Result<T> r) const {
    if (!r.ok()) fail(r.error().to_string());
    return std::move(r).value();
  }
  void check(const Status& s) const {
    if (!s.ok()) fail(s.error().to_string());
  }

 private:
  std::string command_;
};

// --graphs on|off (default on): record replayable calls once and replay them.
void add_graphs_option(CLI::App* cmd, bool* graphs);

}  // namespace ferry::cli
