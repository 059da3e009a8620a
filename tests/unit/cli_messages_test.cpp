// Messages that state the real cause, and flags parsed as other tools parse them: the built
// binary on a symlink loop, a weights file given for a folder, a shard given alone, a config
// whose dtype disagrees with the tensors, octal-looking, empty, negative and out-of-range
// numbers, and workload flags the model has no use for.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "cli/flags.h"
#include "cli_process.h"
#include "model/config_json.h"
#include "model/presets.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;
using testing::count_lines;
using testing::Ended;
using testing::run_ferry_args;

class CliMessages : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("ferry_messages_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    ASSERT_EQ(run_ferry_args({"synth", "--preset", "qwen3-tiny", "--out", q().string()}).code, 0);
    ASSERT_EQ(run_ferry_args({"synth", "--preset", "qwen3-tiny", "--out", sharded().string(),
                              "--max-shard", "8MB"})
                  .code,
              0);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static fs::path q() { return dir_ / "q"; }
  static fs::path sharded() { return dir_ / "sharded"; }

  // One line on stderr starting "ferry CMD: ", exit 2, and `needle` in it.
  static void expect_error(const Ended& e, const std::string& cmd, const std::string& needle) {
    EXPECT_FALSE(e.signaled);
    EXPECT_EQ(e.code, 2) << e.err;
    EXPECT_EQ(count_lines(e.err), 1u) << e.err;
    EXPECT_EQ(e.err.rfind("ferry " + cmd + ": ", 0), 0u) << e.err;
    EXPECT_NE(e.err.find(needle), std::string::npos) << e.err;
  }
  // A flag refused before the command runs (a usage error, exit 2), naming the flag.
  static void expect_flag_error(const Ended& e, const std::string& needle) {
    EXPECT_FALSE(e.signaled);
    EXPECT_EQ(e.code, 2);
    EXPECT_NE(e.err.find(needle), std::string::npos) << e.err;
  }

  static fs::path dir_;
};

fs::path CliMessages::dir_;

TEST_F(CliMessages, SymlinkLoopAndMissingFolderSayWhich) {
  const fs::path loop = dir_ / "loop";
  fs::create_symlink(loop, loop);
  expect_error(run_ferry_args({"run", "--model", loop.string(), "--backend", "cpu"}), "run",
               "Too many levels of symbolic links");
  expect_error(run_ferry_args({"inspect", loop.string()}), "inspect",
               "Too many levels of symbolic links");
  expect_error(run_ferry_args({"synth", "--preset", "qwen3-tiny", "--out", loop.string()}), "synth",
               "Too many levels of symbolic links");
  expect_error(run_ferry_args({"run", "--model", (dir_ / "none").string(), "--backend", "cpu"}),
               "run", "No such file or directory");
}

