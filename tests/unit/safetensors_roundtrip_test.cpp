// Write then read back: data byte-exact, shapes, dtypes, metadata, order; sharded too.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "format/safetensors.h"
#include "scratch_dir.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;

// Deterministic bytes that differ per tensor (seed) and per position.
std::byte pattern(uint64_t seed, size_t i) {
  return static_cast<std::byte>((seed * 131 + i * 7 + (i >> 8)) & 0xFF);
}

TensorToWrite make(std::string name, DType dtype, std::vector<int64_t> shape, uint64_t seed) {
  TensorToWrite t;
  t.name = std::move(name);
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.fill = [seed](std::span<std::byte> out) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = pattern(seed, i);
  };
  return t;
}

uint64_t expected_bytes(const TensorToWrite& t) {
  uint64_t n = dtype_size(t.dtype);
  for (int64_t d : t.shape) n *= static_cast<uint64_t>(d);
  return n;
}

void expect_same(const Checkpoint& c, const std::vector<TensorToWrite>& written, uint64_t seed0) {
  ASSERT_EQ(c.entries().size(), written.size());
  uint64_t total = 0;
  for (size_t k = 0; k < written.size(); ++k) {
    const TensorToWrite& w = written[k];
    SCOPED_TRACE(w.name);
    const Checkpoint::Entry* e = c.find(w.name);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->info->dtype, w.dtype);
    EXPECT_EQ(e->info->shape, w.shape);
    const auto data = c.data(*e);
    ASSERT_EQ(data.size(), expected_bytes(w));
    for (size_t i = 0; i < data.size(); ++i)
      ASSERT_EQ(data[i], pattern(seed0 + k, i)) << "byte " << i;
    total += data.size();
  }
  EXPECT_EQ(c.total_bytes(), total);
}

std::vector<TensorToWrite> mixed_tensors() {
  std::vector<TensorToWrite> ts;
  ts.push_back(make("model.embed_tokens.weight", DType::bf16, {37, 19}, 0));
  ts.push_back(make("layers.0.norm.weight", DType::f32, {19}, 1));
  ts.push_back(make("layers.0.scale", DType::f64, {}, 2));      // scalar
  ts.push_back(make("layers.0.empty", DType::i64, {0, 4}, 3));  // zero-size
  ts.push_back(make("a.ids", DType::i64, {5}, 4));
  ts.push_back(make("a.mask", DType::bool_, {3, 3}, 5));
  ts.push_back(make("a.fp8", DType::f8_e4m3, {7}, 6));
  ts.push_back(make("z.half", DType::f16, {2, 2, 2}, 7));
  ts.push_back(make("huge.but.empty", DType::u8, {1ll << 40, 1ll << 40, 0}, 8));
  return ts;
}

TEST(SafetensorsWrite, SingleFileRoundTrip) {
  testing::ScratchDir dir{"ferry_st"};
  const auto ts = mixed_tensors();
  const std::map<std::string, std::string> md = {{"format", "pt"}, {"note", "ünïcode ✓"}};
  ASSERT_TRUE(write_safetensors((dir.path() / "x.safetensors").string(), ts, md).ok());
  auto f = SafetensorsFile::open((dir.path() / "x.safetensors").string());
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->header().metadata, md);
  EXPECT_EQ(f->header().data_start % 8, 0u) << "header padded to a multiple of 8";
  // Data laid out in the order given.
  ASSERT_EQ(f->header().tensors.size(), ts.size());
  for (size_t k = 1; k < ts.size(); ++k)
    EXPECT_LE(f->find(ts[k - 1].name)->begin, f->find(ts[k].name)->begin);
  // No temporary left behind.
  EXPECT_FALSE(fs::exists((dir.path() / "x.safetensors.tmp").string()));
  auto c = Checkpoint::open((dir.path() / "x.safetensors").string());
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(fs::path(c->dir()), fs::path((dir.path() / "x.safetensors").string()).parent_path());
  expect_same(*c, ts, 0);
}

