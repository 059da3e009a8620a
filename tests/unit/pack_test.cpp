// `ferry pack`: the packed file keeps every tensor's bytes, lays each group out as in memory at a
// page boundary so the host tier issues one copy per group, runs to the same output bytes, and
// is written atomically (a full disk or a signal leaves no checkpoint at OUT).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "cli_process.h"
#include "exec/session.h"
#include "host/host_tier.h"
#include "model/config_json.h"
#include "model/pack.h"
#include "model/presets.h"
#include "scratch_dir.h"
#include "text_test_model.h"
#include "tiny_checkpoint.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;
using testing::Ended;
using testing::FerryProcess;
using testing::leftovers;
using testing::run_ferry_args;

class PackTest : public ::testing::Test {
 protected:
  // A checkpoint of `config` in several shards (so pack gathers from more than one file), with
  // a tokenizer-like extra file.
  fs::path make(const std::string& name, const ModelConfig& config) {
    const fs::path dir = root_ / name;
    fs::create_directories(dir);
    {
      std::ofstream f(dir / "config.json");
      f << write_config(config);
    }
    std::ofstream(dir / "extra.txt") << "kept beside the weights";
    const ModelWeights w = describe_weights(config).value();
    const Status s = write_checkpoint(dir.string(), synth_tensors(w, 7), 3'000'000);
    EXPECT_TRUE(s.ok()) << s.error().to_string();
    return dir;
  }

  testing::ScratchDir scratch_{"ferry_pack"};
  fs::path root_ = scratch_.path();
};

Workload workload_for(const ModelConfig& c) {
  Workload w;
  w.num_images = c.vlm() != nullptr ? 1 : 0;
  w.image_height = 64;
  w.image_width = 64;
  w.prompt_tokens = 48;
  w.gen_tokens = 3;
  w.flow_steps = 2;
  w.seed = 9;
  return w;
}

Result<InferenceResult> run_on(const fs::path& dir, HostPath path,
                               const std::vector<std::string>& mapped = {}) {
  FERRY_ASSIGN_OR_RETURN(ModelConfig c, load_config(dir.string()));
  FERRY_ASSIGN_OR_RETURN(ModelWeights w, describe_weights(c));
  FERRY_ASSIGN_OR_RETURN(Checkpoint ck, Checkpoint::open(dir.string()));
  FERRY_RETURN_IF_ERROR(bind_checkpoint(w, ck));
  auto backend = create_cpu_backend();
  SessionOptions o;
  o.inference.keep_all_logits = true;
  o.host_path = path;
  o.plan.resident = std::vector<std::string>{};  // every group streamed
  o.plan.mapped = mapped;                        // but these read in place
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<Session> s,
                         Session::open(*backend, c, w, ck, workload_for(c), o));
  return s->run();
}

// Every group of the packed checkpoint: page-aligned in the file, one copy (except `split`).
void expect_one_copy_per_group(const fs::path& dir, const std::vector<std::string>& split) {
  const ModelConfig c = load_config(dir.string()).value();
  const ModelWeights w = describe_weights(c).value();
  const Checkpoint ck = Checkpoint::open(dir.string()).value();
  ASSERT_EQ(ck.files().size(), 1u);
  EXPECT_EQ(ck.files()[0].header().data_start % kPackGroupAlignment, 0u);
  auto backend = create_cpu_backend();
  const HostTier tier = HostTier::open(*backend, ck, HostPath::pageable).value();
  const std::byte* file = ck.files()[0].file_bytes().data();
  for (const WeightGroup& g : w.groups) {
    const std::vector<HostCopy> copies = tier.copies(g).value();
    if (std::find(split.begin(), split.end(), g.name) != split.end()) {
      EXPECT_GT(copies.size(), 1u) << g.name;
      continue;
    }
    ASSERT_EQ(copies.size(), 1u) << g.name;
    EXPECT_EQ(copies[0].dst_offset, 0u) << g.name;
    EXPECT_EQ(copies[0].bytes + kGroupAlignment > g.bytes, true) << g.name;
    const auto at = static_cast<uint64_t>(copies[0].src - file);
    // A group opens a page unless it is a later chunk of one tensor whose chunks are not
    // multiples of a page.
    if (g.kind != GroupKind::lm_head || g.layer == 0) {
      EXPECT_EQ(at % kPackGroupAlignment, 0u) << g.name;
    }
  }
}

using testing::expect_same;

