// The CPU backend: host memory as device memory, worker threads as streams, a shared thread pool
// for the ops (cpu_ops.h).
#include "backend/cpu/cpu_backend.h"

#include "format/fault_guard.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_streams.h"
#include "core/thread_pool.h"

namespace ferry {
namespace {

constexpr size_t kAlignment = 256;

cpu::CpuStream& as_cpu(Stream& s) {
  auto* p = dynamic_cast<cpu::CpuStream*>(&s);
  FERRY_CHECK(p != nullptr, "stream was not created by the cpu backend");
  return *p;
}

cpu::CpuEvent& as_cpu(Event& e) {
  auto* p = dynamic_cast<cpu::CpuEvent*>(&e);
  FERRY_CHECK(p != nullptr, "event was not created by the cpu backend");
  return *p;
}

size_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 0;
  return static_cast<size_t>(pages) * static_cast<size_t>(page);
}

// MemAvailable from /proc/meminfo (what can be taken without swapping, page cache included),
// else the free pages; 0 when neither can be read.
uint64_t available_memory_bytes() {
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (f != nullptr) {
    char line[256];
    unsigned long long kib = 0;
    bool found = false;
    while (std::fgets(line, sizeof line, f) != nullptr) {
      if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1) {
        found = true;
        break;
      }
    }
    std::fclose(f);
    if (found) return static_cast<uint64_t>(kib) * 1024;
  }
  const long pages = sysconf(_SC_AVPHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 0;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
}

// A recording: the closures a capturing stream collected, enqueued again on every launch.
class CpuGraph final : public Graph {
 public:
  explicit CpuGraph(std::vector<std::function<Status()>> items) : items_(std::move(items)) {}
  const std::vector<std::function<Status()>>& items() const { return items_; }