TEST(SafetensorsWrite, HeaderIsPaddedWithSpacesAndOmitsEmptyMetadata) {
  testing::ScratchDir dir{"ferry_st"};
  ASSERT_TRUE(
      write_safetensors((dir.path() / "y.safetensors").string(), {make("t", DType::u8, {3}, 9)})
          .ok());
  std::ifstream in((dir.path() / "y.safetensors").string(), std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string file = ss.str();
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(file[i]);
  ASSERT_EQ((8 + n) % 8, 0u);
  ASSERT_EQ(file.size(), 8 + n + 3);
  const std::string header = file.substr(8, n);
  EXPECT_EQ(header.substr(0, header.find_last_not_of(' ') + 1),
            R"({"t":{"dtype":"U8","shape":[3],"data_offsets":[0,3]}})");
  EXPECT_EQ(header.find("__metadata__"), std::string::npos);
}

TEST(SafetensorsWrite, NamesAndMetadataNeedingJsonEscapesRoundTrip) {
  testing::ScratchDir dir{"ferry_st"};
  const std::vector<TensorToWrite> ts = {make("q\"uote\\back/slash\ttab", DType::u8, {2}, 1),
                                         make("\xc3\xbc\xe2\x9c\x93", DType::u8, {1}, 2)};
  const std::map<std::string, std::string> md = {{"k\"", "v\n\\"}};
  ASSERT_TRUE(write_safetensors((dir.path() / "e.safetensors").string(), ts, md).ok());
  auto c = Checkpoint::open((dir.path() / "e.safetensors").string());
  ASSERT_TRUE(c.ok()) << c.error().message;
  expect_same(*c, ts, 1);
  EXPECT_EQ(c->files()[0].header().metadata, md);
}

TEST(SafetensorsWrite, ShardedCheckpointRoundTrip) {
  testing::ScratchDir dir{"ferry_st"};
  std::vector<TensorToWrite> ts;
  // bytes: 600 + 600 | 1400 (over the limit: alone) | 300 + 300 + 300 | 400
  const int64_t sizes[] = {300, 300, 700, 150, 150, 150, 200};
  for (size_t i = 0; i < std::size(sizes); ++i) {
    std::string name = "t";
    name += std::to_string(i);  // (not "t" + ...: GCC 12 warns -Wrestrict on that)
    ts.push_back(make(name, DType::bf16, {sizes[i]}, 10 + i));
  }
  ASSERT_TRUE(write_checkpoint((dir.path() / "ck").string(), ts, 1200).ok());
  const char* names[] = {"model-00001-of-00004.safetensors", "model-00002-of-00004.safetensors",
                         "model-00003-of-00004.safetensors", "model-00004-of-00004.safetensors"};
  for (const char* n : names) EXPECT_TRUE(fs::exists((dir.path() / "ck/").string() + n)) << n;
  EXPECT_FALSE(fs::exists((dir.path() / "ck/model.safetensors").string()));

  std::ifstream in((dir.path() / "ck/model.safetensors.index.json").string());
  std::stringstream ss;
  ss << in.rdbuf();
  auto index = parse_safetensors_index(ss.str(), "index");
  ASSERT_TRUE(index.ok()) << index.error().message;
  EXPECT_EQ(index->metadata.at("total_size"), "3900");
  EXPECT_EQ(index->weight_map.at("t0"), names[0]);
  EXPECT_EQ(index->weight_map.at("t1"), names[0]);
  EXPECT_EQ(index->weight_map.at("t2"), names[1]);
  EXPECT_EQ(index->weight_map.at("t3"), names[2]);
  EXPECT_EQ(index->weight_map.at("t5"), names[2]);
  EXPECT_EQ(index->weight_map.at("t6"), names[3]);
  // Sorted by name and indented, as transformers writes it.
  EXPECT_LT(ss.str().find("\"t0\""), ss.str().find("\"t6\""));
  EXPECT_NE(ss.str().find("\n  \"metadata\": {\n    \"total_size\": 3900\n  }"), std::string::npos);

  auto c = Checkpoint::open((dir.path() / "ck").string());
  ASSERT_TRUE(c.ok()) << c.error().message;
  ASSERT_EQ(c->files().size(), 4u);
  // Entries in (shard, offset) order.
  for (size_t k = 0; k < c->entries().size(); ++k)
    EXPECT_EQ(c->entries()[k].info->name, ts[k].name);
  expect_same(*c, ts, 10);
  // Shards carry the metadata.
  EXPECT_EQ(c->files()[0].header().metadata.at("format"), "pt");
  // The index itself is a valid path to open.
  auto via_index = Checkpoint::open((dir.path() / "ck/model.safetensors.index.json").string());
  ASSERT_TRUE(via_index.ok()) << via_index.error().message;
  EXPECT_EQ(via_index->entries().size(), ts.size());
}

TEST(SafetensorsWrite, RewritingAFolderRemovesTheEarlierCheckpointOnly) {
  testing::ScratchDir dir{"ferry_st"};
  const auto ts = mixed_tensors();
  fs::create_directories((dir.path() / "ck").string());
  { std::ofstream((dir.path() / "ck/config.json").string()) << "{}"; }
  { std::ofstream((dir.path() / "ck/model-extra.safetensors").string()) << "not ours"; }
  ASSERT_TRUE(write_checkpoint((dir.path() / "ck").string(), ts, 20).ok());  // many shards
  ASSERT_TRUE(fs::exists((dir.path() / "ck/model.safetensors.index.json").string()));
  size_t many = 0;
  for (const auto& e : fs::directory_iterator((dir.path() / "ck").string()))
    many += e.path().filename().string().starts_with("model-0");
  EXPECT_GT(many, 3u);

  ASSERT_TRUE(write_checkpoint((dir.path() / "ck").string(), ts, 800).ok());  // fewer shards
  auto fewer = Checkpoint::open((dir.path() / "ck").string());
  ASSERT_TRUE(fewer.ok()) << fewer.error().message;
  size_t now = 0;
  for (const auto& e : fs::directory_iterator((dir.path() / "ck").string()))
    now += e.path().filename().string().starts_with("model-0");
  EXPECT_EQ(now, fewer->files().size()) << "stale shards of the first write were left";
  EXPECT_LT(now, many);

  ASSERT_TRUE(write_checkpoint((dir.path() / "ck").string(), ts).ok());  // one file
  EXPECT_FALSE(fs::exists((dir.path() / "ck/model.safetensors.index.json").string()));
  for (const auto& e : fs::directory_iterator((dir.path() / "ck").string()))
    EXPECT_FALSE(e.path().filename().string().starts_with("model-0")) << e.path();
  auto c = Checkpoint::open((dir.path() / "ck").string());
  ASSERT_TRUE(c.ok()) << c.error().message;
  ASSERT_EQ(c->files().size(), 1u);
  EXPECT_EQ(fs::path(c->files()[0].path()).filename(), "model.safetensors");
  expect_same(*c, ts, 0);

  ASSERT_TRUE(write_checkpoint((dir.path() / "ck").string(), ts, 800).ok());  // sharded again
  EXPECT_FALSE(fs::exists((dir.path() / "ck/model.safetensors").string()));
  auto again = Checkpoint::open((dir.path() / "ck").string());
  ASSERT_TRUE(again.ok()) << again.error().message;
  expect_same(*again, ts, 0);
  // Files that are not checkpoint outputs stay.
  EXPECT_TRUE(fs::exists((dir.path() / "ck/config.json").string()));
  EXPECT_TRUE(fs::exists((dir.path() / "ck/model-extra.safetensors").string()));
}

TEST(SafetensorsWrite, ManyTensorsFilledInParallel) {
  testing::ScratchDir dir{"ferry_st"};
  std::vector<TensorToWrite> ts;
  for (int i = 0; i < 300; ++i)
    ts.push_back(make("w." + std::to_string(i), DType::f32, {i % 17, 33}, 100 + i));
  ASSERT_TRUE(write_checkpoint((dir.path() / "ck").string(), ts, 64 * 1024).ok());
  auto c = Checkpoint::open((dir.path() / "ck").string());
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_GT(c->files().size(), 1u);
  expect_same(*c, ts, 100);
}

TEST(SafetensorsWrite, RejectsBadInputWithoutWriting) {
  testing::ScratchDir dir{"ferry_st"};
  const std::string p = (dir.path() / "bad.safetensors").string();
  auto dup = write_safetensors(p, {make("a", DType::u8, {1}, 0), make("a", DType::u8, {1}, 0)});
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.error().message.find("duplicate tensor 'a'"), std::string::npos);
  auto neg = write_safetensors(p, {make("a", DType::u8, {-1}, 0)});
  ASSERT_FALSE(neg.ok());
  EXPECT_NE(neg.error().message.find("negative dimension"), std::string::npos);
  auto overflow = write_safetensors(p, {make("a", DType::u8, {1ll << 40, 1ll << 40}, 0)});
  ASSERT_FALSE(overflow.ok());
  EXPECT_NE(overflow.error().message.find("overflows"), std::string::npos);
  auto empty = write_safetensors(p, {make("", DType::u8, {1}, 0)});
  ASSERT_FALSE(empty.ok());
  auto reserved = write_safetensors(p, {make("__metadata__", DType::u8, {1}, 0)});
  ASSERT_FALSE(reserved.ok());
  auto bad_utf8 = write_safetensors(p, {make("a\xff", DType::u8, {1}, 0)});
  ASSERT_FALSE(bad_utf8.ok());
  EXPECT_EQ(bad_utf8.error().code, ErrorCode::invalid_argument);
  EXPECT_FALSE(fs::exists(p));
  EXPECT_FALSE(fs::exists(p + ".tmp"));
}

