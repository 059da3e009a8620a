// Hostile compressed checkpoints (issue 24 item 6): a good container of qwen3-tiny, then one lie
// at a time in its metadata, its table or its group bytes. Each must be refused with a one-line
// error naming the group or tensor and what is wrong, never a crash; lies in a group's payload
// that the layout cannot see are refused when the group is decoded (the checksum).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "compress/group_format.h"
#include "host/compressed_model.h"
#include "model/compressed_checkpoint.h"
#include "model/config_json.h"
#include "model/presets.h"
#include "model/synth.h"
#include "scratch_dir.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct FileTensor {
  std::string name;
  DType dtype = DType::u8;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// A container as data: its metadata and tensors, to damage and write again.
struct Container {
  std::map<std::string, std::string> metadata;
  std::vector<FileTensor> tensors;
  FileTensor* find(const std::string& name) {
    for (FileTensor& t : tensors) {
      if (t.name == name) return &t;
    }
    return nullptr;
  }
};

enum class Stage { open, decode, model };

struct Case {
  std::string name;
  std::function<void(json& table)> table;  // the table's JSON (written back afterwards)
  std::function<void(Container&)> file;    // then the file's metadata and tensors
  std::vector<std::string> expect;         // substrings of the one-line error
  Stage stage = Stage::open;
};

class CompressedHostile : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    scratch_ = new testing::ScratchDir("ferry_zc_hostile");
    const fs::path in = scratch_->path() / "in";
    fs::create_directories(in);
    const ModelConfig config = preset("qwen3-tiny").value();
    std::ofstream(in / "config.json") << write_config(config);
    const ModelWeights w = describe_weights(config).value();
    ASSERT_TRUE(
        write_checkpoint(in.string(), synth_tensors(w, 3, nullptr, SynthDistribution::normal))
            .ok());
    const fs::path z = scratch_->path() / "z";
    auto r = compress_checkpoint(in.string(), z.string(), {});
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    const SafetensorsFile f = SafetensorsFile::open((z / "model.safetensors").string()).value();
    good_ = new Container;
    good_->metadata = f.header().metadata;
    for (const TensorInfo& t : f.header().tensors) {
      const auto d = f.data(t);
      const auto* p = reinterpret_cast<const uint8_t*>(d.data());
      good_->tensors.push_back({t.name, t.dtype, t.shape, {p, p + d.size()}});
    }
    config_json_ = write_config(config);
  }
  static void TearDownTestSuite() {
    delete good_;
    delete scratch_;
  }

  // Writes `c` as a container folder and returns it.
  static fs::path write(const Container& c, const std::string& name) {
    const fs::path dir = scratch_->path() / ("case_" + name);
    fs::create_directories(dir);
    std::ofstream(dir / "config.json") << config_json_;
    std::vector<TensorToWrite> tensors;
    for (const FileTensor& t : c.tensors) {
      tensors.push_back({t.name, t.dtype, t.shape, [&t](std::span<std::byte> d) {
                           std::memcpy(d.data(), t.bytes.data(),
                                       std::min(d.size(), t.bytes.size()));
                         }});
    }
    const Status s = write_safetensors((dir / "model.safetensors").string(), tensors, c.metadata);
    EXPECT_TRUE(s.ok()) << s.error().to_string();
    return dir;
  }

  static testing::ScratchDir* scratch_;
  static Container* good_;
  static std::string config_json_;
};

testing::ScratchDir* CompressedHostile::scratch_ = nullptr;
Container* CompressedHostile::good_ = nullptr;
std::string CompressedHostile::config_json_;

void put_u64(std::vector<uint8_t>& b, size_t at, uint64_t v) {
  std::memcpy(b.data() + at, &v, 8);
}
uint64_t get_u64(const std::vector<uint8_t>& b, size_t at) {
  uint64_t v = 0;
  std::memcpy(&v, b.data() + at, 8);
  return v;
}

TEST_F(CompressedHostile, TheGoodContainerOpens) {
  const fs::path dir = write(*good_, "good");
  auto m = open_compressed_model(dir.string());
  ASSERT_TRUE(m.ok()) << m.error().to_string();
  std::vector<uint8_t> out;
  for (size_t g = 0; g < m->container->table.groups.size(); ++g) {
    out.resize(m->container->table.groups[g].decoded_bytes);
    EXPECT_TRUE(decode_container_group(*m->container, g, out).ok());
  }
}