TEST_F(PackTest, LayoutIsContiguousPagedAndInExecutionOrder) {
  const ModelConfig c = preset("qwen3-tiny").value();
  const ModelWeights w = describe_weights(c).value();
  std::vector<TensorMeta> metas;
  std::vector<uint64_t> bytes;
  for (const TensorToWrite& t : synth_tensors(w, 1)) {
    metas.push_back({t.name, t.dtype, t.shape});
    uint64_t n = dtype_size(t.dtype);
    for (int64_t d : t.shape) n *= static_cast<uint64_t>(d);
    bytes.push_back(n);
  }
  std::reverse(metas.begin(), metas.end());  // checkpoint order is not execution order
  std::reverse(bytes.begin(), bytes.end());
  const PackLayout l = pack_layout(w, metas, bytes).value();
  EXPECT_TRUE(l.split_groups.empty());
  uint64_t at = 0;
  std::map<std::string, uint64_t> where;
  for (const PackEntry& e : l.entries) {
    EXPECT_EQ(e.begin, at) << e.name;  // no holes, no overlaps
    at += e.bytes;
    if (e.padding) {
      EXPECT_TRUE(is_pack_padding(e.name, DType::u8, 1)) << e.name;
      EXPECT_GT(e.bytes, 0u);
    }
    EXPECT_TRUE(where.emplace(e.name, e.begin).second) << e.name << " twice";
  }
  EXPECT_EQ(at, l.data_bytes);
  // Groups follow the model's order; each starts a page, its tensors at their layout offsets.
  uint64_t last = 0;
  for (const WeightGroup& g : w.groups) {
    const uint64_t base =
        where.at(g.tensors[0].checkpoint_name) + g.tensors[0].source_offset() - g.tensors[0].offset;
    EXPECT_GE(base, last) << g.name;
    last = base;
    if (g.kind != GroupKind::lm_head || g.layer == 0) {
      EXPECT_EQ(base % kPackGroupAlignment, 0u) << g.name;
    }
    for (const WeightSpec& s : g.tensors) {
      EXPECT_EQ(where.at(s.checkpoint_name) + s.source_offset(), base + s.offset)
          << g.name << " " << s.local_name;
    }
  }
  // A table naming a tensor the checkpoint lacks is an error, not a crash.
  metas.pop_back();
  bytes.pop_back();
  EXPECT_FALSE(pack_layout(w, metas, bytes).ok());
}

TEST_F(PackTest, PackedCheckpointRunsToTheSameBytes) {
  for (const char* name : {"qwen3-tiny", "alpamayo-tiny"}) {
    const fs::path in = make(std::string("in_") + name, preset(name).value());
    const fs::path out = root_ / (std::string("out_") + name);
    auto r = pack_checkpoint(in.string(), out.string(), {});
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    EXPECT_TRUE(fs::exists(out / "config.json"));
    EXPECT_TRUE(fs::exists(out / "extra.txt"));
    EXPECT_FALSE(fs::exists(out / "model.safetensors.index.json"));
    EXPECT_TRUE(r->layout.split_groups.empty()) << name;
    expect_one_copy_per_group(out, {});
    auto want = run_on(in, HostPath::automatic);
    ASSERT_TRUE(want.ok()) << want.error().to_string();
    for (HostPath p : {HostPath::automatic, HostPath::bounce}) {
      auto got = run_on(out, p);
      ASSERT_TRUE(got.ok()) << got.error().to_string();
      expect_same(*got, *want, std::string(name) + ", " + host_path_name(p));
    }
    // Every tensor's bytes, and nothing else but padding.
    const Checkpoint a = Checkpoint::open(in.string()).value();
    const Checkpoint b = Checkpoint::open(out.string()).value();
    size_t pads = 0;
    for (const Checkpoint::Entry& e : b.entries()) {
      if (is_pack_padding(e.info->name, e.info->dtype, e.info->shape.size())) {
        ++pads;
        const auto d = b.data(e);
        EXPECT_TRUE(std::all_of(d.begin(), d.end(), [](std::byte x) { return x == std::byte{0}; }));
        continue;
      }
      const Checkpoint::Entry* o = a.find(e.info->name);
      ASSERT_NE(o, nullptr) << e.info->name;
      EXPECT_EQ(o->info->dtype, e.info->dtype);
      EXPECT_EQ(o->info->shape, e.info->shape);
      const auto x = a.data(*o), y = b.data(e);
      ASSERT_EQ(x.size(), y.size());
      EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size()), 0) << e.info->name;
    }
    EXPECT_EQ(b.entries().size(), a.entries().size() + pads);
  }
}

