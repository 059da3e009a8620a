// The CUDA backend: cudaMalloc'd buffers, non-blocking streams, events (timing-free unless asked
// for), async copies, and the op kernels (cuda_ops.cpp). Errors from calls that return void
// (copies, record, wait) are kept on the stream and reported by synchronize(stream).
#include "backend/cuda/cuda_backend.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_resources.h"
#include "backend/cuda/cuda_stream.h"
#include "backend/cuda/device_limits.cuh"
#include "backend/cuda/exponent_decode.cuh"
#include "backend/cuda/linear.cuh"
#include "backend/cuda/nvml_probe.h"
#include "backend/cuda/op_context.h"
#include "backend/cuda/read_reduce.cuh"

namespace ferry {
namespace cuda {
namespace {

// cuBLASLt workspace per compute stream (streams running GEMMs concurrently must not share one).
// 32 MiB is what cuBLAS recommends for Hopper. The size is fixed whatever the budget: cuBLASLt
// picks algorithms by the workspace it is given, and results must not depend on the budget.
constexpr size_t kWorkspaceBytes = size_t{32} << 20;
// Op scratch per compute stream (attention split partials, f32 -> bf16 linear inputs, argmax
// partials): the largest need of the reference workloads is a few MiB.
constexpr size_t kScratchBytes = size_t{16} << 20;
constexpr uint64_t kPoolRetainBytes = uint64_t{64} << 20;
// The per-thread stack asked for when the context is made (create_cuda_backend).
constexpr size_t kThreadStackBytes = 256;

CudaStream& as_cuda(Stream& s) {
  return static_cast<CudaStream&>(s);
}
CudaEvent& as_cuda(Event& e) {
  return static_cast<CudaEvent&>(e);
}

// An instantiated CUDA graph of what one stream enqueued during a capture.
class CudaGraph final : public Graph {
 public:
  CudaGraph(UniqueGraph graph, UniqueGraphExec exec)
      : graph_(std::move(graph)), exec_(std::move(exec)) {}
  cudaGraphExec_t exec() const { return exec_.get(); }

 private:
  UniqueGraph graph_;
  UniqueGraphExec exec_;
};

// A host range registered with cudaHostRegister, unregistered when destroyed.
class CudaHostRegistration final : public HostRegistration {
 public:
  explicit CudaHostRegistration(void* p) : p_(p) {}
  ~CudaHostRegistration() override { (void)cudaHostUnregister(p_); }
  CudaHostRegistration(const CudaHostRegistration&) = delete;
  CudaHostRegistration& operator=(const CudaHostRegistration&) = delete;

