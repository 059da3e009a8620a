// ferry synth --preset P --out DIR [--seed S] [--max-shard 5GB] [--force]: config.json, a
// tokenizer.json (tokenizer/synthetic.h) and seeded random weights for every tensor of the
// preset's table, in safetensors shards.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <thread>

#include "cli/commands.h"
#include "cli/inspect_report.h"
#include "cli/size_arg.h"
#include "format/config_json.h"
#include "format/safetensors.h"
#include "model/presets.h"
#include "model/synth.h"
#include "tokenizer/synthetic.h"

namespace ferry::cli {
namespace {

namespace fs = std::filesystem;

struct SynthOptions {
  std::string preset;
  std::string out;
  uint64_t seed = 0;
  std::string max_shard = "5GB";
  bool force = false;
  bool config_only = false;
};

// Prints "synth: 45% 10.0/22.1 GB, 3.2 GB/s" to stderr while the fills run (RAII thread).
class Progress {
 public:
  Progress(const std::atomic<uint64_t>& done, uint64_t total) : done_(done), total_(total) {
    tty_ = ::isatty(STDERR_FILENO) != 0;
    thread_ = std::thread([this] { loop(); });
  }
  ~Progress() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

 private:
  void loop() {
    const auto start = std::chrono::steady_clock::now();
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, std::chrono::milliseconds(tty_ ? 250 : 2000),
                         [this] { return stop_; })) {
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const uint64_t d = done_.load(std::memory_order_relaxed);
      std::fprintf(stderr, "%ssynth: %3.0f%% %s of %s, %.2f GB/s%s", tty_ ? "\r" : "",
                   total_ ? 100.0 * static_cast<double>(d) / static_cast<double>(total_) : 100.0,
                   human_bytes(d).c_str(), human_bytes(total_).c_str(),
                   s > 0 ? static_cast<double>(d) / s / 1e9 : 0.0, tty_ ? "   " : "\n");
    }
    if (tty_) std::fprintf(stderr, "\r%60s\r", "");
  }

  const std::atomic<uint64_t>& done_;
  uint64_t total_;
  bool tty_ = false;
  bool stop_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  std::thread thread_;
};

bool is_checkpoint_file(const std::string& name) {
  return name == "config.json" || name == "tokenizer.json" || name == "model.safetensors" ||
         name == "model.safetensors.index.json" ||
         (name.rfind("model-", 0) == 0 && name.find("-of-") != std::string::npos &&
          name.size() > 12 && name.substr(name.size() - 12) == ".safetensors");
}

Status prepare_dir(const std::string& dir, bool force) {
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    if (!fs::is_directory(dir, ec)) {
      return make_error(ErrorCode::invalid_argument, dir + " exists and is not a folder");
    }
    bool empty = fs::directory_iterator(dir, ec) == fs::directory_iterator();
    if (ec) return make_error(ErrorCode::io, dir + ": " + ec.message());
    if (!empty && !force) {
      return make_error(ErrorCode::invalid_argument,
                        dir + " is not empty (use --force to overwrite a checkpoint there)");
    }
    // --force: remove only what a checkpoint writer made, so stale shards cannot mix in.
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      if (entry.is_regular_file() && is_checkpoint_file(entry.path().filename().string())) {
        fs::remove(entry.path(), ec);
        if (ec) return make_error(ErrorCode::io, entry.path().string() + ": " + ec.message());
      }
    }
  }
  fs::create_directories(dir, ec);
  if (ec) return make_error(ErrorCode::io, dir + ": cannot create: " + ec.message());
  return Status();
}

Status write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  if (!f) return make_error(ErrorCode::io, path + ": cannot write");
  return Status();
}

Status run_synth(const SynthOptions& o) {
  FERRY_ASSIGN_OR_RETURN(uint64_t max_shard, parse_size(o.max_shard));
  FERRY_ASSIGN_OR_RETURN(ModelConfig config, preset(o.preset));
  FERRY_ASSIGN_OR_RETURN(ModelWeights weights, describe_weights(config));
  FERRY_RETURN_IF_ERROR(prepare_dir(o.out, o.force));
  FERRY_RETURN_IF_ERROR(
      write_text((fs::path(o.out) / "config.json").string(), write_config(config)));
  FERRY_RETURN_IF_ERROR(write_synthetic_tokenizer(o.out, config));
  if (o.config_only) return Status();

  std::atomic<uint64_t> done{0};
  std::vector<TensorToWrite> tensors = synth_tensors(weights, o.seed, &done);
  uint64_t total = 0;
  for (const auto& t : tensors) {
    uint64_t b = dtype_size(t.dtype);
    for (int64_t d : t.shape) b *= static_cast<uint64_t>(d);
    total += b;
  }
  const auto start = std::chrono::steady_clock::now();
  Status written;
  {
    Progress progress(done, total);
    written = write_checkpoint(
        o.out, tensors, max_shard,
        {{"format", "pt"}, {"ferry_preset", o.preset}, {"ferry_seed", std::to_string(o.seed)}});
  }
  FERRY_RETURN_IF_ERROR(written);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "synth: wrote %s (%zu tensors, %s params) to %s in %.1f s, %.2f GB/s\n",
               human_bytes(total).c_str(), tensors.size(),
               human_params(weights.total_params()).c_str(), o.out.c_str(), s,
               s > 0 ? static_cast<double>(total) / s / 1e9 : 0.0);
  return Status();
}

}  // namespace

void add_synth_command(CLI::App& app) {
  auto opts = std::make_shared<SynthOptions>();
  std::string names;
  for (auto n : preset_names()) names += (names.empty() ? "" : ", ") + std::string(n);
  auto* cmd = app.add_subcommand("synth", "Write a preset's config.json and seeded random weights");
  cmd->add_option("--preset", opts->preset, "model preset: " + names)->required();
  cmd->add_option("--out", opts->out, "output folder (must be empty unless --force)")->required();
  cmd->add_option("--seed", opts->seed, "random seed (default 0)");
  cmd->add_option("--max-shard", opts->max_shard, "largest shard, e.g. 5GB, 500MB, 2GiB");
  cmd->add_flag("--force", opts->force, "overwrite a checkpoint already in --out");
  cmd->add_flag("--config-only", opts->config_only, "write config.json only, no weights");
  cmd->callback([opts] {
    Status s;
    try {
      s = run_synth(*opts);
    } catch (const std::exception& e) {
      s = make_error(ErrorCode::internal, e.what());
    }
    if (!s.ok()) {
      std::cerr << "ferry synth: " << s.error().to_string() << "\n";
      throw CLI::RuntimeError(2);
    }
  });
}

}  // namespace ferry::cli