TEST_F(CompressedHostile, EveryLieIsRefusedWithOneLineNamingIt) {
  // The group every group-level lie goes into (coded: it has a table and an index), and two
  // tensors it holds.
  const json good_table = json::parse(good_->metadata.at(std::string(kTableKey)));
  std::string group;
  size_t gi = 0;
  for (size_t g = 0; g < good_table["groups"].size() && group.empty(); ++g) {
    const std::string name = good_table["groups"][g]["name"];
    const FileTensor* t = good_->find("ferry.z." + name);
    ASSERT_NE(t, nullptr);
    if (t->bytes[compress::kHeaderMode] == compress::kModeCoded &&
        name.find("attn") != std::string::npos) {
      group = name;
      gi = g;
    }
  }
  ASSERT_FALSE(group.empty());
  const std::string gt = "ferry.z." + group;
  const uint64_t decoded = good_table["groups"][gi]["decoded_bytes"];
  std::vector<size_t> held;
  for (size_t i = 0; i < good_table["tensors"].size(); ++i) {
    const json& t = good_table["tensors"][i];
    if (t.contains("pieces") && !t["pieces"].empty() && t["pieces"][0][0] == gi) held.push_back(i);
  }
  ASSERT_GE(held.size(), 2u);
  const size_t a = held[0], b = held[1];
  const std::string an = good_table["tensors"][a]["name"];
  const std::string bn = good_table["tensors"][b]["name"];
  const uint64_t index = compress::kHeaderBytes + compress::kTableBytes;

  const std::string first = good_table["groups"][0]["name"];
  // A tensor of the group with slack before the next 256-byte offset (a short norm): moved by 2
  // bytes it stays inside its slot and overlaps nothing, so only the model's layout catches it.
  size_t slack = SIZE_MAX;
  for (size_t i : held) {
    const json& p = good_table["tensors"][i]["pieces"];
    if (p.size() == 1 && p[0][3].get<uint64_t>() % 256 != 0 &&
        p[0][3].get<uint64_t>() % 256 <= 254) {
      slack = i;
    }
  }
  ASSERT_NE(slack, SIZE_MAX);
  const std::string sn = good_table["tensors"][slack]["name"];
  const std::string sn_named = std::string("tensor ").append(sn);
  const std::string group_named = std::string("of group ").append(group);
  auto group_bytes = [gt](Container& c) -> std::vector<uint8_t>& { return c.find(gt)->bytes; };
  const std::vector<Case> cases = {
      {"container_name",
       {},
       [](Container& c) { c.metadata[std::string(kContainerKey)] = "zip"; },
       {"ferry.container", "is not ferry-compressed-checkpoint"}},
      {"container_version",
       {},
       [](Container& c) { c.metadata[std::string(kContainerVersionKey)] = std::string(1, '9'); },
       {"container version"}},
      {"codec_name",
       {},
       [](Container& c) { c.metadata[std::string(kCodecKey)] = "nvcomp-ans"; },
       {"codec", "nvcomp-ans", "is not ferry-bf16-exponent-rans"}},
      {"codec_version",
       {},
       [](Container& c) { c.metadata[std::string(kCodecVersionKey)] = std::string(1, '2'); },
       {"codec version"}},
      {"codec_missing",
       {},
       [](Container& c) { c.metadata.erase(std::string(kCodecKey)); },
       {"codec (missing)"}},
      {"table_missing",
       {},
       [](Container& c) { c.metadata.erase(std::string(kTableKey)); },
       {"ferry.table is missing"}},
      {"table_not_json",
       {},
       [](Container& c) { c.metadata[std::string(kTableKey)] = "{\"groups\": ["; },
       {"ferry.table"}},
      {"table_unknown_key", [](json& t) { t["extra"] = 1; }, {}, {"unknown key"}},
      {"group_twice", [](json& t) { t["groups"].push_back(t["groups"][0]); }, {}, {"listed twice"}},
      {"group_size_lies",
       [gi](json& t) {
         t["groups"][gi]["decoded_bytes"] = t["groups"][gi]["decoded_bytes"].get<uint64_t>() + 256;
       },
       {},
       {"group " + group, gt, "decodes to"}},
      {"group_size_negative",
       [gi](json& t) { t["groups"][gi]["decoded_bytes"] = -5; },
       {},
       {"group " + group, "decoded_bytes"}},
      {"piece_outside_group",
       [a, decoded](json& t) { t["tensors"][a]["pieces"][0][1] = decoded; },
       {},
       {"tensor " + an, "lies outside group " + group}},
      {"piece_length_lies",
       [a](json& t) {
         auto& p = t["tensors"][a]["pieces"][0];
         p[3] = p[3].get<uint64_t>() + 2;
       },
       {},
       {"tensor " + an}},
      {"piece_source_lies",
       [a](json& t) { t["tensors"][a]["pieces"][0][2] = 2; },
       {},
       {"tensor " + an, "do not tile"}},
      {"pieces_overlap",
       [a, b](json& t) { t["tensors"][b]["pieces"][0][1] = t["tensors"][a]["pieces"][0][1]; },
       {},
       {an, bn, "overlap in group " + group}},
      {"piece_group_missing",
       [a](json& t) { t["tensors"][a]["pieces"][0][0] = 999; },
       {},
       {"tensor " + an, "group #999"}},
      {"piece_not_four",
       [a](json& t) {
         t["tensors"][a]["pieces"][0] = json::array({0, 1});
       },
       {},
       {"tensor " + an, "[group, offset, source, bytes]"}},
      {"shape_lies",
       [a](json& t) {
         t["tensors"][a]["shape"][0] = t["tensors"][a]["shape"][0].get<int64_t>() + 1;
       },
       {},
       {"tensor " + an}},
      {"shape_overflows",
       [a](json& t) {
         t["tensors"][a]["shape"] = json::array({uint64_t{1} << 40, uint64_t{1} << 40});
       },
       {},
       {"tensor " + an, "overflows"}},
      {"dtype_unknown",
       [a](json& t) { t["tensors"][a]["dtype"] = "Q4"; },
       {},
       {"tensor " + an, "unknown dtype"}},
      {"tensor_twice",
       [a](json& t) { t["tensors"].push_back(t["tensors"][a]); },
       {},
       {"tensor " + an, "listed twice"}},
      {"stored_not_in_file",
       [a](json& t) {
         t["tensors"][a].erase("pieces");
         t["tensors"][a]["stored"] = true;
       },
       {},
       {"tensor " + an, "stored, yet the file does not hold it"}},
      {"stored_and_pieces",
       [a](json& t) { t["tensors"][a]["stored"] = true; },
       {},
       {"tensor " + an, "exactly one"}},
      {"source_metadata_not_object",
       {},
       [](Container& c) { c.metadata[std::string(kSourceMetadataKey)] = "[1]"; },
       {"ferry.source_metadata"}},
      {"file_tensor_not_in_table",
       {},
       [](Container& c) {
         c.tensors.push_back({"extra.weight", DType::u8, {4}, {1, 2, 3, 4}});
       },
       {"tensor extra.weight", "not in the table"}},
      {"group_tensor_missing",
       {},
       [gt](Container& c) {
         std::erase_if(c.tensors, [&](const FileTensor& t) { return t.name == gt; });
       },
       {"group " + group, gt, "is missing"}},
      {"group_tensor_not_u8",
       {},
       [gt](Container& c) {
         FileTensor* t = c.find(gt);
         t->dtype = DType::i8;
       },
       {"group " + group, gt, "is not U8"}},
      {"group_tensor_short",
       {},
       [gt](Container& c) {
         FileTensor* t = c.find(gt);
         t->bytes.resize(t->bytes.size() - 16);
         t->shape = {static_cast<int64_t>(t->bytes.size())};
       },
       {"group " + group, gt}},
      {"group_tensor_long",
       {},
       [gt](Container& c) {
         FileTensor* t = c.find(gt);
         t->bytes.resize(t->bytes.size() + 32, 0);
         t->shape = {static_cast<int64_t>(t->bytes.size())};
       },
       {"group " + group, gt}},
      {"header_decoded_size_lies",
       {},
       [&](Container& c) {
         auto& g = group_bytes(c);
         put_u64(g, compress::kHeaderDecodedSize, get_u64(g, compress::kHeaderDecodedSize) + 2);
       },
       {"group " + group, gt}},
      {"header_magic", {}, [&](Container& c) { group_bytes(c)[0] = 'X'; }, {"group " + group, gt}},
      {"frequencies_do_not_sum",
       {},
       [&](Container& c) {
         auto& g = group_bytes(c);
         uint16_t f;
         std::memcpy(&f, &g[compress::kHeaderBytes + 2 * 127], 2);
         ++f;
         std::memcpy(&g[compress::kHeaderBytes + 2 * 127], &f, 2);
       },
       {"group " + group, gt, "4096"}},
      {"segment_offset_lies",
       {},
       [&](Container& c) {
         auto& g = group_bytes(c);
         put_u64(g, index + compress::kEntryInOffset,
                 get_u64(g, index + compress::kEntryInOffset) + 1);
       },
       {"group " + group, gt, "segment 0"}},
      {"segment_output_lies",
       {},
       [&](Container& c) {
         auto& g = group_bytes(c);
         put_u64(g, index + compress::kEntryBytes + compress::kEntryOutOffset, 2);
       },
       {"group " + group, gt, "segment 1"}},
      {"checksum_fails",
       {},
       [&](Container& c) { group_bytes(c).back() ^= 0x01; },
       {"group " + group, gt},
       Stage::decode},
      {"payload_damaged",
       {},
       [&](Container& c) {
         auto& g = group_bytes(c);
         g[g.size() / 2] ^= 0x5a;
       },
       {"group " + group, gt},
       Stage::decode},
      {"checksum_field_lies",
       {},
       [&](Container& c) {
         auto& g = group_bytes(c);
         put_u64(g, compress::kHeaderChecksum, get_u64(g, compress::kHeaderChecksum) ^ 1);
       },
       {"group " + group, gt, "checksum"},
       Stage::decode},
      {"group_not_the_models",
       [first](json& t) { t["groups"][0]["name"] = first + "_x"; },
       [first](Container& c) { c.find("ferry.z." + first)->name = "ferry.z." + first + "_x"; },
       {"group #0 is " + first + "_x"},
       Stage::model},
      {"tensor_not_where_the_model_puts_it",
       [slack](json& t) {
         auto& p = t["tensors"][slack]["pieces"][0];
         p[1] = p[1].get<uint64_t>() + 2;
       },
       {},
       {sn_named, group_named, "the model's layout puts it at"},
       Stage::model},
      {"pad_not_u8",
       {},
       [](Container& c) {
         for (FileTensor& t : c.tensors) {
           if (t.name.starts_with(kContainerPadPrefix)) {
             t.dtype = DType::i8;
             return;
           }
         }
       },
       {"ferry.zpad.", "not in the table"}},
  };
  bool has_pad = false;
  for (const FileTensor& t : good_->tensors) has_pad |= t.name.starts_with(kContainerPadPrefix);
  ASSERT_TRUE(has_pad);
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    Container c = *good_;
    if (k.table) {
      json t = good_table;
      k.table(t);
      c.metadata[std::string(kTableKey)] = t.dump();
    }
    if (k.file) k.file(c);
    const fs::path dir = write(c, k.name);
    Status got;
    auto opened = open_container(dir.string());
    if (k.stage == Stage::open) {
      ASSERT_FALSE(opened.ok()) << "accepted";
      got = opened.error();
    } else if (k.stage == Stage::decode) {
      ASSERT_TRUE(opened.ok()) << opened.error().to_string();
      for (size_t g = 0; g < opened->table.groups.size() && got.ok(); ++g) {
        std::vector<uint8_t> out(opened->table.groups[g].decoded_bytes);
        got = decode_container_group(*opened, g, out);
      }
      ASSERT_FALSE(got.ok()) << "decoded";
    } else {
      ASSERT_TRUE(opened.ok()) << opened.error().to_string();
      auto m = open_compressed_model(dir.string());
      ASSERT_FALSE(m.ok()) << "opened as the model";
      got = m.error();
    }
    const std::string& msg = got.error().message;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    EXPECT_EQ(got.error().code, ErrorCode::format) << msg;
    for (const std::string& e : k.expect)
      EXPECT_NE(msg.find(e), std::string::npos) << e << " in: " << msg;
  }
}

}  // namespace
}  // namespace ferry
