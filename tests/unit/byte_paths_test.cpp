// Byte-path selection (plan/byte_paths.h) with made-up rates: the storage-bound stop, the
// capacity gate, the fastest path, the 5% band that prefers map; the rates file round trip and
// its checks; and the probe itself on the CPU backend (measure/byte_probe.h, `ferry probe`).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "cli_process.h"
#include "measure/byte_probe.h"
#include "model/presets.h"
#include "plan/byte_paths.h"
#include "scratch_dir.h"
#include "text_test_model.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;

BytePathRates rates(std::optional<double> map, std::optional<double> resident,
                    std::optional<double> stream, std::optional<double> copy) {
  BytePathRates r;
  r.device = "test";
  r.host_path = "registered";
  r.working_set_bytes = 1000;
  r.of(BytePath::map).bytes_per_s = map;
  r.of(BytePath::resident).bytes_per_s = resident;
  r.of(BytePath::stream).bytes_per_s = stream;
  r.of(BytePath::per_use_copy).bytes_per_s = copy;
  r.of(BytePath::map).note = map ? "read in place" : "not registered";
  return r;
}

GroupPathInput group(uint64_t bytes, int64_t uses) {
  GroupPathInput g{"group", bytes, uses, 1.0, true, {}};
  return g;
}

TEST(BytePaths, TheFastestWinsUnlessMapIsWithinTheBand) {
  // A discrete GPU (the H200's numbers): resident far ahead, then stream, then map.
  auto v = choose_byte_path(rates(51.3e9, 1.7e12, 55.4e9, 7.1e9), group(100'000'000, 10));
  ASSERT_TRUE(v.path);
  EXPECT_EQ(*v.path, BytePath::resident);
  EXPECT_NEAR(*v.seconds[size_t(BytePath::map)], 1e9 / 51.3e9, 1e-12);
  // Resident does not fit: stream, map 8% slower is outside the band.
  GroupPathInput big = group(100'000'000, 10);
  big.resident_fits = false;
  big.fit_reason = "no room";
  v = choose_byte_path(rates(51.3e9, 1.7e12, 55.4e9, 7.1e9), big);
  ASSERT_TRUE(v.path);
  EXPECT_EQ(*v.path, BytePath::stream);
  EXPECT_NE(v.reason.find("resident excluded: no room"), std::string::npos) << v.reason;
  EXPECT_FALSE(v.seconds[size_t(BytePath::resident)]);
  // A coherent link: map 1.4% behind stream is inside the band, and wins.
  v = choose_byte_path(rates(350e9, std::nullopt, 355e9, 20e9), big);
  ASSERT_TRUE(v.path);
  EXPECT_EQ(*v.path, BytePath::map);
  EXPECT_NE(v.reason.find("tie band"), std::string::npos) << v.reason;
  // ... but not with a band of 1%.
  v = choose_byte_path(rates(350e9, std::nullopt, 355e9, 20e9), big, 0.01);
  EXPECT_EQ(*v.path, BytePath::stream);
  // Unified memory: map ahead of a resident copy.
  v = choose_byte_path(rates(34.6e9, 30.4e9, std::nullopt, 6.9e9), group(10, 1));
  EXPECT_EQ(*v.path, BytePath::map);
  // Nothing measured.
  v = choose_byte_path(rates(std::nullopt, std::nullopt, std::nullopt, std::nullopt), group(1, 1));
  EXPECT_FALSE(v.path);
}

TEST(BytePaths, StorageBoundStop) {
  GroupPathInput g = group(1 << 20, 3);
  g.cached_fraction = 0.4;
  const auto v = choose_byte_path(rates(51e9, 1.7e12, 55e9, 7e9), g);
  EXPECT_FALSE(v.path);
  EXPECT_TRUE(v.storage_bound);
  EXPECT_NE(v.reason.find("40.0%"), std::string::npos) << v.reason;
  // A few evicted pages do not make a group storage-bound.
  g.cached_fraction = 0.97;
  EXPECT_TRUE(choose_byte_path(rates(51e9, 1.7e12, 55e9, 7e9), g).path);
}