 private:
  void* p_;
};

// An attribute of the device, or nullopt when the runtime cannot say.
std::optional<bool> device_flag(cudaDeviceAttr attr, int device) {
  int v = 0;
  if (cudaDeviceGetAttribute(&v, attr, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return std::nullopt;
  }
  return v != 0;
}

// The PCIe link from sysfs, where NVML gave nothing: "/sys/bus/pci/devices/<bus id>/
// {current,max}_link_{speed,width}"; speeds "32.0 GT/s PCIe" name the generation.
void pcie_from_sysfs(const std::string& bus_id, PlatformFacts& f) {
  std::string id = bus_id;
  for (char& c : id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::string dir = "/sys/bus/pci/devices/" + id + "/";
  auto read = [&](const char* name) {
    std::ifstream in(dir + name);
    std::string v;
    std::getline(in, v);
    return v;
  };
  auto generation = [](const std::string& speed) -> std::optional<int> {
    const double gts = std::atof(speed.c_str());
    const double table[] = {2.5, 5, 8, 16, 32, 64};
    for (int g = 0; g < 6; ++g) {
      if (gts > table[g] * 0.9 && gts < table[g] * 1.1) return g + 1;
    }
    return std::nullopt;
  };
  auto width = [](const std::string& w) -> std::optional<int> {
    const int v = std::atoi(w.c_str());
    return v > 0 && v <= 64 ? std::optional<int>(v) : std::nullopt;
  };
  f.pcie_generation = generation(read("current_link_speed"));
  f.pcie_width = width(read("current_link_width"));
  f.pcie_max_generation = generation(read("max_link_speed"));
  f.pcie_max_width = width(read("max_link_width"));
  if (f.pcie_generation || f.pcie_max_generation) f.pcie_source = "sysfs (" + dir + ")";
}

// Registers `bytes` at `p` with `flags` and unregisters at once.
RegistrationTrial try_register(void* p, size_t bytes, unsigned flags, std::string memory,
                               std::string flag_name) {
  RegistrationTrial t;
  t.memory = std::move(memory);
  t.flags = std::move(flag_name);
  const cudaError_t err = cudaHostRegister(p, bytes, flags);
  t.ok = err == cudaSuccess;
  if (t.ok) {
    (void)cudaHostUnregister(p);
    t.how = "registered";
  } else {
    (void)cudaGetLastError();
    t.how = cudaGetErrorString(err);
  }
  return t;
}

// Host copies, events and synchronization are kept out of recordings (the CPU backend refuses
// them too, so a model that records one fails on every machine, not only on a GPU).
bool refuse_while_capturing(CudaStream& s, std::string_view what) {
  if (!s.capturing()) return false;
  s.note(make_error(ErrorCode::invalid_argument,
                    "cuda: " + std::string(what) + " cannot be recorded in a graph"));
  return true;
}

class CudaBackend final : public Backend {
 public:
  CudaBackend(int device, cudaDeviceProp prop, const DeviceLimits* limits, UniqueLtHandle lt,
              std::unique_ptr<NvmlProbe> probe,
              std::vector<std::pair<std::string, double>> creation)
      : device_(device),
        prop_(prop),
        limits_(limits),
        lt_(std::move(lt)),
        probe_(std::move(probe)),
        creation_(std::move(creation)) {}

  std::vector<std::pair<std::string, double>> creation_seconds() const override {
    return creation_;
  }

  std::optional<uint64_t> driver_device_bytes() const override {
    if (probe_) return probe_->process_bytes();
    // Without NVML: the device's used memory (every process's).
    size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) {
      (void)cudaGetLastError();
      return std::nullopt;
    }
    return static_cast<uint64_t>(total - free);
  }
  std::string driver_device_bytes_method() const override {
    return probe_ ? probe_->method() : "cudaMemGetInfo (the whole device, NVML not found)";
  }
  uint64_t compute_stream_bytes() const override { return kWorkspaceBytes + kScratchBytes; }

  std::string_view name() const override { return "cuda"; }

  DeviceInfo info() const override {
    DeviceInfo i;
    i.name = prop_.name;
    i.total_bytes = prop_.totalGlobalMem;
    size_t stack = 0;
    if (cudaDeviceGetLimit(&stack, cudaLimitStackSize) == cudaSuccess) {
      i.thread_stack_bytes = stack;
    } else {
      (void)cudaGetLastError();
    }
    return i;
  }

  Result<RawDeviceMemory> device_alloc(size_t bytes) override {
    void* p = nullptr;
    const cudaError_t err = cudaMalloc(&p, bytes);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();  // allocation failures are not sticky; clear the error
      return make_error(
          err == cudaErrorMemoryAllocation ? ErrorCode::out_of_memory : ErrorCode::backend,
          "cuda: cannot allocate " + std::to_string(bytes) +
              " bytes of device memory: " + cudaGetErrorString(err));
    }
    return RawDeviceMemory{p, [](void* q) { (void)cudaFree(q); }};
  }

  // cudaHostRegisterReadOnly is what a read-only file mapping accepts (default flags are refused
  // for file mappings); the DMA engines then read the page cache at the link's full speed.
  HostRegistrationResult register_host(const void* data, size_t bytes) override {
    HostRegistrationResult r;
    if (bytes == 0) {
      r.registered = true;
      r.how = "nothing to register";
      return r;
    }
    void* p = const_cast<void*>(data);  // registration does not write; ReadOnly says so
    // The host tier registers pieces on threads of its own: make this backend's device theirs.
    if (const cudaError_t set = cudaSetDevice(device_); set != cudaSuccess) {
      (void)cudaGetLastError();
      r.how =
          std::string("cudaSetDevice before cudaHostRegister failed: ") + cudaGetErrorString(set);
      return r;
    }
    const cudaError_t err = cudaHostRegister(p, bytes, cudaHostRegisterReadOnly);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      r.how = std::string("cudaHostRegister(ReadOnly) refused: ") + cudaGetErrorString(err);
      return r;
    }
    r.handle = std::make_unique<CudaHostRegistration>(p);
    r.registered = true;
    // With unified addressing a kernel reads registered memory at its host address (the
    // in-place "map" path); the attribute says whether this device may.
    int in_place = 0;
    if (cudaDeviceGetAttribute(&in_place, cudaDevAttrCanUseHostPointerForRegisteredMem, device_) !=
        cudaSuccess) {
      (void)cudaGetLastError();
      in_place = 0;
    }
    r.readable_in_place = in_place != 0;
    r.how = "registered read-only (cudaHostRegister)";
    return r;
  }