TEST(SafetensorsWrite, FillExceptionBecomesAnErrorAndLeavesNoFile) {
  testing::ScratchDir dir{"ferry_st"};
  auto t = make("boom", DType::u8, {4}, 0);
  t.fill = [](std::span<std::byte>) { throw std::runtime_error("disk on fire"); };
  auto s = write_safetensors((dir.path() / "f.safetensors").string(),
                             {make("ok", DType::u8, {4}, 1), t});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("boom: disk on fire"), std::string::npos) << s.error().message;
  EXPECT_FALSE(fs::exists((dir.path() / "f.safetensors").string()));
  EXPECT_FALSE(fs::exists((dir.path() / "f.safetensors.tmp").string()));
}

TEST(SafetensorsWrite, EmptyCheckpointIsAValidFile) {
  testing::ScratchDir dir{"ferry_st"};
  ASSERT_TRUE(write_checkpoint((dir.path() / "ck").string(), {}).ok());
  auto c = Checkpoint::open((dir.path() / "ck").string());
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_TRUE(c->entries().empty());
  EXPECT_EQ(c->total_bytes(), 0u);
}

TEST(MappedFile, MapsEmptyFilesAndRefusesFolders) {
  testing::ScratchDir dir{"ferry_st"};
  { std::ofstream((dir.path() / "empty").string()); }
  auto m = MappedFile::open((dir.path() / "empty").string());
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->bytes().size(), 0u);
  auto d = MappedFile::open((dir.path() / "").string());
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().code, ErrorCode::io);
  auto missing = MappedFile::open((dir.path() / "nope").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("nope"), std::string::npos);
}