// The map path: groups of a packed checkpoint read in place by their kernels give the same bytes
// (here every layer of each kind, then every group); an unpacked checkpoint is refused, naming
// the group and `ferry pack`.
TEST_F(PackTest, MappedGroupsOfAPackedCheckpointRunToTheSameBytes) {
  for (const char* name : {"qwen3-tiny", "alpamayo-tiny"}) {
    const ModelConfig c = preset(name).value();
    const ModelWeights w = describe_weights(c).value();
    const fs::path in = make(std::string("min_") + name, c);
    const fs::path out = root_ / (std::string("mout_") + name);
    ASSERT_TRUE(pack_checkpoint(in.string(), out.string(), {}).ok());
    auto want = run_on(in, HostPath::automatic);
    ASSERT_TRUE(want.ok()) << want.error().to_string();
    std::vector<std::string> layers, all;
    for (const WeightGroup& g : w.groups) {
      all.push_back(g.name);
      if (g.kind == GroupKind::decoder_layer || g.kind == GroupKind::expert_layer ||
          g.kind == GroupKind::vision_block) {
        layers.push_back(g.name);
      }
    }
    for (const auto& mapped : {layers, all}) {
      auto got = run_on(out, HostPath::automatic, mapped);
      ASSERT_TRUE(got.ok()) << got.error().to_string();
      expect_same(*got, *want,
                  std::string(name) + ", " + std::to_string(mapped.size()) + " groups mapped");
    }
    auto refused = run_on(in, HostPath::automatic, {layers[0]});
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.error().message.find(layers[0]), std::string::npos)
        << refused.error().message;
    EXPECT_NE(refused.error().message.find("ferry pack"), std::string::npos)
        << refused.error().message;
  }
}

// Tied embeddings: the head reads the embedding's tensor where the embedding put it, so the
// head's first chunk (its norm here, its rows there) is the one group of more than one copy.
TEST_F(PackTest, TiedEmbeddingsAreWrittenOnce) {
  ModelConfig c = preset("qwen3-tiny").value();
  std::get<TextConfig>(c.body).tie_word_embeddings = true;
  const fs::path in = make("tied", c);
  const fs::path out = root_ / "tied_out";
  auto r = pack_checkpoint(in.string(), out.string(), {});
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->layout.split_groups, std::vector<std::string>{"text.head.0"});
  expect_one_copy_per_group(out, {"text.head.0"});
  auto want = run_on(in, HostPath::automatic);
  auto got = run_on(out, HostPath::automatic);
  ASSERT_TRUE(want.ok() && got.ok());
  expect_same(*got, *want, "tied");
}

TEST_F(PackTest, RefusesWhatItShouldNot) {
  const fs::path in = make("in", preset("qwen3-tiny").value());
  EXPECT_FALSE(pack_checkpoint(in.string(), in.string(), {}).ok());  // OUT == IN
  const fs::path out = root_ / "out";
  ASSERT_TRUE(pack_checkpoint(in.string(), out.string(), {}).ok());
  auto again = pack_checkpoint(in.string(), out.string(), {});
  ASSERT_FALSE(again.ok());  // a checkpoint there already, no --force
  PackOptions force;
  force.force = true;
  auto forced = pack_checkpoint(in.string(), out.string(), force);
  EXPECT_TRUE(forced.ok()) << forced.error().to_string();
  EXPECT_FALSE(pack_checkpoint((root_ / "missing").string(), (root_ / "o2").string(), {}).ok());
}

// The CLI on a full disk, and stopped by a signal at random points: OUT never holds a
// checkpoint that inspect accepts unless the pack completed, and nothing is left behind.
TEST_F(PackTest, InterruptedPackLeavesNothingInspectAccepts) {
  const fs::path in = make("in", preset("qwen3-tiny").value());
  const fs::path out = root_ / "out";
  const Ended full =
      run_ferry_args({"pack", in.string(), out.string()},
                     {"LD_PRELOAD=" FERRY_ENOSPC_SHIM, "FERRY_SHIM_DISK_BYTES=4000000"});
  EXPECT_EQ(full.code, 2) << full.err;
  EXPECT_FALSE(full.signaled);
  EXPECT_NE(full.err.find("No space left on device"), std::string::npos) << full.err;
  EXPECT_NE(run_ferry_args({"inspect", out.string()}).code, 0);
  EXPECT_TRUE(leftovers(root_).empty());

  std::mt19937 rng(5);
  int completed = 0;
  for (int i = 0; i < 8; ++i) {
    fs::remove_all(out);
    FerryProcess p({"pack", in.string(), out.string()});
    ASSERT_TRUE(p.wait_handlers());
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 60000));
    p.signal(i % 2 == 0 ? SIGINT : SIGTERM);
    const Ended e = p.wait();
    EXPECT_FALSE(e.signaled) << e.err;
    const Ended inspect = run_ferry_args({"inspect", out.string()});
    if (e.code == 0) {
      ++completed;
      EXPECT_EQ(inspect.code, 0) << inspect.err;
    } else {
      EXPECT_NE(inspect.code, 0) << "a stopped pack left a checkpoint at OUT";
    }
    for (const std::string& l : leftovers(root_)) ADD_FAILURE() << i << ": left " << l;
  }
  // The same command, left alone, completes.
  fs::remove_all(out);
  const Ended done = run_ferry_args({"pack", in.string(), out.string(), "--json"});
  EXPECT_EQ(done.code, 0) << done.err;
  EXPECT_NE(done.out.find("\"groups_one_copy\""), std::string::npos) << done.out;
  EXPECT_EQ(run_ferry_args({"inspect", out.string()}).code, 0);
  (void)completed;
}

}  // namespace
}  // namespace ferry
