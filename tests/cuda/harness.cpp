#include "harness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <sstream>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "core/bf16.h"

namespace ferry::cuda_test {
namespace {

constexpr size_t kGuardBytes = 256;
constexpr uint8_t kGuardByte = 0xA5;

std::vector<CaseResult>& table() {
  static std::vector<CaseResult> rows;
  return rows;
}

double element(const Buffer& b, const std::vector<uint8_t>& bytes, int64_t i) {
  const uint8_t* p = bytes.data() + i * static_cast<int64_t>(dtype_size(b.dtype));
  switch (b.dtype) {
    case DType::bf16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return bf16_to_f32(v);
    }
    case DType::f32: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::i32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    default:
      return 0.0;
  }
}

struct RunOutput {
  Status status;
  std::vector<std::vector<uint8_t>> images;  // every buffer incl. guard, after the op
  bool guard_ok = true;
};

// Runs the case with every buffer placed `offset` bytes into its allocation.
RunOutput run_on(Backend& be, Stream& stream, const Case& c, size_t offset = 0) {
  RunOutput out;
  std::vector<DeviceBuffer> bufs;
  std::vector<TensorView> views;
  for (const Buffer& b : c.buffers) {
    const size_t bytes = b.host.size();
    auto mem = be.allocate(offset + bytes + kGuardBytes);
    if (!mem.ok()) {
      out.status = mem.error();
      return out;
    }
    std::vector<uint8_t> image(b.host);
    image.resize(bytes + kGuardBytes, kGuardByte);
    void* base = static_cast<uint8_t*>(mem->data()) + offset;
    be.copy_to_device(stream, base, image.data(), image.size());
    FERRY_CHECK(be.synchronize(stream).ok(), "harness: upload failed");
    views.push_back(make_view(base, b.dtype, b.rows, b.cols, b.stride));
    bufs.push_back(std::move(mem).value());
  }
  out.status = be.run(stream, c.make(views));
  if (!out.status.ok()) return out;
  for (size_t i = 0; i < bufs.size(); ++i) {
    std::vector<uint8_t> image(c.buffers[i].host.size() + kGuardBytes);
    be.copy_to_host(stream, image.data(), views[i].data, image.size());
    out.status = be.synchronize(stream);
    if (!out.status.ok()) return out;
    for (size_t g = c.buffers[i].host.size(); g < image.size(); ++g) {
      if (image[g] != kGuardByte) out.guard_ok = false;
    }
    out.images.push_back(std::move(image));
  }
  return out;
}

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

}  // namespace

std::string Tolerance::describe() const {
  if (atol == 0.0 && rtol == 0.0) return "exact";
  return "a=" + fmt(atol) + " r=" + fmt(rtol);
}

int Case::add(DType dtype, int64_t rows, int64_t cols, std::vector<uint8_t> host, bool output,
              int64_t stride) {
  Buffer b;
  b.dtype = dtype;
  b.rows = rows;
  b.cols = cols;
  b.stride = stride == 0 ? cols : stride;
  b.host = std::move(host);
  b.output = output;
  FERRY_CHECK(b.host.size() == static_cast<size_t>(rows * b.stride) * dtype_size(dtype),
              "harness: buffer size does not match rows * stride");
  buffers.push_back(std::move(b));
  return static_cast<int>(buffers.size() - 1);
}

std::vector<uint8_t> Rng::uniform(DType dtype, int64_t count, float scale) {
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<uint8_t> out(static_cast<size_t>(count) * dtype_size(dtype));
  for (int64_t i = 0; i < count; ++i) {
    const float v = dist(gen_);
    if (dtype == DType::bf16) {
      const uint16_t b = f32_to_bf16(v);
      std::memcpy(out.data() + i * 2, &b, 2);
    } else {
      std::memcpy(out.data() + i * 4, &v, 4);
    }
  }
  return out;
}

std::vector<uint8_t> Rng::ints(int64_t count, int32_t hi, bool distinct) {
  std::vector<int32_t> v(static_cast<size_t>(count));
  if (distinct) {
    std::vector<int32_t> all(static_cast<size_t>(hi));
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), gen_);
    std::copy_n(all.begin(), count, v.begin());
  } else {
    std::uniform_int_distribution<int32_t> dist(0, hi - 1);
    for (auto& x : v) x = dist(gen_);
  }
  std::vector<uint8_t> out(v.size() * 4);
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

