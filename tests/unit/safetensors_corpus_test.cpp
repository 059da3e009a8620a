// Every file in tests/corpus/ is rejected with the reason tests/corpus/expected.json names, or
// accepted if listed there as valid; and every corpus entry is in that table.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "format/safetensors.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;

const fs::path kCorpus = fs::path(FERRY_SOURCE_DIR) / "tests" / "corpus";

nlohmann::json load_table() {
  std::ifstream in(kCorpus / "expected.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

// Folders open as checkpoints; files both as single files and as checkpoints.
Status open_entry(const std::string& rel) {
  const std::string path = (kCorpus / rel).string();
  auto c = Checkpoint::open(path);
  if (rel.back() == '/') return c.status();
  auto f = SafetensorsFile::open(path);
  EXPECT_EQ(f.ok(), c.ok()) << rel;
  if (!f.ok() && !c.ok()) {
    EXPECT_EQ(f.error().message, c.error().message) << rel;
  }
  return f.status();
}

TEST(SafetensorsCorpus, EveryBadEntryIsRejectedForItsReason) {
  const auto table = load_table();
  ASSERT_GE(table["rejected"].size(), 40u);
  for (const auto& [rel, reason] : table["rejected"].items()) {
    SCOPED_TRACE(rel);
    Status s = open_entry(rel);
    ASSERT_FALSE(s.ok()) << "accepted a corpus file that breaks a rule";
    const std::string expect = reason.get<std::string>();
    EXPECT_NE(s.error().message.find(expect), std::string::npos)
        << "expected '" << expect << "' in: " << s.error().message;
    // Errors name the file (or folder) they come from.
    const std::string stem =
        fs::path(rel.back() == '/' ? rel.substr(0, rel.size() - 1) : rel).filename().string();
    EXPECT_NE(s.error().message.find(stem), std::string::npos) << s.error().message;
    const bool io = expect == "cannot open" || rel == "no_checkpoint/";
    EXPECT_EQ(s.error().code, io ? ErrorCode::io : ErrorCode::format) << s.error().to_string();
  }
}

TEST(SafetensorsCorpus, ValidEntriesAreAccepted) {
  const auto table = load_table();
  ASSERT_GE(table["accepted"].size(), 5u);
  for (const auto& rel : table["accepted"]) {
    const std::string r = rel.get<std::string>();
    Status s = open_entry(r);
    EXPECT_TRUE(s.ok()) << r << ": " << (s.ok() ? "" : s.error().message);
  }
}

TEST(SafetensorsCorpus, TableListsEveryEntry) {
  const auto table = load_table();
  std::set<std::string> listed;
  for (const auto& [rel, reason] : table["rejected"].items()) listed.insert(rel);
  for (const auto& rel : table["accepted"]) listed.insert(rel.get<std::string>());
  for (const auto& e : fs::directory_iterator(kCorpus)) {
    const std::string name = e.path().filename().string();
    if (name == "make_corpus.py" || name == "expected.json" || name == "README.md" ||
        name == ".gitattributes")
      continue;
    if (name == "valid") {
      for (const auto& v : fs::directory_iterator(e.path())) {
        const std::string vrel =
            "valid/" + v.path().filename().string() + (v.is_directory() ? "/" : "");
        EXPECT_TRUE(listed.count(vrel)) << vrel << " is not in expected.json";
      }
      continue;
    }
    const std::string rel = name + (e.is_directory() ? "/" : "");
    EXPECT_TRUE(listed.count(rel)) << rel << " is not in expected.json";
  }
}

TEST(SafetensorsCorpus, AllDtypesFileReadsBack) {
  auto f = SafetensorsFile::open((kCorpus / "valid" / "all_dtypes.safetensors").string());
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->header().tensors.size(), 17u);
  EXPECT_EQ(f->header().metadata.at("format"), "pt");
  const TensorInfo* bf16 = f->find("bf16");
  ASSERT_NE(bf16, nullptr);
  EXPECT_EQ(bf16->dtype, DType::bf16);
  EXPECT_EQ(bf16->shape, std::vector<int64_t>{3});
  EXPECT_EQ(bf16->bytes, 6u);
  const TensorInfo* scalar = f->find("scalar");
  ASSERT_NE(scalar, nullptr);
  EXPECT_TRUE(scalar->shape.empty());
  EXPECT_EQ(scalar->numel(), 1);
  const TensorInfo* empty = f->find("empty");
  ASSERT_NE(empty, nullptr);
  EXPECT_EQ(empty->numel(), 0);
  EXPECT_EQ(f->data(*empty).size(), 0u);
  // make_corpus.py fills the data with i % 251: the first tensor (bool) starts at data byte 0.
  const auto data = f->data(*f->find("bool"));
  ASSERT_EQ(data.size(), 3u);
  EXPECT_EQ(data[2], std::byte{2});
  EXPECT_EQ(f->data(*bf16)[0], std::byte{static_cast<unsigned char>(3 + 3 + 3 + 6 + 6 + 6)});
}

}  // namespace
}  // namespace ferry