TEST_F(CliMessages, PermissionDeniedIsSaid) {
  // As root, the binary runs as nobody (setpriv); as anyone else, as itself.
  std::string prefix;
  if (::geteuid() == 0) {
    if (std::system("setpriv --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "root, no setpriv";
    prefix = "setpriv --reuid=65534 --regid=65534 --clear-groups ";
  }
  auto ferry_as_user = [&](const std::string& args) {
    const fs::path err = dir_ / "denied.err";
    const int status =
        std::system((prefix + FERRY_BINARY + " " + args + " >/dev/null 2>" + err.string()).c_str());
    Ended e;
    e.signaled = WIFSIGNALED(status);
    e.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    e.err = testing::FerryProcess::slurp(err.string());
    return e;
  };
  const fs::path locked = dir_ / "locked";
  fs::copy(q(), locked);
  fs::permissions(locked / "model.safetensors", fs::perms::none);
  expect_error(ferry_as_user("run --backend cpu --model " + locked.string()), "run",
               "model.safetensors: cannot open: Permission denied");
  fs::permissions(locked / "model.safetensors", fs::perms::owner_all);
  fs::permissions(locked, fs::perms::owner_all);  // nobody may not create anything in it
  expect_error(ferry_as_user("synth --preset qwen3-tiny --force --out " + locked.string()), "synth",
               "Permission denied");
  fs::permissions(locked, fs::perms::all);
}

TEST_F(CliMessages, AWeightsFileWorksWhereAFolderIsExpected) {
  const Ended file = run_ferry_args({"run", "--model", (q() / "model.safetensors").string(),
                                     "--backend", "cpu", "--quiet", "--tokens", "1"});
  EXPECT_EQ(file.code, 0) << file.err;
  const Ended config = run_ferry_args({"run", "--model", (q() / "config.json").string(),
                                       "--backend", "cpu", "--quiet", "--tokens", "1"});
  EXPECT_EQ(config.code, 0) << config.err;
  expect_error(
      run_ferry_args({"run", "--model", (sharded() / "model-00001-of-00003.safetensors").string(),
                      "--backend", "cpu"}),
      "run", "is one shard of a sharded checkpoint; give the folder");
}

TEST_F(CliMessages, ADtypeDisagreementNamesBoth) {
  const fs::path f16 = dir_ / "f16";
  fs::copy(q(), f16);
  std::string config = testing::FerryProcess::slurp((f16 / "config.json").string());
  config = std::regex_replace(config, std::regex(R"("(torch_)?dtype": *"bfloat16")"),
                              R"("torch_dtype": "float16")");
  std::ofstream(f16 / "config.json") << config;
  const Ended e = run_ferry_args({"run", "--model", f16.string(), "--backend", "cpu"});
  expect_error(e, "run",
               "is BF16 in the checkpoint, but config.json's dtype ('float16') makes it F16");
}

// Issue 27 item 6: a valid safetensors file without config.json is inspected (exit 0, nothing
// on stderr) and the report says no architecture was recognised; it once printed, then exited 1.
TEST_F(CliMessages, InspectOfAValidFileWithNoConfigSucceeds) {
  const fs::path bare = dir_ / "bare";
  fs::create_directories(bare);
  fs::copy(q() / "model.safetensors", bare / "model.safetensors");
  for (const fs::path& path : {bare, bare / "model.safetensors"}) {
    const Ended e = run_ferry_args({"inspect", path.string()});
    EXPECT_FALSE(e.signaled);
    EXPECT_EQ(e.code, 0) << e.err;
    EXPECT_EQ(e.err, "");
    EXPECT_NE(e.out.find("architecture: none recognised (no config.json); grouped by name prefix"),
              std::string::npos)
        << e.out;
    EXPECT_NE(e.out.find("model.layers.0-3"), std::string::npos) << e.out;
  }
  const Ended j = run_ferry_args({"inspect", "--json", bare.string()});
  EXPECT_EQ(j.code, 0) << j.err;
  EXPECT_EQ(j.err, "");
  EXPECT_NE(j.out.find("\"architecture\": null"), std::string::npos) << j.out;
  EXPECT_NE(j.out.find("\"note\": \"no config.json\""), std::string::npos) << j.out;
}

// A recognised architecture whose table the tensors do not bind is still a failure: printed,
// then one line naming the architecture and what binding found, exit 1.
TEST_F(CliMessages, InspectFailsWhenTheTensorsDoNotBindTheirArchitecture) {
  const fs::path more = dir_ / "more_layers";
  fs::copy(q(), more);
  std::string config = testing::FerryProcess::slurp((more / "config.json").string());
  config = std::regex_replace(config, std::regex(R"("num_hidden_layers": *4)"),
                              R"("num_hidden_layers": 5)");
  std::ofstream(more / "config.json") << config;
  const Ended e = run_ferry_args({"inspect", more.string()});
  EXPECT_FALSE(e.signaled);
  EXPECT_EQ(e.code, 1) << e.err;
  EXPECT_NE(e.out.find("architecture: qwen3"), std::string::npos) << e.out;  // still printed
  EXPECT_EQ(count_lines(e.err), 1u) << e.err;
  EXPECT_EQ(e.err.rfind("ferry inspect: " + more.string() + " does not bind to qwen3: ", 0), 0u)
      << e.err;
}

TEST_F(CliMessages, NumbersParseAsEveryToolParsesThem) {
  // Decimal: "010" is ten, not eight.
  const Ended octal =
      run_ferry_args({"run", "--model", q().string(), "--tokens", "010", "--dry-run"});
  EXPECT_EQ(octal.code, 0) << octal.err;
  EXPECT_NE(octal.out.find("generate 10,"), std::string::npos) << octal.out;
  for (const auto& [flag, value] :
       std::vector<std::pair<std::string, std::string>>{{"--seed", "-1"},
                                                        {"--seed", ""},
                                                        {"--seed", "0x10"},
                                                        {"--seed", "18446744073709551616"},
                                                        {"--tokens", "0"},
                                                        {"--tokens", " 5"},
                                                        {"--tokens", "5k"},
                                                        {"--prompt-tokens", "-3"},
                                                        {"--temperature", "nan"},
                                                        {"--temperature", "-1"},
                                                        {"--top-p", "1.5"},
                                                        {"--dump-logits", ""},
                                                        {"--model", ""}}) {
    SCOPED_TRACE(flag + " '" + value + "'");
    expect_flag_error(run_ferry_args({"run", "--model", q().string(), flag, value, "--dry-run"}),
                      flag);
  }
  expect_flag_error(run_ferry_args({"bench", "--model", q().string(), "--runs", "0"}), "--runs");
  expect_flag_error(run_ferry_args({"synth", "--preset", "qwen3-tiny", "--out",
                                    (dir_ / "neg").string(), "--seed", "-1"}),
                    "--seed");
  EXPECT_FALSE(fs::exists(dir_ / "neg"));
}

TEST_F(CliMessages, FlagsTheModelIgnoresAreErrors) {
  expect_error(run_ferry_args({"run", "--model", q().string(), "--steps", "3", "--dry-run"}), "run",
               "--steps: qwen3 has no action expert");
  expect_error(run_ferry_args({"run", "--model", q().string(), "--images", "1", "--dry-run"}),
               "run", "--images: qwen3 is a text-only model");
  expect_error(run_ferry_args({"bench", "--model", q().string(), "--image-size", "64x64"}), "bench",
               "--image-size: qwen3 is a text-only model");
}

TEST_F(CliMessages, APromptShorterThanItsFixedPartsIsRefused) {
  const fs::path vl = dir_ / "vl";
  ASSERT_EQ(
      run_ferry_args({"synth", "--preset", "qwen3-vl-tiny", "--out", vl.string(), "--config-only"})
          .code,
      0);
  const Ended e =
      run_ferry_args({"run", "--model", vl.string(), "--prompt-tokens", "5", "--dry-run"});
  expect_error(e, "run", "--prompt-tokens 5: the images and the prompt's fixed parts take");
  const Ended ok = run_ferry_args({"run", "--model", vl.string(), "--dry-run"});
  EXPECT_EQ(ok.code, 0) << ok.err;
}

TEST(ConfigMessages, ADerivedValueIsShownWithWhatItCameFrom) {
  // No head_dim: it is hidden_size / num_attention_heads = 25, odd. The message names the values
  // the config gave, not a head_dim it never had.
  const auto c = parse_config(R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
      "hidden_size": 100, "num_hidden_layers": 2, "num_attention_heads": 4,
      "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 1000})",
                              "c.json");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("hidden_size: 100 / num_attention_heads (4) = 25"),
            std::string::npos)
      << c.error().message;
  EXPECT_EQ(c.error().message.find("head_dim: expected"), std::string::npos);
}

TEST(Flags, ParseIntFlag) {
  using cli::parse_int_flag;
  EXPECT_EQ(parse_int_flag("--x", "010", 0, 100).value(), 10);
  EXPECT_EQ(parse_int_flag("--x", "-7", -10, 10).value(), -7);
  EXPECT_FALSE(parse_int_flag("--x", "", 0, 100).ok());
  EXPECT_FALSE(parse_int_flag("--x", "-", 0, 100).ok());
  EXPECT_FALSE(parse_int_flag("--x", "+5", 0, 100).ok());
  EXPECT_FALSE(parse_int_flag("--x", "101", 0, 100).ok());
  EXPECT_FALSE(parse_int_flag("--x", "99999999999999999999", 0, 100).ok());
  const auto e = parse_int_flag("--runs", "0", 1, 1000);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().message, "--runs: expected a decimal integer in [1, 1000], got '0'");
  EXPECT_EQ(cli::parse_uint_flag("--seed", "18446744073709551615", UINT64_MAX).value(), UINT64_MAX);
  EXPECT_FALSE(cli::parse_uint_flag("--seed", "-0", UINT64_MAX).ok());
  EXPECT_DOUBLE_EQ(cli::parse_number_flag("--t", "0.5", 0, 1).value(), 0.5);
  EXPECT_DOUBLE_EQ(cli::parse_number_flag("--t", "1e-3", 0, 1).value(), 1e-3);
  EXPECT_FALSE(cli::parse_number_flag("--t", "inf", 0, 1e9).ok());
  EXPECT_FALSE(cli::parse_number_flag("--t", "0x1p-2", 0, 1).ok());
}

}  // namespace
}  // namespace ferry