std::vector<uint8_t> pattern_bytes(DType dtype, int64_t count) {
  // 0x7F7F.. is a large finite value in bf16 and f32: an unwritten element shows as a mismatch.
  return std::vector<uint8_t>(static_cast<size_t>(count) * dtype_size(dtype), 0x7F);
}

Result<std::unique_ptr<Graph>> record(Backend& backend, Stream& stream,
                                      const std::function<Status()>& body) {
  FERRY_RETURN_IF_ERROR(backend.begin_capture(stream));
  const Status body_status = body();
  Result<std::unique_ptr<Graph>> graph = backend.end_capture(stream);
  if (!body_status.ok()) return body_status.error();
  return graph;
}

Backends* backends(std::string* why_not) {
  static Backends* b = []() -> Backends* {
    auto factory = cuda_backend_factory();
    if (!factory.available()) return nullptr;
    auto cuda = factory.create();
    if (!cuda.ok()) {
      std::fprintf(stderr, "cuda backend: %s\n", cuda.error().to_string().c_str());
      return nullptr;
    }
    auto* r = new Backends;
    r->cuda = std::move(cuda).value();
    r->cpu = create_cpu_backend();
    r->cpu_stream = r->cpu->create_stream();
    r->cuda_stream = r->cuda->create_stream();
    return r;
  }();
  if (b == nullptr && why_not != nullptr) *why_not = "no usable CUDA device";
  return b;
}

CaseResult run_case(const Case& c) {
  CaseResult r;
  r.op = c.op;
  r.shape = c.shape;
  r.tol = c.tol.describe();
  Backends* be = backends(nullptr);
  FERRY_CHECK(be != nullptr, "harness: run_case without a CUDA device");

  const RunOutput ref = run_on(*be->cpu, *be->cpu_stream, c);
  if (!ref.status.ok()) {
    r.error = "cpu: " + ref.status.error().to_string();
    table().push_back(r);
    return r;
  }
  const RunOutput a = run_on(*be->cuda, *be->cuda_stream, c);
  if (!a.status.ok()) {
    r.error = "cuda: " + a.status.error().to_string();
    table().push_back(r);
    return r;
  }
  const RunOutput b = run_on(*be->cuda, *be->cuda_stream, c);
  r.ran = b.status.ok();
  r.guard_ok = a.guard_ok && b.guard_ok;
  r.deterministic = r.ran && a.images == b.images;
  r.match = true;
  for (size_t i = 0; i < c.buffers.size(); ++i) {
    const Buffer& buf = c.buffers[i];
    // Inputs must come back untouched, outputs within tolerance (gaps between rows untouched).
    const Tolerance tol = buf.output ? c.tol : Tolerance{};
    const int64_t n = buf.rows * buf.stride;
    for (int64_t e = 0; e < n; ++e) {
      const double want = element(buf, ref.images[i], e);
      const double got = element(buf, a.images[i], e);
      if (std::isnan(want) || std::isnan(got)) {
        if (std::isnan(want) != std::isnan(got)) ++r.bad;
        continue;
      }
      const double err = std::fabs(got - want);
      const double rel = err / std::max(std::fabs(want), 1e-30);
      if (buf.output) {
        r.max_abs = std::max(r.max_abs, err);
        if (err > 0) r.max_rel = std::max(r.max_rel, rel);
      }
      if (err > tol.atol + tol.rtol * std::fabs(want)) ++r.bad;
    }
  }
  r.match = r.bad == 0;
  table().push_back(r);
  return r;
}

bool placement_invariant(const Case& c, size_t offset, std::string* why) {
  Backends* be = backends(nullptr);
  FERRY_CHECK(be != nullptr, "harness: placement_invariant without a CUDA device");
  const RunOutput a = run_on(*be->cuda, *be->cuda_stream, c, 0);
  const RunOutput b = run_on(*be->cuda, *be->cuda_stream, c, offset);
  if (!a.status.ok() || !b.status.ok()) {
    *why = (!a.status.ok() ? a.status : b.status).error().to_string();
    return false;
  }
  if (a.images != b.images) {
    *why = "outputs differ when the buffers move by " + std::to_string(offset) + " bytes";
    return false;
  }
  return true;
}