TEST(BytePaths, CapacityGateAdmitsTheMostUsedFirst) {
  std::vector<GroupPathInput> gs = {group(60, 1), group(50, 20), group(40, 20), group(10, 5)};
  gate_resident(gs, 100);
  // 40 (20 uses, smaller) + 50 (20 uses) = 90; 10 (5 uses) fits; 60 (1 use) does not.
  EXPECT_TRUE(gs[1].resident_fits);
  EXPECT_TRUE(gs[2].resident_fits);
  EXPECT_TRUE(gs[3].resident_fits);
  EXPECT_FALSE(gs[0].resident_fits);
  EXPECT_NE(gs[0].fit_reason.find("0 of 100"), std::string::npos) << gs[0].fit_reason;
  gate_resident(gs, 0);
  for (const auto& g : gs) EXPECT_FALSE(g.resident_fits);
}

TEST(BytePaths, RatesFileRoundTripAndChecks) {
  const BytePathRates r = rates(51.3e9, std::nullopt, 55.4e9, 7.1e9);
  const std::string text = byte_path_rates_to_json(r);
  auto back = byte_path_rates_from_json(text);
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(back->device, "test");
  EXPECT_EQ(back->working_set_bytes, 1000u);
  EXPECT_EQ(back->of(BytePath::map).bytes_per_s, r.of(BytePath::map).bytes_per_s);
  EXPECT_FALSE(back->of(BytePath::resident).bytes_per_s);
  EXPECT_EQ(back->of(BytePath::map).note, "read in place");
  auto j = nlohmann::json::parse(text);
  for (auto mutate : std::vector<std::function<void(nlohmann::json&)>>{
           [](nlohmann::json& x) { x["format"] = "ferry-plan"; },
           [](nlohmann::json& x) { x["version"] = 2; },
           [](nlohmann::json& x) { x["rates"]["map"]["bytes_per_s"] = -1; },
           [](nlohmann::json& x) { x["rates"]["map"]["bytes_per_s"] = "fast"; },
           [](nlohmann::json& x) { x["rates"].erase("stream"); },
           [](nlohmann::json& x) { x["rates"]["teleport"] = x["rates"]["map"]; },
           [](nlohmann::json& x) { x["rates"]["map"]["extra"] = 1; },
           [](nlohmann::json& x) { x["working_set_bytes"] = -5; },
       }) {
    nlohmann::json bad = j;
    mutate(bad);
    EXPECT_FALSE(byte_path_rates_from_json(bad.dump()).ok()) << bad.dump();
  }
  EXPECT_FALSE(byte_path_rates_from_json("{").ok());
}

// The probe read folds every byte at bit 8·(offset mod 8), whatever the range's alignment and
// length: a kernel that skipped bytes would read faster than the path and fail here.
TEST(BytePaths, ReadReduceFoldsEveryByte) {
  std::vector<unsigned char> data(3 << 20);
  std::mt19937_64 rng(8);
  for (auto& b : data) b = static_cast<unsigned char>(rng());
  auto backend = create_cpu_backend();
  auto stream = backend->create_stream();
  for (size_t off : {size_t{0}, size_t{1}, size_t{7}, size_t{13}}) {
    for (size_t len : {size_t{0}, size_t{1}, size_t{9}, size_t{4096 + 5}, (size_t{2} << 20) + 3}) {
      uint64_t want = 0;
      for (size_t r = 0; r < len; ++r) want ^= uint64_t{data[off + r]} << (8 * (r % 8));
      uint64_t sum = 0x1234;  // xor'ed into, not overwritten
      ASSERT_TRUE(backend->read_reduce(*stream, data.data() + off, len, &sum).ok());
      ASSERT_TRUE(backend->synchronize(*stream).ok());
      EXPECT_EQ(sum, want ^ 0x1234) << off << " " << len;
    }
  }
}

class ProbeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = preset("qwen3-tiny").value();
    ASSERT_TRUE(testing::write_test_checkpoint(dir_, config_, 4).ok());
  }
  testing::ScratchDir scratch_{"ferry_probe", /*create=*/false};
  std::string dir_ = scratch_.str();
  ModelConfig config_;
};

