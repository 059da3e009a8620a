// `ferry inspect` on every malformed entry of tests/corpus/: a non-zero exit (2), never a signal,
// and exactly one line on stderr that starts with "ferry inspect: " and gives the entry's reason.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli_runner.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;

TEST(InspectCorpus, EveryBadEntryFailsWithOneLineReason) {
  const fs::path corpus = fs::path(FERRY_SOURCE_DIR) / "tests" / "corpus";
  std::ifstream in(corpus / "expected.json");
  std::stringstream ss;
  ss << in.rdbuf();
  const auto table = nlohmann::json::parse(ss.str());
  ASSERT_GE(table["rejected"].size(), 40u);
  for (const auto& [rel, reason] : table["rejected"].items()) {
    SCOPED_TRACE(rel);
    const testing::CliRun r = testing::run_ferry("inspect '" + (corpus / rel).string() + "'");
    EXPECT_FALSE(r.signaled) << "killed by a signal: " << r.code;
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_EQ(r.err.rfind("ferry inspect: ", 0), 0u) << r.err;
    ASSERT_FALSE(r.err.empty());
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "more than one line: " << r.err;
    EXPECT_NE(r.err.find(reason.get<std::string>()), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace ferry
