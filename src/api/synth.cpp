#include "api/synth.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "core/parse_size.h"
#include "core/units.h"
#include "format/atomic_write.h"
#include "format/safetensors.h"
#include "model/config_json.h"
#include "model/presets.h"
#include "model/synth.h"
#include "tokenizer/synthetic.h"

namespace ferry::api {

namespace {

namespace fs = std::filesystem;

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

}  // namespace

Result<SynthReport> run_synth(const SynthOptions& o) {
  if (o.init != "uniform" && o.init != "normal") {
    return make_error(ErrorCode::invalid_argument,
                      "--init must be uniform or normal, got '" + o.init + "'");
  }
  const SynthDistribution dist =
      o.init == "normal" ? SynthDistribution::normal : SynthDistribution::uniform;
  FERRY_ASSIGN_OR_RETURN(uint64_t max_shard, parse_size(o.max_shard));
  FERRY_ASSIGN_OR_RETURN(ModelConfig config, preset(o.preset));
  FERRY_ASSIGN_OR_RETURN(ModelWeights weights, describe_weights(config));
  // The new checkpoint is written beside the old one and swapped in whole: until commit() the
  // folder at --out is untouched, whatever stops this process.
  FERRY_ASSIGN_OR_RETURN(
      StagedFolder out, StagedFolder::begin(o.out, checkpoint_folder_policy(o.force), [&] {
        std::fprintf(stderr, "synth: waiting for another writer of %s to finish\n", o.out.c_str());
      }));
  if (Status s =
          write_file_atomic((fs::path(out.path()) / "config.json").string(), write_config(config));
      !s.ok())
    return out.explain(s.error());
  if (Status s = write_synthetic_tokenizer(out.path(), config); !s.ok()) {
    return out.explain(s.error());
  }
  SynthReport report;
  report.out = o.out;
  if (o.config_only) {
    FERRY_RETURN_IF_ERROR(out.commit());
    return report;
  }

  std::atomic<uint64_t> done{0};
  std::vector<TensorToWrite> tensors = synth_tensors(weights, o.seed, &done, dist);
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
    std::map<std::string, std::string> metadata{
        {"format", "pt"}, {"ferry_preset", o.preset}, {"ferry_seed", std::to_string(o.seed)}};
    // Named only when not the default, so uniform checkpoints keep their bytes.
    if (dist != SynthDistribution::uniform) metadata["ferry_init"] = o.init;
    written = write_checkpoint(out.path(), tensors, max_shard, metadata);
  }
  if (!written.ok()) return out.explain(written.error());
  FERRY_RETURN_IF_ERROR(out.commit());
  report.weights = true;
  report.bytes = total;
  report.tensors = tensors.size();
  report.params = weights.total_params();
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

void print_synth_report(const SynthReport& r) {
  if (!r.weights) return;
  const double s = r.seconds;
  std::fprintf(stderr, "synth: wrote %s (%zu tensors, %s params) to %s in %.1f s, %.2f GB/s\n",
               human_bytes(r.bytes).c_str(), r.tensors, human_params(r.params).c_str(),
               r.out.c_str(), s, s > 0 ? static_cast<double>(r.bytes) / s / 1e9 : 0.0);
}

}  // namespace ferry::api
