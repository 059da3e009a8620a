#include "measure/host_rates.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "core/bf16.h"
#include "core/stats.h"
#include "host/cpu_topology.h"
#include "host/host_gemv.h"
#include "measure/background_copies.h"

namespace ferry {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// One pass of `threads` pinned readers over `words`, each summing its share; returns seconds.
double read_pass(const uint64_t* words, size_t count, const std::vector<CpuCore>& cores,
                 int threads) {
  std::atomic<bool> go{false};
  std::vector<uint64_t> sums(static_cast<size_t>(threads), 0);
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) {
    pool.emplace_back([&, i] {
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      const size_t per = count / static_cast<size_t>(threads);
      const size_t begin = per * static_cast<size_t>(i);
      const size_t end = i + 1 == threads ? count : begin + per;
      uint64_t a = 0, b = 0, c = 0, d = 0;
      size_t j = begin;
      for (; j + 4 <= end; j += 4) {
        a += words[j];
        b ^= words[j + 1];
        c += words[j + 2];
        d ^= words[j + 3];
      }
      for (; j < end; ++j) a += words[j];
      sums[static_cast<size_t>(i)] = a + b + c + d;
    });
    if (static_cast<size_t>(i) < cores.size()) {
      (void)pin_thread_to(pool.back(), cores[static_cast<size_t>(i)].cpu);
    }
  }
  const auto t0 = Clock::now();
  go.store(true, std::memory_order_release);
  for (std::thread& t : pool) t.join();
  const double s = seconds_since(t0);
  volatile uint64_t sink = 0;
  for (uint64_t v : sums) sink = sink + v;  // the sums are used, so the reads stay
  return s;
}

}  // namespace

Result<HostRates> measure_host_rates(Backend* backend, int threads, uint64_t bytes, int passes) {
  const bool cpu = backend == nullptr || backend->name() == "cpu";
  if (bytes == 0) bytes = cpu ? uint64_t{64} << 20 : uint64_t{1} << 30;
  passes = std::max(1, passes);
  HostGemvOptions o;
  o.threads = threads;
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<HostGemv> engine, HostGemv::create(o));

  HostRates r;
  r.threads = engine->threads();
  r.isa = engine->isa();
  r.pinned = engine->pinned();
  r.gemv_k = 4096;
  const int64_t rows = std::max<int64_t>(1, static_cast<int64_t>(bytes / 2) / r.gemv_k);
  r.bytes = static_cast<uint64_t>(rows * r.gemv_k) * 2;

  // Random bf16 weights (not zeros: every byte is a real read of a real value).
  std::vector<uint16_t> w(static_cast<size_t>(rows * r.gemv_k));
  std::mt19937 gen(1);
  std::uniform_real_distribution<float> dist(-0.05f, 0.05f);
  for (size_t i = 0; i < w.size() && i < (size_t{1} << 20); ++i) w[i] = f32_to_bf16(dist(gen));
  for (size_t i = size_t{1} << 20; i < w.size(); i += size_t{1} << 20) {
    std::memcpy(w.data() + i, w.data(), std::min(size_t{1} << 20, w.size() - i) * 2);
  }
  std::vector<uint16_t> x(w.begin(), w.begin() + r.gemv_k);
  std::vector<float> out(static_cast<size_t>(rows));

  const std::vector<CpuCore>& cores = engine->cores();  // the readers sit where the workers do
  std::vector<double> read_s, gemv_s;
  (void)read_pass(reinterpret_cast<const uint64_t*>(w.data()), w.size() / 4, cores, r.threads);
  for (int p = 0; p < passes; ++p) {
    read_s.push_back(
        read_pass(reinterpret_cast<const uint64_t*>(w.data()), w.size() / 4, cores, r.threads));
  }
  auto gemv_pass = [&]() -> Result<double> {
    const auto t0 = Clock::now();
    FERRY_RETURN_IF_ERROR(engine->run(x.data(), w.data(), r.gemv_k, rows, r.gemv_k, out.data()));
    return seconds_since(t0);
  };
  FERRY_RETURN_IF_ERROR(gemv_pass().status());  // warm-up
  for (int p = 0; p < passes; ++p) {
    FERRY_ASSIGN_OR_RETURN(const double s, gemv_pass());
    gemv_s.push_back(s);
  }
  const double b = static_cast<double>(r.bytes);
  r.read_bandwidth = b / median(read_s);
  r.gemv_bandwidth = b / median(gemv_s);

  if (!cpu) {
    auto copies = BackgroundCopies::start(*backend, uint64_t{256} << 20);
    if (copies.ok()) {
      const auto t0 = Clock::now();
      std::vector<double> beside;
      for (int p = 0; p < passes; ++p) {
        FERRY_ASSIGN_OR_RETURN(const double s, gemv_pass());
        beside.push_back(s);
      }
      const int64_t n = (*copies)->stop();
      const double span = seconds_since(t0);
      r.gemv_beside_copies = b / median(beside);
      r.link_beside_gemv = static_cast<double>(n) * static_cast<double>((*copies)->bytes()) / span;
    }
  }
  return r;
}

}  // namespace ferry