bool same_cuda_bits(const Case& a, const Case& b, std::string* why) {
  Backends* be = backends(nullptr);
  FERRY_CHECK(be != nullptr, "harness: same_cuda_bits without a CUDA device");
  const RunOutput ra = run_on(*be->cuda, *be->cuda_stream, a);
  const RunOutput rb = run_on(*be->cuda, *be->cuda_stream, b);
  if (!ra.status.ok() || !rb.status.ok()) {
    *why = (!ra.status.ok() ? ra.status : rb.status).error().to_string();
    return false;
  }
  if (ra.images != rb.images) {
    *why = "the two forms give different bytes";
    return false;
  }
  return true;
}

CudaRun run_cuda(const Case& c) {
  Backends* be = backends(nullptr);
  FERRY_CHECK(be != nullptr, "harness: run_cuda without a CUDA device");
  RunOutput r = run_on(*be->cuda, *be->cuda_stream, c);
  CudaRun out;
  out.status = r.status;
  out.guard_ok = r.guard_ok;
  for (size_t i = 0; i < r.images.size(); ++i) {
    r.images[i].resize(c.buffers[i].host.size());
    out.images.push_back(std::move(r.images[i]));
  }
  return out;
}

void expect_pass(const Case& c) {
  const CaseResult r = run_case(c);
  EXPECT_TRUE(r.pass()) << c.op << " " << c.shape << ": " << r.error << " bad=" << r.bad
                        << " max_abs=" << r.max_abs << " guard=" << r.guard_ok
                        << " det=" << r.deterministic;
}

std::vector<uint8_t> run_linear_direct(Backend& be, Stream& stream, const Case& c,
                                       const std::function<Status(const Linear&)>& run) {
  std::vector<DeviceBuffer> bufs;
  std::vector<TensorView> views;
  for (const Buffer& b : c.buffers) {
    auto mem = be.allocate(b.host.size());
    EXPECT_TRUE(mem.ok());
    if (!mem.ok()) return {};
    be.copy_to_device(stream, mem->data(), b.host.data(), b.host.size());
    views.push_back(make_view(mem->data(), b.dtype, b.rows, b.cols, b.stride));
    bufs.push_back(std::move(mem).value());
  }
  const Op op = c.make(views);
  const Status st = run(std::get<Linear>(op));
  EXPECT_TRUE(st.ok()) << st.error().to_string();
  std::vector<uint8_t> y(c.buffers.back().host.size());
  be.copy_to_host(stream, y.data(), views.back().data, y.size());
  const Status sy = be.synchronize(stream);
  EXPECT_TRUE(sy.ok()) << sy.error().to_string();
  return y;
}

void print_table() {
  if (table().empty()) return;
  std::printf("\n%-16s %-46s %10s %10s %-18s %-6s %-5s %-5s\n", "op", "shape", "max_abs", "max_rel",
              "tolerance", "result", "guard", "det");
  int failed = 0;
  for (const CaseResult& r : table()) {
    std::printf("%-16s %-46s %10s %10s %-18s %-6s %-5s %-5s\n", r.op.c_str(), r.shape.c_str(),
                fmt(r.max_abs).c_str(), fmt(r.max_rel).c_str(), r.tol.c_str(),
                r.pass() ? "PASS" : "FAIL", r.guard_ok ? "ok" : "BAD",
                r.deterministic ? "ok" : "DIFF");
    if (!r.error.empty()) std::printf("    error: %s\n", r.error.c_str());
    if (r.bad > 0)
      std::printf("    %lld elements out of tolerance\n", static_cast<long long>(r.bad));
    if (!r.pass()) ++failed;
  }
  std::printf("%zu cases, %d failed\n", table().size(), failed);
}

namespace {
class TableEnvironment : public ::testing::Environment {
 public:
  void TearDown() override { print_table(); }
};
[[maybe_unused]] ::testing::Environment* const g_table_env =
    ::testing::AddGlobalTestEnvironment(new TableEnvironment);
}  // namespace

}  // namespace ferry::cuda_test