// On the CPU every path is memory read by threads: all four are measured over the whole working
// set, the file is in the page cache (it was just written), and each group gets a verdict.
TEST_F(ProbeTest, MeasuresEveryPathOnTheCpu) {
  const ModelWeights w = describe_weights(config_).value();
  const Checkpoint ck = Checkpoint::open(dir_).value();
  auto backend = create_cpu_backend();
  ByteProbeOptions o;
  o.passes = 1;
  auto r = probe_byte_paths(*backend, w, ck, dir_, o);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->rates.working_set_bytes, w.total_bytes());
  for (BytePath p : kBytePaths) {
    EXPECT_TRUE(r->rates.of(p).bytes_per_s) << byte_path_name(p) << ": " << r->rates.of(p).note;
    EXPECT_EQ(r->rates.of(p).bytes, w.total_bytes()) << byte_path_name(p);
  }
  EXPECT_TRUE(r->stream_bounce.bytes_per_s) << r->stream_bounce.note;
  // The storage probe read stretches of the working set, none twice: at most a (passes + 1)-th
  // of it per timed pass, and something.
  EXPECT_TRUE(r->storage.bytes_per_s) << r->storage.note;
  EXPECT_GT(r->storage.bytes, 0u);
  EXPECT_LE(r->storage.bytes, w.total_bytes() / 2 + w.groups.front().bytes) << r->storage.note;
  ASSERT_EQ(r->cached_fraction.size(), w.groups.size());
  for (double f : r->cached_fraction) EXPECT_GT(f, 0.0);
  EXPECT_EQ(r->rates.host_path, "registered");
  // A host tier that cannot be read in place (pageable asked for on a backend that reads host
  // memory still can; bounce too): map is measured there as well, on the CPU.
  o.host_path = HostPath::bounce;
  auto b = probe_byte_paths(*backend, w, ck, dir_, o);
  ASSERT_TRUE(b.ok()) << b.error().to_string();
  EXPECT_EQ(b->rates.host_path, "bounce");
}

TEST_F(ProbeTest, CliPrintsFactsRatesAndVerdicts) {
  const std::string saved = dir_ + "/rates.json";
  const testing::Ended e = testing::run_ferry_args(
      {"probe", "--backend", "cpu", "--json", "--passes", "1", "--model", dir_, "--save", saved});
  ASSERT_EQ(e.code, 0) << e.err;
  const auto j = nlohmann::json::parse(e.out);
  EXPECT_EQ(j["backend"], "cpu");
  EXPECT_TRUE(j["facts"]["integrated"].is_null());  // not applicable on the CPU, and said so
  EXPECT_FALSE(j["facts"]["notes"].empty());
  EXPECT_TRUE(j["h2d_pinned"]["gb_per_s"].is_number());
  const auto& m = j["model"];
  for (const char* p : {"map", "resident", "stream", "per_use_copy"}) {
    EXPECT_TRUE(m["rates"][p]["gb_per_s"].is_number()) << p;
  }
  EXPECT_TRUE(m["storage"]["gb_per_s"].is_number()) << m["storage"].dump();
  const ModelWeights w = describe_weights(config_).value();
  ASSERT_EQ(m["verdicts"].size(), w.groups.size());
  for (const auto& v : m["verdicts"]) {
    EXPECT_FALSE(v["reason"].get<std::string>().empty());
    EXPECT_NE(v["path"], "none") << v.dump();
  }
  // The saved rates are what the planner reads.
  std::ifstream in(saved);
  std::stringstream text;
  text << in.rdbuf();
  auto back = byte_path_rates_from_json(text.str());
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(back->working_set_bytes, w.total_bytes());
  // --storage-bytes 0 skips the storage probe and says so.
  const testing::Ended skip =
      testing::run_ferry_args({"probe", "--backend", "cpu", "--json", "--passes", "1", "--model",
                               dir_, "--storage-bytes", "0"});
  ASSERT_EQ(skip.code, 0) << skip.err;
  const auto s = nlohmann::json::parse(skip.out)["model"]["storage"];
  EXPECT_TRUE(s["gb_per_s"].is_null()) << s.dump();
  EXPECT_NE(s["note"].get<std::string>().find("not asked for"), std::string::npos) << s.dump();
  // Without a model: facts only; --save without --model is refused.
  const testing::Ended facts = testing::run_ferry_args({"probe", "--backend", "cpu"});
  EXPECT_EQ(facts.code, 0) << facts.err;
  EXPECT_NE(facts.out.find("device"), std::string::npos);
  EXPECT_NE(testing::run_ferry_args({"probe", "--backend", "cpu", "--save", saved}).code, 0);
}

}  // namespace
}  // namespace ferry
