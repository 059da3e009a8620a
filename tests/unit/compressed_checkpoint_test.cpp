// The compressed checkpoint (model/compressed_checkpoint.h, host/compressed_model.h): pack
// --compress then --decompress gives back every tensor byte for byte and the same outputs; the
// opened container gives the model's groups; the commands read it; and a table of damaged
// containers is each refused with one line naming the group or tensor.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "cli_process.h"
#include "compress/group_codec.h"
#include "exec/session.h"
#include "host/compressed_model.h"
#include "model/compressed_checkpoint.h"
#include "model/config_json.h"
#include "model/presets.h"
#include "model/synth.h"
#include "scratch_dir.h"
#include "tiny_checkpoint.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::run_ferry_args;

// A checkpoint of `preset_name` in shards, with an extra file and (where the model has one) an
// ignored buffer no group holds.
fs::path make_checkpoint(const fs::path& root, const std::string& preset_name) {
  const fs::path dir = root / preset_name;
  fs::create_directories(dir);
  const ModelConfig config = preset(preset_name).value();
  std::ofstream(dir / "config.json") << write_config(config);
  std::ofstream(dir / "extra.txt") << "kept beside the weights";
  const ModelWeights w = describe_weights(config).value();  // the fills read it while writing
  std::vector<TensorToWrite> tensors = synth_tensors(w, 7, nullptr, SynthDistribution::normal);
  if (!w.ignored.empty()) {
    tensors.push_back({w.ignored.front(), DType::f32, {8}, [](std::span<std::byte> d) {
                         for (size_t i = 0; i < d.size(); ++i) d[i] = std::byte(i * 7 + 1);
                       }});
  }
  const Status s = write_checkpoint(dir.string(), tensors, 3'000'000,
                                    {{"format", "pt"}, {"origin", "compressed_checkpoint_test"}});
  EXPECT_TRUE(s.ok()) << s.error().to_string();
  return dir;
}

std::vector<uint8_t> bytes_of(const Checkpoint& ck, const Checkpoint::Entry& e) {
  const auto d = ck.data(e);
  const auto* p = reinterpret_cast<const uint8_t*>(d.data());
  return {p, p + d.size()};
}

// Group g's decoded layout as the encoder saw it: zeros, each tensor's rows at its offset.
std::vector<uint8_t> layout_of(const Checkpoint& ck, const WeightGroup& g) {
  std::vector<uint8_t> out(g.bytes, 0);
  for (const WeightSpec& s : g.tensors) {
    const auto d = ck.data(*ck.find(s.checkpoint_name));
    std::memcpy(out.data() + s.offset, d.data() + s.source_offset(), s.bytes);
  }
  return out;
}

class CompressedCheckpointTest : public ::testing::TestWithParam<std::string> {
 protected:
  testing::ScratchDir scratch_{"ferry_zc"};
};

TEST_P(CompressedCheckpointTest, RoundTripGivesBackEveryTensorByteForByte) {
  const fs::path in = make_checkpoint(scratch_.path(), GetParam());
  const fs::path z = scratch_.path() / "z";
  const fs::path back = scratch_.path() / "back";
  CompressOptions o;
  o.threads = 2;
  size_t calls = 0;
  o.progress = [&calls](size_t, size_t) { ++calls; };
  auto packed = compress_checkpoint(in.string(), z.string(), o);
  ASSERT_TRUE(packed.ok()) << packed.error().to_string();
  const Checkpoint src = Checkpoint::open(in.string()).value();
  EXPECT_EQ(packed->raw_bytes, src.total_bytes());
  EXPECT_LT(packed->compressed_bytes, packed->raw_bytes * 8 / 10);  // normal init: ~0.67
  EXPECT_GT(calls, packed->groups.size());
  EXPECT_TRUE(fs::exists(z / "config.json"));
  EXPECT_TRUE(fs::exists(z / "extra.txt"));
  const size_t ignored =
      describe_weights(preset(GetParam()).value()).value().ignored.empty() ? 0 : 1;
  EXPECT_EQ(packed->stored_tensors, ignored);

  // The container: U8 group tensors and the stored ones, nothing else.
  const Checkpoint zc = Checkpoint::open(z.string()).value();
  ASSERT_TRUE(is_compressed_checkpoint(zc));
  size_t groups = 0, pads = 0;
  for (const auto& e : zc.entries()) {
    if (e.info->name.starts_with(kGroupTensorPrefix)) {
      ++groups;
      EXPECT_EQ(e.info->dtype, DType::u8);
      EXPECT_EQ(e.info->begin % kContainerGroupAlignment, 0u) << e.info->name;
    }
    pads += e.info->name.starts_with(kContainerPadPrefix);
  }
  EXPECT_EQ(groups, packed->groups.size());
  EXPECT_EQ(zc.entries().size(), groups + pads + ignored);

  auto un = decompress_checkpoint(z.string(), back.string(), o);
  ASSERT_TRUE(un.ok()) << un.error().to_string();
  EXPECT_EQ(un->raw_bytes, src.total_bytes());
  const Checkpoint got = Checkpoint::open(back.string()).value();
  ASSERT_EQ(got.entries().size(), src.entries().size());
  for (const auto& e : src.entries()) {
    const Checkpoint::Entry* g = got.find(e.info->name);
    ASSERT_NE(g, nullptr) << e.info->name;
    EXPECT_EQ(g->info->dtype, e.info->dtype) << e.info->name;
    EXPECT_EQ(g->info->shape, e.info->shape) << e.info->name;
    EXPECT_TRUE(bytes_of(got, *g) == bytes_of(src, e)) << e.info->name;
  }
  EXPECT_EQ(got.files().front().header().metadata, src.files().front().header().metadata);
  EXPECT_TRUE(fs::exists(back / "config.json"));
}