 private:
  std::vector<std::function<Status()>> items_;
};

// Host copies, events and synchronization cannot be part of a recording (as on CUDA, where a
// captured copy from pageable memory is refused): the first one fails the capture.
bool refuse_while_capturing(cpu::CpuStream& s, std::string_view what) {
  if (!s.capturing()) return false;
  s.fail_capture(make_error(ErrorCode::invalid_argument,
                            "cpu: " + std::string(what) + " cannot be recorded in a graph"));
  return true;
}

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const CpuBackendOptions& options)
      : options_(options), pool_(std::make_shared<ThreadPool>(options.threads)) {}

  std::string_view name() const override { return "cpu"; }

  DeviceInfo info() const override {
    DeviceInfo info;
    info.name = "cpu (" + std::to_string(pool_->threads()) + " threads)";
    info.total_bytes = physical_memory_bytes();
    return info;
  }

  Result<RawDeviceMemory> device_alloc(size_t bytes) override {
    // More than the machine's memory cannot be device memory; refusing it up front also keeps
    // sanitizer allocators (which abort on absurd sizes) out of the way.
    const size_t physical = physical_memory_bytes();
    if (bytes > SIZE_MAX - kAlignment || (physical > 0 && bytes > physical)) {
      return make_error(ErrorCode::out_of_memory, "cpu: cannot allocate " + std::to_string(bytes) +
                                                      " bytes (" + std::to_string(physical) +
                                                      " bytes of memory)");
    }
    // aligned_alloc wants a size that is a multiple of the alignment; 0 bytes still gets a block.
    const size_t rounded = std::max(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
    void* p = std::aligned_alloc(kAlignment, rounded);
    if (p == nullptr) {
      return make_error(ErrorCode::out_of_memory,
                        "cpu: cannot allocate " + std::to_string(bytes) + " bytes");
    }
    return RawDeviceMemory{p, [](void* q) { std::free(q); }};
  }

  HostRegistrationResult register_host(const void* data, size_t bytes) override {
    if (!options_.refuse_host_registration) return Backend::register_host(data, bytes);
    HostRegistrationResult r;
    r.how = "refused (cpu test hook)";
    return r;
  }

  PlatformFacts platform_facts() const override {
    PlatformFacts f = Backend::platform_facts();
    if (options_.integrated) f.integrated = *options_.integrated;
    return f;
  }

  std::unique_ptr<Stream> create_stream() override {
    const uint64_t n = stream_counter_.fetch_add(1);
    return std::make_unique<cpu::CpuStream>(options_.max_delay_us,
                                            options_.delay_seed + 0x9e3779b97f4a7c15ull * (n + 1));
  }

  std::unique_ptr<Event> create_event() override { return std::make_unique<cpu::CpuEvent>(); }
  std::unique_ptr<Event> create_timing_event() override {
    return std::make_unique<cpu::CpuEvent>(/*timing=*/true);
  }

  Result<double> elapsed_seconds(Event& start, Event& end) override {
    FERRY_ASSIGN_OR_RETURN(const auto a, completion_time(start));
    FERRY_ASSIGN_OR_RETURN(const auto b, completion_time(end));
    return std::chrono::duration<double>(b - a).count();
  }

  std::optional<uint64_t> device_free_bytes() const override {
    const uint64_t available = available_memory_bytes();
    if (available == 0) return std::nullopt;
    return available;
  }

  void copy_to_device(Stream& stream, void* dst, const void* host_src, size_t bytes) override {
    if (refuse_while_capturing(as_cpu(stream), "a copy from the host")) return;
    enqueue_copy(stream, dst, host_src, bytes, options_.host_copy_delay_us);
  }
  void copy_from_mapping(Stream& stream, void* dst, const void* src, size_t bytes,
                         const MappedFile& file) override {
    if (refuse_while_capturing(as_cpu(stream), "a copy from the host")) return;
    as_cpu(stream).enqueue([dst, src, bytes, &file, delay = options_.host_copy_delay_us] {
      sleep_us(delay);
      return guarded_copy(dst, src, bytes, file);
    });
  }
  void copy_to_host(Stream& stream, void* host_dst, const void* src, size_t bytes) override {
    if (refuse_while_capturing(as_cpu(stream), "a copy to the host")) return;
    enqueue_copy(stream, host_dst, src, bytes);
  }
  void copy_on_device(Stream& stream, void* dst, const void* src, size_t bytes) override {
    enqueue_copy(stream, dst, src, bytes);
  }

  void fill_byte(Stream& stream, void* dst, uint8_t value, size_t bytes) override {
    as_cpu(stream).enqueue([dst, value, bytes] {
      if (bytes > 0) std::memset(dst, value, bytes);
      return Status();
    });
  }

  void fill_zero(Stream& stream, void* dst, size_t bytes) override {
    as_cpu(stream).enqueue([dst, bytes] {
      if (bytes > 0) std::memset(dst, 0, bytes);
      return Status();
    });
  }

  Status run(Stream& stream, const Op& op) override {
    FERRY_RETURN_IF_ERROR(validate(op));
    as_cpu(stream).enqueue([op, pool = pool_] { return cpu::execute(op, pool.get()); });
    return Status();
  }

  // The probe read (backend.h's fold: little-endian 64-bit words from `src`, xor'ed), split over
  // the op pool.
  Status read_reduce(Stream& stream, const void* src, size_t bytes, void* sum) override {
    cpu::CpuStream& s = as_cpu(stream);
    if (s.capturing()) {
      return make_error(ErrorCode::invalid_argument, "cpu: a probe read cannot be recorded");
    }
    s.enqueue([src, bytes, sum, pool = pool_] {
      const auto* p = static_cast<const unsigned char*>(src);
      const auto words = static_cast<int64_t>(bytes / 8);
      std::mutex m;
      uint64_t total = 0;
      parallel_for(pool.get(), words, int64_t{1} << 16, [&](int64_t b, int64_t e) {
        uint64_t acc = 0;
        for (int64_t i = b; i < e; ++i) {
          uint64_t w = 0;
          std::memcpy(&w, p + 8 * i, 8);
          acc ^= w;
        }
        std::lock_guard lock(m);
        total ^= acc;
      });
      for (size_t i = static_cast<size_t>(words) * 8; i < bytes; ++i) {
        total ^= uint64_t{p[i]} << (8 * (i % 8));
      }
      uint64_t old = 0;
      std::memcpy(&old, sum, 8);
      old ^= total;
      std::memcpy(sum, &old, 8);
      return Status();
    });
    return Status();
  }

  // The reference decoder (compress::decode_group) on the stream's thread, its segments and
  // checksum split over the op pool; its error, named after the group, is the stream's.
  Status decode_group(Stream& stream, const compress::GroupLayout& layout, const void* compressed,
                      void* out, size_t out_capacity, std::string_view name) override {
    cpu::CpuStream& s = as_cpu(stream);
    if (s.capturing()) {
      return make_error(ErrorCode::invalid_argument,
                        "cpu: the decode of group " + std::string(name) +
                            " cannot be recorded (its errors would not be checked)");
    }
    FERRY_RETURN_IF_ERROR(check_decode_arguments(layout, compressed, out, out_capacity, name));
    s.enqueue([&layout, compressed, out, group = std::string(name), pool = pool_]() -> Status {
      compress::DecodeOptions options;
      options.pool = pool.get();
      const Status st = compress::decode_group(
          layout, {static_cast<const uint8_t*>(compressed), layout.compressed_size},
          {static_cast<uint8_t*>(out), layout.decoded_size}, options);
      if (st.ok()) return st;
      return make_error(st.error().code, "group " + group + ": " + st.error().message);
    });
    return Status();
  }

  Status begin_capture(Stream& stream) override { return as_cpu(stream).begin_capture(); }

  Result<std::unique_ptr<Graph>> end_capture(Stream& stream) override {
    FERRY_ASSIGN_OR_RETURN(auto items, as_cpu(stream).end_capture());
    return std::unique_ptr<Graph>(std::make_unique<CpuGraph>(std::move(items)));
  }

  Status launch(Stream& stream, const Graph& graph) override {
    const auto* g = dynamic_cast<const CpuGraph*>(&graph);
    if (g == nullptr) {
      return make_error(ErrorCode::invalid_argument, "cpu: graph was not recorded by this backend");
    }
    cpu::CpuStream& s = as_cpu(stream);
    for (const auto& item : g->items()) s.enqueue(item);
    return Status();
  }

  void record(Event& event, Stream& stream) override {
    if (refuse_while_capturing(as_cpu(stream), "an event record")) return;
    std::shared_ptr<cpu::EventState> state = as_cpu(event).state();
    uint64_t generation = 0;
    {
      std::lock_guard lock(state->mutex);
      generation = ++state->recorded;
    }
    as_cpu(stream).enqueue([state, generation] {
      {
        std::lock_guard lock(state->mutex);
        if (generation > state->completed) {
          state->completed = generation;
          if (state->timing) state->completed_at = std::chrono::steady_clock::now();
        }
      }
      state->cv.notify_all();
      return Status();
    });
  }

  void wait(Stream& stream, Event& event) override {
    if (refuse_while_capturing(as_cpu(stream), "an event wait")) return;
    std::shared_ptr<cpu::EventState> state = as_cpu(event).state();
    uint64_t target = 0;
    {
      std::lock_guard lock(state->mutex);
      target = state->recorded;
    }
    if (target == 0) return;  // never recorded: nothing to wait for (as in CUDA)
    as_cpu(stream).enqueue([state, target] {
      std::unique_lock lock(state->mutex);
      state->cv.wait(lock, [&] { return state->completed >= target; });
      return Status();
    });
  }

  Status synchronize(Stream& stream) override {
    if (as_cpu(stream).capturing()) {
      return make_error(ErrorCode::invalid_argument, "cpu: synchronize on a capturing stream");
    }
    return as_cpu(stream).synchronize();
  }

  Status synchronize(Event& event) override {
    const std::shared_ptr<cpu::EventState>& state = as_cpu(event).state();
    std::unique_lock lock(state->mutex);
    const uint64_t target = state->recorded;
    state->cv.wait(lock, [&] { return state->completed >= target; });
    return Status();
  }

 private:
  // When a timing event's latest record completed; an error if it is not one, was never
  // recorded, or has not completed.
  static Result<std::chrono::steady_clock::time_point> completion_time(Event& e) {
    auto* p = dynamic_cast<cpu::CpuEvent*>(&e);
    if (p == nullptr) {
      return make_error(ErrorCode::invalid_argument, "cpu: event was not created by this backend");
    }
    const std::shared_ptr<cpu::EventState>& state = p->state();
    std::lock_guard lock(state->mutex);
    if (!state->timing) {
      return make_error(ErrorCode::invalid_argument,
                        "cpu: elapsed time asked of an event created without timing");
    }
    if (state->recorded == 0) {
      return make_error(ErrorCode::invalid_argument, "cpu: elapsed time of an unrecorded event");
    }
    if (state->completed < state->recorded) {
      return make_error(ErrorCode::invalid_argument,
                        "cpu: elapsed time of an event that has not completed (synchronize first)");
    }
    return state->completed_at;
  }

  static void sleep_us(int us) {
    if (us > 0) std::this_thread::sleep_for(std::chrono::microseconds(us));
  }

  void enqueue_copy(Stream& stream, void* dst, const void* src, size_t bytes, int delay_us = 0) {
    as_cpu(stream).enqueue([dst, src, bytes, delay_us] {
      sleep_us(delay_us);
      if (bytes > 0) std::memcpy(dst, src, bytes);
      return Status();
    });
  }

  CpuBackendOptions options_;
  std::shared_ptr<ThreadPool> pool_;
  std::atomic<uint64_t> stream_counter_{0};
};

}  // namespace

std::unique_ptr<Backend> create_cpu_backend(const CpuBackendOptions& options) {
  return std::make_unique<CpuBackend>(options);
}

}  // namespace ferry