  PlatformFacts platform_facts() const override {
    PlatformFacts f;
    f.device = prop_.name;
    f.integrated = device_flag(cudaDevAttrIntegrated, device_);
    f.pageable_memory_access = device_flag(cudaDevAttrPageableMemoryAccess, device_);
    f.pageable_uses_host_page_tables =
        device_flag(cudaDevAttrPageableMemoryAccessUsesHostPageTables, device_);
    f.host_pointer_for_registered =
        device_flag(cudaDevAttrCanUseHostPointerForRegisteredMem, device_);
    f.host_register_supported = device_flag(cudaDevAttrHostRegisterSupported, device_);
    f.host_register_read_only_supported =
        device_flag(cudaDevAttrHostRegisterReadOnlySupported, device_);
    f.copy_engines = prop_.asyncEngineCount;
    if (probe_) {
      const NvmlProbe::PcieLink link = probe_->pcie();
      f.pcie_generation = link.generation;
      f.pcie_width = link.width;
      f.pcie_max_generation = link.max_generation;
      f.pcie_max_width = link.max_width;
      if (link.generation || link.max_generation) f.pcie_source = "nvml";
    }
    if (f.pcie_source.empty()) {
      char bus_id[32] = {};
      if (cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, device_) == cudaSuccess) {
        pcie_from_sysfs(bus_id, f);
      } else {
        (void)cudaGetLastError();
      }
    }
    if (f.pcie_source.empty()) f.notes.push_back("PCIe link: neither NVML nor sysfs says");
    if (f.integrated.value_or(false)) {
      f.notes.push_back("integrated: device and host share one memory; there is no PCIe link");
    }
    return f;
  }

  std::vector<RegistrationTrial> try_host_registration(const void* data, size_t bytes) override {
    std::vector<RegistrationTrial> out;
    void* p = const_cast<void*>(data);  // registration does not write; ReadOnly says so
    const std::string file = "file mapping (read-only, shared)";
    out.push_back(try_register(p, bytes, cudaHostRegisterDefault, file, "default"));
    out.push_back(try_register(p, bytes, cudaHostRegisterReadOnly, file, "read-only"));
    // Anonymous memory, where registration is the ordinary case.
    const size_t anon_bytes = size_t{4} << 20;
    void* anon = std::aligned_alloc(4096, anon_bytes);
    if (anon != nullptr) {
      std::memset(anon, 0, anon_bytes);
      out.push_back(
          try_register(anon, anon_bytes, cudaHostRegisterDefault, "anonymous memory", "default"));
      std::free(anon);
    }
    return out;
  }

  Status read_reduce(Stream& stream, const void* src, size_t bytes, void* sum) override {
    auto& s = as_cuda(stream);
    if (s.capturing()) {
      return make_error(ErrorCode::invalid_argument, "cuda: a probe read cannot be recorded");
    }
    if (!s.error().ok()) return s.error();
    return launch_read_reduce(src, bytes, sum, prop_.multiProcessorCount, s.handle());
  }