TEST_P(CompressedCheckpointTest, OpenGivesTheModelsGroupsFromTheFile) {
  const fs::path in = make_checkpoint(scratch_.path(), GetParam());
  const fs::path z = scratch_.path() / "z";
  ASSERT_TRUE(compress_checkpoint(in.string(), z.string(), {}).ok());
  auto m = open_compressed_model(z.string());
  ASSERT_TRUE(m.ok()) << m.error().to_string();
  const Checkpoint src = Checkpoint::open(in.string()).value();
  ASSERT_EQ(m->groups.size(), m->weights.groups.size());
  EXPECT_EQ(m->groups.total_decoded(), m->weights.total_bytes());
  EXPECT_LT(m->groups.total_compressed(), m->groups.total_decoded());
  const std::byte* file = m->container->file.file_bytes().data();
  const size_t file_size = m->container->file.file_bytes().size();
  for (size_t g = 0; g < m->groups.size(); ++g) {
    const WeightGroup& group = m->weights.groups[g];
    ASSERT_TRUE(m->groups.has(g)) << group.name;
    // A span into the file's mapping, not a copy.
    const auto* at = reinterpret_cast<const std::byte*>(m->groups.bytes(g).data());
    EXPECT_TRUE(at >= file && at + m->groups.bytes(g).size() <= file + file_size) << group.name;
    std::vector<uint8_t> out(group.bytes);
    ASSERT_TRUE(compress::decode_group(m->groups.bytes(g), out).ok()) << group.name;
    EXPECT_TRUE(out == layout_of(src, group)) << group.name;
  }
}

INSTANTIATE_TEST_SUITE_P(Presets, CompressedCheckpointTest,
                         ::testing::Values("qwen3-tiny", "alpamayo-tiny"), [](const auto& param) {
                           std::string s = param.param;
                           for (char& c : s) c = c == '-' ? '_' : c;
                           return s;
                         });

TEST(CompressedCheckpoint, TheDecompressedCheckpointRunsToTheSameOutput) {
  testing::ScratchDir scratch("ferry_zc_run");
  const fs::path in = make_checkpoint(scratch.path(), "qwen3-tiny");
  const fs::path z = scratch.path() / "z";
  const fs::path back = scratch.path() / "back";
  ASSERT_TRUE(compress_checkpoint(in.string(), z.string(), {}).ok());
  ASSERT_TRUE(decompress_checkpoint(z.string(), back.string(), {}).ok());
  auto run = [](const fs::path& dir) -> Result<InferenceResult> {
    FERRY_ASSIGN_OR_RETURN(ModelConfig c, load_config(dir.string()));
    FERRY_ASSIGN_OR_RETURN(ModelWeights w, describe_weights(c));
    FERRY_ASSIGN_OR_RETURN(Checkpoint ck, Checkpoint::open(dir.string()));
    FERRY_RETURN_IF_ERROR(bind_checkpoint(w, ck));
    auto backend = create_cpu_backend();
    Workload wl;
    wl.prompt_tokens = 24;
    wl.gen_tokens = 3;
    wl.seed = 4;
    SessionOptions o;
    o.inference.keep_all_logits = true;
    FERRY_ASSIGN_OR_RETURN(std::unique_ptr<Session> s, Session::open(*backend, c, w, ck, wl, o));
    return s->run();
  };
  auto want = run(in);
  auto got = run(back);
  ASSERT_TRUE(want.ok()) << want.error().to_string();
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  testing::expect_same(*got, *want, "decompressed");
}

