#include "format/fault_guard.h"

#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>

namespace ferry {
namespace {

struct Frame {
  sigjmp_buf env;
  const void* volatile fault = nullptr;
};
// Initial-exec: read in the signal handler, where a lazily allocated TLS block (a library loaded
// with dlopen) could call malloc.
[[gnu::tls_model("initial-exec")]] thread_local Frame* t_frame = nullptr;

struct Region {
  std::atomic<uintptr_t> begin{0};  // 0: free; 1: being set up
  std::atomic<uintptr_t> end{0};
  std::atomic<int> faults{0};
};
constexpr int kRegions = 64;
Region g_regions[kRegions];

struct sigaction g_previous {};
uintptr_t g_page = 4096;

// Async-signal-safe: atomics, mmap, sigaction, siglongjmp.
void on_bus(int sig, siginfo_t* info, void* uctx) {
  const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
  for (Region& r : g_regions) {
    const uintptr_t b = r.begin.load();
    if (b <= 1 || addr < b || addr >= r.end.load()) continue;
    void* page = reinterpret_cast<void*>(addr & ~(g_page - 1));
    if (::mmap(page, g_page, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1,
               0) != MAP_FAILED) {
      r.faults.fetch_add(1);
      return;  // the store runs again, into the anonymous page
    }
    break;
  }
  if (Frame* f = t_frame; f != nullptr && info->si_code > 0) {
    f->fault = info->si_addr;
    siglongjmp(f->env, 1);
  }
  // Not ours: hand it to whatever was there before.
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(sig, info, uctx);
    return;
  }
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(sig);
    return;
  }
  ::sigaction(SIGBUS, &g_previous, nullptr);
  // A fault re-runs the access and is delivered again, now by the old disposition; a SIGBUS
  // sent by kill() would not come again, so send it.
  if (info->si_code <= 0) ::raise(sig);
}

void install_bus_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    g_page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    struct sigaction sa {};
    sa.sa_sigaction = on_bus;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_SIGINFO;
    ::sigaction(SIGBUS, &sa, &g_previous);
  });
}

// Kept out of line and apart from anything with a destructor: siglongjmp returns here.
[[gnu::noinline]] bool call_with_frame(Frame& frame, void (*fn)(void*), void* ctx) {
  Frame* const outer = t_frame;
  if (sigsetjmp(frame.env, 1) != 0) {
    t_frame = outer;
    return false;
  }
  t_frame = &frame;
  fn(ctx);
  t_frame = outer;
  return true;
}

}  // namespace

std::optional<const void*> run_guarded(void (*fn)(void*), void* ctx) {
  install_bus_handler();
  Frame frame;
  if (call_with_frame(frame, fn, ctx)) return std::nullopt;
  return frame.fault;
}

Error mapped_fault_error(const MappedFile& file, const void* address) {
  const auto bytes = file.bytes();
  const auto* p = static_cast<const std::byte*>(address);
  if (bytes.empty() || p < bytes.data() || p >= bytes.data() + bytes.size()) {
    return make_error(ErrorCode::io, file.path() +
                                         ": memory fault outside the file's mapping "
                                         "while reading it");
  }
  std::string now;
  if (auto size = file.size_now()) now = "; the file now has " + std::to_string(*size) + " bytes";
  return make_error(ErrorCode::io, file.path() + ": changed or truncated while in use (the read " +
                                       "at byte " + std::to_string(p - bytes.data()) + " faulted" +
                                       now + ")");
}

Status guarded_copy(void* dst, const void* src, size_t bytes, const MappedFile& file) {
  struct Args {
    void* dst;
    const void* src;
    size_t bytes;
  } args{dst, src, bytes};
  const std::optional<const void*> fault = run_guarded(
      [](void* p) {
        const auto* a = static_cast<const Args*>(p);
        std::memcpy(a->dst, a->src, a->bytes);
      },
      &args);
  if (fault) return mapped_fault_error(file, *fault);
  return {};
}

AbsorbedRegion::AbsorbedRegion(void* data, size_t bytes) {
  if (data == nullptr || bytes == 0) return;
  install_bus_handler();
  for (int i = 0; i < kRegions; ++i) {
    uintptr_t expected = 0;
    if (!g_regions[i].begin.compare_exchange_strong(expected, 1)) continue;
    const auto b = reinterpret_cast<uintptr_t>(data);
    g_regions[i].faults.store(0);
    g_regions[i].end.store(b + bytes);
    g_regions[i].begin.store(b);
    slot_ = i;
    return;
  }
}

AbsorbedRegion::~AbsorbedRegion() {
  if (slot_ < 0) return;
  g_regions[slot_].begin.store(1);
  g_regions[slot_].end.store(0);
  g_regions[slot_].begin.store(0);
}

int AbsorbedRegion::faults() const {
  return slot_ < 0 ? 0 : g_regions[slot_].faults.load();
}

}  // namespace ferry