  // A kernel touching pageable memory on a device without this attribute faults and poisons the
  // context (measured on the H200), so the answer must be the device's own.
  bool reads_pageable_host_memory() const override {
    int v = 0;
    if (cudaDeviceGetAttribute(&v, cudaDevAttrPageableMemoryAccess, device_) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    return v != 0;
  }

  // Page-locked, so that copies run at the link's speed (a pageable copy of the 71 MB of pixels
  // of the reference workload took 9.2 ms on the H200's PCIe Gen5 link).
  Result<HostBuffer> allocate_host(size_t bytes) override {
    void* p = nullptr;
    const cudaError_t err = cudaHostAlloc(&p, bytes == 0 ? 1 : bytes, cudaHostAllocDefault);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      return make_error(
          err == cudaErrorMemoryAllocation ? ErrorCode::out_of_memory : ErrorCode::backend,
          "cuda: cannot allocate " + std::to_string(bytes) +
              " bytes of page-locked host memory: " + cudaGetErrorString(err));
    }
    return HostBuffer(this, p, bytes);
  }

  // A compute stream takes its workspace and scratch from allocate(), so under a reservation
  // they count against the budget. Failing to get them is an error on the stream: cuBLASLt would
  // run without a workspace, but with other algorithms, and results must not depend on memory.
  std::unique_ptr<Stream> create_stream() override {
    auto s = make_stream();
    if (!s.ok()) {
      return std::make_unique<CudaStream>(UniqueStream(), DeviceBuffer(), DeviceBuffer(),
                                          s.status());
    }
    auto ws = allocate(kWorkspaceBytes, "cuBLASLt workspace");
    if (!ws.ok()) {
      return std::make_unique<CudaStream>(std::move(s).value(), DeviceBuffer(), DeviceBuffer(),
                                          ws.status());
    }
    auto scratch = allocate(kScratchBytes, "op scratch");
    if (!scratch.ok()) {
      return std::make_unique<CudaStream>(std::move(s).value(), DeviceBuffer(), DeviceBuffer(),
                                          scratch.status());
    }
    return std::make_unique<CudaStream>(std::move(s).value(), std::move(ws).value(),
                                        std::move(scratch).value(), Status());
  }

  std::unique_ptr<Stream> create_copy_stream() override {
    auto s = make_stream();
    if (!s.ok()) {
      return std::make_unique<CudaStream>(UniqueStream(), DeviceBuffer(), DeviceBuffer(),
                                          s.status());
    }
    return std::make_unique<CudaStream>(std::move(s).value(), DeviceBuffer(), DeviceBuffer(),
                                        Status());
  }

  std::unique_ptr<Event> create_event() override { return event_with(false); }
  std::unique_ptr<Event> create_timing_event() override { return event_with(true); }

  // cudaEventElapsedTime: both events need timing and a completed last record (not ready is an
  // error here, not a wait). Resolution is about half a microsecond.
  Result<double> elapsed_seconds(Event& start, Event& end) override {
    auto& a = as_cuda(start);
    auto& b = as_cuda(end);
    FERRY_RETURN_IF_ERROR(a.error());
    FERRY_RETURN_IF_ERROR(b.error());
    if (!a.timing() || !b.timing()) {
      return make_error(ErrorCode::invalid_argument,
                        "cuda: elapsed time asked of an event created without timing");
    }
    float ms = 0;
    const cudaError_t err = cudaEventElapsedTime(&ms, a.handle(), b.handle());
    if (err == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return make_error(
          ErrorCode::invalid_argument,
          "cuda: elapsed time of an event that has not completed (synchronize first)");
    }
    FERRY_CUDA_CHECK(err);
    return static_cast<double>(ms) * 1e-3;
  }

  std::optional<uint64_t> device_free_bytes() const override {
    size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) {
      (void)cudaGetLastError();
      return std::nullopt;
    }
    return static_cast<uint64_t>(free);
  }