// ---- the commands ----

size_t lines(const std::string& s) {
  return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
}

TEST(CompressedCheckpointCli, PackInspectVerifyRunAndDecompress) {
  testing::ScratchDir scratch("ferry_zc_cli");
  const fs::path in = make_checkpoint(scratch.path(), "qwen3-tiny");
  const std::string z = (scratch.path() / "z").string();
  auto packed = run_ferry_args({"pack", in.string(), z, "--compress", "--json", "--threads", "2"});
  ASSERT_EQ(packed.code, 0) << packed.err;
  const json j = json::parse(packed.out);
  EXPECT_EQ(j["mode"], "compress");
  EXPECT_EQ(j["raw_bytes"].get<uint64_t>(), Checkpoint::open(in.string()).value().total_bytes());
  EXPECT_GT(j["ratio"].get<double>(), 0.5);
  EXPECT_LT(j["ratio"].get<double>(), 0.8);
  EXPECT_EQ(j["threads"], 2);
  EXPECT_GE(j["seconds"].get<double>(), 0.0);

  auto text = run_ferry_args({"inspect", z});
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("module text"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("text.layers.0.attn"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("binding ok"), std::string::npos) << text.out;
  auto ij = run_ferry_args({"inspect", z, "--json"});
  ASSERT_EQ(ij.code, 0) << ij.err;
  const json inspect = json::parse(ij.out);
  EXPECT_TRUE(inspect["compressed"].get<bool>());
  std::vector<std::string> modules;
  for (const json& m : inspect["modules"]) {
    modules.push_back(m["module"].get<std::string>());
    EXPECT_LT(m["ratio"].get<double>(), 1.0) << m.dump();
  }
  EXPECT_NE(std::find(modules.begin(), modules.end(), "text"), modules.end());
  EXPECT_NE(std::find(modules.begin(), modules.end(), "lm_head"), modules.end());
  EXPECT_LT(inspect["model"]["ratio"].get<double>(), 0.8);
  EXPECT_EQ(inspect["page_cache_bytes"].get<uint64_t>(),
            fs::file_size(fs::path(z) / "model.safetensors"));

  auto probe = run_ferry_args({"probe", "--model", z, "--backend", "cpu", "--json"});
  ASSERT_EQ(probe.code, 0) << probe.err;
  const json cache = json::parse(probe.out)["page_cache"];
  EXPECT_TRUE(cache["compressed"].get<bool>());
  EXPECT_EQ(cache["file_bytes"].get<uint64_t>(), fs::file_size(fs::path(z) / "model.safetensors"));
  EXPECT_EQ(cache["raw_bytes"], j["raw_bytes"]);
  EXPECT_LT(cache["ratio"].get<double>(), 0.8);

  auto ok = run_ferry_args({"verify", z});
  EXPECT_EQ(ok.code, 0) << ok.out << ok.err;
  EXPECT_NE(ok.out.find("checksums checked"), std::string::npos) << ok.out;

  const std::string prof = (scratch.path() / "p.json").string();
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"run", "--model", z, "--backend", "cpu"},
           {"bench", "--model", z, "--backend", "cpu"},
           {"plan", "--model", z, "--backend", "cpu"},
           {"profile", "--model", z, "--backend", "cpu", "--out", prof}}) {
    const std::string& cmd = args[0];
    auto refused = run_ferry_args(args);
    EXPECT_EQ(refused.code, 2) << cmd << ": " << refused.out << refused.err;
    EXPECT_FALSE(refused.signaled) << cmd;
    EXPECT_EQ(lines(refused.err), 1u) << cmd << ": " << refused.err;
    EXPECT_NE(refused.err.find("--decompress"), std::string::npos) << cmd << ": " << refused.err;
  }

  // Packing it again as a raw checkpoint, or compressing it twice, says what to do instead.
  for (const char* flag : {"--json", "--compress"}) {
    auto again = run_ferry_args({"pack", z, (scratch.path() / "again").string(), flag});
    EXPECT_EQ(again.code, 2) << flag << ": " << again.err;
    EXPECT_EQ(lines(again.err), 1u) << again.err;
    EXPECT_NE(again.err.find("--decompress"), std::string::npos) << again.err;
  }

  const std::string back = (scratch.path() / "back").string();
  auto un = run_ferry_args({"pack", z, back, "--decompress", "--json"});
  ASSERT_EQ(un.code, 0) << un.err;
  EXPECT_EQ(json::parse(un.out)["mode"], "decompress");
  auto inspect_back = run_ferry_args({"inspect", back});
  EXPECT_EQ(inspect_back.code, 0) << inspect_back.err;

  // One byte of a group's payload damaged: verify names the group and its tensor.
  const fs::path file = fs::path(z) / "model.safetensors";
  const Checkpoint zc = Checkpoint::open(z).value();
  const Checkpoint::Entry* g = zc.find("ferry.z.text.layers.1.down");
  ASSERT_NE(g, nullptr);
  const uint64_t at = g->info->begin + g->info->bytes - 1;
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(at));
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x10);
    f.seekp(static_cast<std::streamoff>(at));
    f.write(&c, 1);
  }
  auto bad = run_ferry_args({"verify", z});
  EXPECT_EQ(bad.code, 1) << bad.out << bad.err;
  EXPECT_EQ(lines(bad.err), 1u) << bad.err;
  EXPECT_NE(bad.err.find("group text.layers.1.down"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("tensor ferry.z.text.layers.1.down"), std::string::npos) << bad.err;

  // A second group with a damaged header (its first index entry's kind): verify still decodes
  // the rest and lists both, naming each group and its tensor.
  const Checkpoint::Entry* h = zc.find("ferry.z.text.layers.0.attn");
  ASSERT_NE(h, nullptr);
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(h->info->begin + 576 + 24));
    const char kind = 0x42;
    f.write(&kind, 1);
  }
  auto two = run_ferry_args({"verify", z, "--json"});
  EXPECT_EQ(two.code, 1) << two.out << two.err;
  EXPECT_EQ(lines(two.err), 1u) << two.err;
  const json v = json::parse(two.out);
  ASSERT_EQ(v["damaged_groups"].size(), 2u) << two.out;
  EXPECT_NE(v["damaged_groups"][0].get<std::string>().find("ferry.z.text.layers.0.attn"),
            std::string::npos);
  EXPECT_NE(v["damaged_groups"][1].get<std::string>().find("ferry.z.text.layers.1.down"),
            std::string::npos);
  EXPECT_FALSE(v["ok"].get<bool>());
}