TEST(MappedFile, MovesOwnership) {
  testing::ScratchDir dir{"ferry_st"};
  { std::ofstream((dir.path() / "f").string()) << "hello"; }
  auto m = MappedFile::open((dir.path() / "f").string());
  ASSERT_TRUE(m.ok());
  MappedFile a = std::move(*m);
  EXPECT_EQ(a.bytes().size(), 5u);
  EXPECT_EQ(static_cast<char>(a.bytes()[4]), 'o');
  MappedFile b;
  b = std::move(a);
  EXPECT_EQ(b.bytes().size(), 5u);
  EXPECT_EQ(a.bytes().size(), 0u);  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(b.path(), (dir.path() / "f").string());
}

TEST(Checkpoint, RejectsOtherPathsNamingWhatItLookedFor) {
  testing::ScratchDir dir{"ferry_st"};
  auto none = Checkpoint::open((dir.path() / "").string());
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("model.safetensors.index.json"), std::string::npos);
  EXPECT_NE(none.error().message.find("model.safetensors"), std::string::npos);
  { std::ofstream((dir.path() / "weights.bin").string()) << "x"; }
  auto other = Checkpoint::open((dir.path() / "weights.bin").string());
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.error().code, ErrorCode::invalid_argument);
  auto missing = Checkpoint::open((dir.path() / "missing").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::io);
}

}  // namespace
}  // namespace ferry