  void copy_to_device(Stream& stream, void* dst, const void* host_src, size_t bytes) override {
    auto& s = as_cuda(stream);
    if (refuse_while_capturing(s, "a copy from the host")) return;
    if (bytes == 0 || !s.error().ok()) return;
    s.note(FERRY_CUDA_STATUS(
        cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, s.handle())));
  }

  void copy_to_host(Stream& stream, void* host_dst, const void* src, size_t bytes) override {
    auto& s = as_cuda(stream);
    if (refuse_while_capturing(s, "a copy to the host")) return;
    if (bytes == 0 || !s.error().ok()) return;
    s.note(FERRY_CUDA_STATUS(
        cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, s.handle())));
  }

  void copy_on_device(Stream& stream, void* dst, const void* src, size_t bytes) override {
    auto& s = as_cuda(stream);
    if (bytes == 0 || !s.error().ok()) return;
    s.note(
        FERRY_CUDA_STATUS(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s.handle())));
  }

  void fill_byte(Stream& stream, void* dst, uint8_t value, size_t bytes) override {
    auto& s = as_cuda(stream);
    if (bytes == 0 || !s.error().ok()) return;
    s.note(FERRY_CUDA_STATUS(cudaMemsetAsync(dst, value, bytes, s.handle())));
  }

  void fill_zero(Stream& stream, void* dst, size_t bytes) override {
    auto& s = as_cuda(stream);
    if (bytes == 0 || !s.error().ok()) return;
    s.note(FERRY_CUDA_STATUS(cudaMemsetAsync(dst, 0, bytes, s.handle())));
  }

  Status run(Stream& stream, const Op& op) override {
    FERRY_RETURN_IF_ERROR(validate(op));
    FERRY_RETURN_IF_ERROR(check_cuda_limits(op));
    auto& s = as_cuda(stream);
    if (!s.error().ok()) return s.error();  // a deferred error stops the stream's work
    OpContext ctx;
    ctx.stream = s.handle();
    ctx.lt = lt_.get();
    ctx.workspace = s.workspace();
    ctx.workspace_bytes = s.workspace_bytes();
    ctx.algo_cache = &algo_cache_;
    ctx.scratch = &s.scratch();
    ctx.limits = limits_;
    return run_cuda_op(ctx, op);
  }

  // decode_group_async with an error word of the stream's own (decode_word_chunks): the word is
  // read back by the next synchronize(stream), which turns the first fault into the stream's
  // error. A recording would replay decodes whose words nothing reads: refused. The kernel checks
  // the structure of the bytes (every offset, length and rANS state); unlike the CPU reference it
  // does not recompute the checksum.
  Status decode_group(Stream& stream, const compress::GroupLayout& layout, const void* compressed,
                      void* out, size_t out_capacity, std::string_view name) override {
    auto& s = as_cuda(stream);
    if (s.capturing()) {
      return make_error(ErrorCode::invalid_argument,
                        "cuda: the decode of group " + std::string(name) +
                            " cannot be recorded (its error word would not be checked)");
    }
    if (!s.error().ok()) return s.error();
    FERRY_RETURN_IF_ERROR(check_decode_arguments(layout, compressed, out, out_capacity, name));
    std::vector<DeviceBuffer>& chunks = s.decode_word_chunks();
    std::vector<std::string>& groups = s.decode_groups();
    const size_t i = groups.size();
    const size_t per = CudaStream::kDecodeWordsPerChunk;
    if (i / per >= chunks.size()) {
      FERRY_ASSIGN_OR_RETURN(DeviceBuffer chunk,
                             allocate(per * sizeof(DecodeErrorWord), "decode error words"));
      chunks.push_back(std::move(chunk));
    }
    auto* word = static_cast<DecodeErrorWord*>(chunks[i / per].data()) + i % per;
    groups.emplace_back(name);
    const Status st =
        decode_group_async(layout, static_cast<const uint8_t*>(compressed),
                           static_cast<uint8_t*>(out), out_capacity, word, s.handle());
    if (!st.ok()) {
      groups.pop_back();  // nothing was enqueued that writes the word
      return make_error(st.error().code, "group " + std::string(name) + ": " + st.error().message);
    }
    return Status();
  }

  Status begin_capture(Stream& stream) override {
    auto& s = as_cuda(stream);
    if (s.capturing()) return make_error(ErrorCode::invalid_argument, "cuda: already capturing");
    if (!s.error().ok()) return s.take_error();
    // Thread-local mode: only this thread's unsafe calls (cudaMalloc, ...) break the capture.
    FERRY_CUDA_CHECK(cudaStreamBeginCapture(s.handle(), cudaStreamCaptureModeThreadLocal));
    s.set_capturing(true);
    return Status();
  }

  Result<std::unique_ptr<Graph>> end_capture(Stream& stream) override {
    auto& s = as_cuda(stream);
    if (!s.capturing()) return make_error(ErrorCode::invalid_argument, "cuda: not capturing");
    s.set_capturing(false);
    cudaGraph_t g = nullptr;
    const cudaError_t end = cudaStreamEndCapture(s.handle(), &g);
    UniqueGraph graph(g);
    // Nothing recorded has run, so an error noted during the capture belongs to the capture.
    FERRY_RETURN_IF_ERROR(s.take_error());
    FERRY_CUDA_CHECK(end);
    cudaGraphExec_t exec = nullptr;
    FERRY_CUDA_CHECK(cudaGraphInstantiate(&exec, graph.get(), 0));
    return std::unique_ptr<Graph>(
        std::make_unique<CudaGraph>(std::move(graph), UniqueGraphExec(exec)));
  }

  Status launch(Stream& stream, const Graph& graph) override {
    auto& s = as_cuda(stream);
    const auto* g = dynamic_cast<const CudaGraph*>(&graph);
    if (g == nullptr) {
      return make_error(ErrorCode::invalid_argument,
                        "cuda: graph was not recorded by this backend");
    }
    if (!s.error().ok()) return s.error();
    FERRY_CUDA_CHECK(cudaGraphLaunch(g->exec(), s.handle()));
    return Status();
  }

  void record(Event& event, Stream& stream) override {
    auto& s = as_cuda(stream);
    if (refuse_while_capturing(s, "an event record")) return;
    auto& e = as_cuda(event);
    if (!e.error().ok()) return s.note(e.error());
    if (!s.error().ok()) return;
    s.note(FERRY_CUDA_STATUS(cudaEventRecord(e.handle(), s.handle())));
  }

  void wait(Stream& stream, Event& event) override {
    auto& s = as_cuda(stream);
    if (refuse_while_capturing(s, "an event wait")) return;
    auto& e = as_cuda(event);
    if (!e.error().ok()) return s.note(e.error());
    if (!s.error().ok()) return;
    s.note(FERRY_CUDA_STATUS(cudaStreamWaitEvent(s.handle(), e.handle(), 0)));
  }

  Status synchronize(Stream& stream) override {
    auto& s = as_cuda(stream);
    if (s.capturing()) {
      return make_error(ErrorCode::invalid_argument, "cuda: synchronize on a capturing stream");
    }
    if (s.handle() == nullptr) return s.error();
    const Status sync = FERRY_CUDA_STATUS(cudaStreamSynchronize(s.handle()));
    Status first = s.take_error();
    const Status decodes = sync.ok() ? take_decode_errors(s) : Status();
    s.decode_groups().clear();
    if (!first.ok()) return first;
    if (!sync.ok()) return sync;
    return decodes;
  }

  // The first fault among the error words of the decodes since the last synchronize (the stream
  // has run them), named after its group.
  static Status take_decode_errors(CudaStream& s) {
    const std::vector<std::string>& groups = s.decode_groups();
    const size_t per = CudaStream::kDecodeWordsPerChunk;
    std::vector<DecodeErrorWord> words(per);
    for (size_t c = 0; c * per < groups.size(); ++c) {
      const size_t n = std::min(per, groups.size() - c * per);
      FERRY_CUDA_CHECK(cudaMemcpy(words.data(), s.decode_word_chunks()[c].data(),
                                  n * sizeof(DecodeErrorWord), cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < n; ++i) {
        const Status st = decode_error_status(words[i]);
        if (!st.ok()) {
          return make_error(st.error().code,
                            "group " + groups[c * per + i] + ": " + st.error().message);
        }
      }
    }
    return Status();
  }

  Status synchronize(Event& event) override {
    auto& e = as_cuda(event);
    if (!e.error().ok()) return e.error();
    return FERRY_CUDA_STATUS(cudaEventSynchronize(e.handle()));
  }

 protected:
  void free_host(void* data, size_t) override { (void)cudaFreeHost(data); }

  static std::unique_ptr<Event> event_with(bool timing) {
    auto e = make_event(timing);
    if (!e.ok()) return std::make_unique<CudaEvent>(UniqueEvent(), e.status(), timing);
    return std::make_unique<CudaEvent>(std::move(e).value(), Status(), timing);
  }

 private:
  int device_ = 0;
  cudaDeviceProp prop_{};
  const DeviceLimits* limits_ = nullptr;  // read at creation; what the launchers size kernels by
  UniqueLtHandle lt_;
  LinearAlgoCache algo_cache_;
  std::unique_ptr<NvmlProbe> probe_;  // may be null
  std::vector<std::pair<std::string, double>> creation_;
};