// --compress and --decompress on a full disk, and stopped by a signal at random points: OUT
// never holds a checkpoint that inspect accepts unless the command completed, and nothing is
// left behind (no staging folder, no spool).
TEST(CompressedCheckpointCli, AnInterruptedPackLeavesNothingInspectAccepts) {
  testing::ScratchDir scratch("ferry_zc_stop");
  const fs::path root = scratch.path();
  const fs::path in = make_checkpoint(root, "qwen3-tiny");
  const fs::path z = root / "z";
  ASSERT_EQ(run_ferry_args({"pack", in.string(), z.string(), "--compress"}).code, 0);
  const fs::path out = root / "out";
  int stopped = 0;
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"pack", in.string(), out.string(), "--compress"},
                                             {"pack", z.string(), out.string(), "--decompress"}}) {
    const std::string& mode = args.back();
    fs::remove_all(out);
    const testing::Ended full =
        run_ferry_args(args, {"LD_PRELOAD=" FERRY_ENOSPC_SHIM, "FERRY_SHIM_DISK_BYTES=4000000"});
    EXPECT_EQ(full.code, 2) << mode << ": " << full.err;
    EXPECT_FALSE(full.signaled) << mode;
    EXPECT_NE(full.err.find("No space left on device"), std::string::npos) << full.err;
    EXPECT_EQ(lines(full.err), 1u) << full.err;
    EXPECT_NE(run_ferry_args({"inspect", out.string()}).code, 0) << mode;
    for (const std::string& l : testing::leftovers(root)) ADD_FAILURE() << mode << ": left " << l;

    std::mt19937 rng(7);
    for (int i = 0; i < 4; ++i) {
      fs::remove_all(out);
      testing::FerryProcess p(args);
      ASSERT_TRUE(p.wait_handlers());
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 400000));
      p.signal(i % 2 == 0 ? SIGINT : SIGTERM);
      const testing::Ended e = p.wait();
      EXPECT_FALSE(e.signaled) << mode << ": " << e.err;
      const testing::Ended inspect = run_ferry_args({"inspect", out.string()});
      if (e.code == 0) {
        EXPECT_EQ(inspect.code, 0) << mode << ": " << inspect.err;
      } else {
        ++stopped;
        EXPECT_NE(inspect.code, 0) << mode << ": a stopped pack left a checkpoint at OUT";
      }
      for (const std::string& l : testing::leftovers(root)) {
        ADD_FAILURE() << mode << " " << i << ": left " << l;
      }
    }
  }
  EXPECT_GT(stopped, 0);  // a run takes about a second: most signals come mid-work
}

}  // namespace
}  // namespace ferry