bool cuda_available() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return n > 0;
}

Result<std::unique_ptr<Backend>> create_cuda_backend() {
  // Each step timed: what a fast start spends here (`run --json`: start.backend_parts).
  std::vector<std::pair<std::string, double>> creation;
  auto t = std::chrono::steady_clock::now();
  auto step = [&](const char* name) {
    const auto now = std::chrono::steady_clock::now();
    creation.emplace_back(name, std::chrono::duration<double>(now - t).count());
    t = now;
  };
  if (!cuda_available()) {
    return make_error(ErrorCode::unsupported, "cuda: no CUDA device is visible");
  }
  step("driver");
  const int device = 0;
  // The outside view of device memory, opened before this process has a context on the device
  // so that its baseline is what others use.
  char bus_id[32] = {};
  std::unique_ptr<NvmlProbe> probe;
  if (cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, device) == cudaSuccess) {
    probe = NvmlProbe::open(bus_id);
  } else {
    (void)cudaGetLastError();
  }
  step("nvml");
  // The card's limits, before a context is made: a card ferry cannot run on is refused here, in
  // one line that names it.
  FERRY_ASSIGN_OR_RETURN(const DeviceLimits* limits, device_limits(device));
  if (limits->cc_major < kMinComputeMajor) return check_device_supported(*limits).error();
  FERRY_CUDA_CHECK(cudaSetDevice(device));
  FERRY_CUDA_CHECK(cudaFree(nullptr));  // the primary context, made now if cudaSetDevice did not
  // This binary's code for the card (SASS or PTX the driver can JIT-compile).
  FERRY_RETURN_IF_ERROR(check_device_supported(*limits));
  // The context reserves local memory for every thread the device can hold at the per-thread
  // stack limit (1 KiB by default: ~260 MiB on a 132-SM H200), all of it inside the budget.
  // The driver grows the limit at a launch that needs more (cuCtxSetLimit's contract), so start
  // from a small one. The bytes this saves are measured by bench/context_memory.cpp; bench
  // reports the limit after its runs, which shows whether a launch grew it. A refusal only costs
  // memory: the default stays.
  if (cudaDeviceSetLimit(cudaLimitStackSize, kThreadStackBytes) != cudaSuccess) {
    (void)cudaGetLastError();
  }
  step("context");
  cudaDeviceProp prop{};
  FERRY_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  step("properties");
  // Ops run through the backend take scratch from their stream's ScratchStack. Kernels launched on
  // a bare stream (op tests, micro-benchmarks) take it from the device's default memory pool in
  // stream order instead; for them, keep up to kPoolRetainBytes cached across
  // synchronizations: with the default threshold of 0 every sync returns the memory to the
  // driver and the next cudaMallocAsync maps it again (~100 us measured on the H200).
  cudaMemPool_t pool = nullptr;
  FERRY_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device));
  uint64_t retain = kPoolRetainBytes;
  FERRY_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &retain));
  step("memory pool");
  FERRY_ASSIGN_OR_RETURN(UniqueLtHandle lt, make_lt_handle());
  step("cublaslt");
  return std::unique_ptr<Backend>(std::make_unique<CudaBackend>(
      device, prop, limits, std::move(lt), std::move(probe), std::move(creation)));
}

}  // namespace

cudaStream_t stream_handle(Stream& stream) {
  auto* s = dynamic_cast<CudaStream*>(&stream);
  return s != nullptr ? s->handle() : nullptr;
}

}  // namespace cuda

BackendFactory cuda_backend_factory() {
  BackendFactory f;
  f.available = &cuda::cuda_available;
  f.create = &cuda::create_cuda_backend;
  return f;
}

}  // namespace ferry
