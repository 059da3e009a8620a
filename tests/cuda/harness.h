// The CUDA op harness: runs one op on the CPU backend (the reference) and on the CUDA backend
// over the same inputs, compares every output buffer with a per-op tolerance, checks the guard
// bytes written after every buffer, and checks that two CUDA runs give identical bytes. Results
// are collected into a table printed when the test program ends.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace ferry::cuda_test {

// |cuda − cpu| <= atol + rtol·|cpu| for every element (NaN must match NaN). {0, 0} = bit-exact.
struct Tolerance {
  double atol = 0.0;
  double rtol = 0.0;
  std::string describe() const;
};

// One buffer of a case: its host contents (rows · stride elements) and whether it is an output.
struct Buffer {
  DType dtype = DType::bf16;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t stride = 0;
  std::vector<uint8_t> host;
  bool output = false;
};

struct Case {
  std::string op;     // "linear"
  std::string shape;  // "M=7 N=33 K=13 silu bias x=f32"
  std::vector<Buffer> buffers;
  // Builds the op from views of the buffers (same order as `buffers`), on either backend.
  std::function<Op(const std::vector<TensorView>&)> make;
  Tolerance tol;

  // Adds a buffer and returns its index.
  int add(DType dtype, int64_t rows, int64_t cols, std::vector<uint8_t> host, bool output,
          int64_t stride = 0);
};

// Deterministic host data.
class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  // rows·stride values uniform in [-scale, scale], stored as dtype (bf16 values rounded).
  std::vector<uint8_t> uniform(DType dtype, int64_t count, float scale = 1.0f);
  // count i32 values in [0, hi); distinct when asked (hi >= count).
  std::vector<uint8_t> ints(int64_t count, int32_t hi, bool distinct = false);
  std::mt19937_64& gen() { return gen_; }

 private:
  std::mt19937_64 gen_;
};

// A buffer pre-filled with a recognizable pattern (outputs that the op should overwrite).
std::vector<uint8_t> pattern_bytes(DType dtype, int64_t count);

struct CaseResult {
  std::string op, shape, tol;
  double max_abs = 0, max_rel = 0;
  int64_t bad = 0;  // elements out of tolerance
  bool ran = false, match = false, guard_ok = false, deterministic = false;
  std::string error;
  bool pass() const { return ran && match && guard_ok && deterministic; }
};

// The two backends under test, created once.
struct Backends {
  std::unique_ptr<Backend> cpu, cuda;
  std::unique_ptr<Stream> cpu_stream, cuda_stream;
};
// nullptr (and a reason) when there is no CUDA device.
Backends* backends(std::string* why_not);

// Runs the case on both backends, records a row in the table, returns it.
CaseResult run_case(const Case& c);

// Prints the table of every case run so far.
void print_table();

// True when the CUDA outputs are the same bytes with every buffer moved `offset` bytes (a
// multiple of 256: weights resident vs in a streaming slot) from where a first run had them.
bool placement_invariant(const Case& c, size_t offset, std::string* why);

// True when two cases over the same buffer contents give the same CUDA bytes in every buffer
// (one op in two forms that must agree bit for bit, e.g. q_pos0 on the device or the host).
bool same_cuda_bits(const Case& a, const Case& b, std::string* why);

// Runs the case on CUDA only (no reference): the op's status (or the synchronize error), whether
// the guard bytes survived, and every buffer's bytes after the op. For ops whose CPU reference
// refuses the inputs (hostile device data) and for comparing two CUDA runs bit for bit.
struct CudaRun {
  Status status;
  bool guard_ok = true;
  std::vector<std::vector<uint8_t>> images;  // per buffer, host.size() bytes
};
CudaRun run_cuda(const Case& c);

// run_case plus a gtest expectation that the case passed.
void expect_pass(const Case& c);

// Uploads a linear case's buffers to `be`, calls `run` on the op built over them (a launcher
// called directly, e.g. one launch config), and returns the last buffer's bytes (y). Failures
// are gtest expectations.
std::vector<uint8_t> run_linear_direct(Backend& be, Stream& stream, const Case& c,
                                       const std::function<Status(const Linear&)>& run);

// Records what `body` enqueues on `stream` into a graph through Backend::begin_capture /
// end_capture, as the executor records a call (exec/executor.cpp): the capture is ended whatever
// `body` returns, so the stream stays usable, and the body's error comes before the capture's.
Result<std::unique_ptr<Graph>> record(Backend& backend, Stream& stream,
                                      const std::function<Status()>& body);

inline constexpr Tolerance kExact{0.0, 0.0};
inline constexpr Tolerance kBf16Reduce{1.0 / 512, 1.0 / 64};
inline constexpr Tolerance kF32Reduce{1e-4, 1e-4};

inline std::string s(int64_t v) {
  return std::to_string(v);
}
inline const char* dt(DType d) {
  return d == DType::bf16 ? "bf16" : "f32";
}

}  // namespace ferry::cuda_test

// Skips the calling test when the machine has no CUDA device (CI).
#define SKIP_WITHOUT_CUDA()                                     \
  do {                                                          \
    std::string ferry_why_;                                     \
    if (::ferry::cuda_test::backends(&ferry_why_) == nullptr) { \
      GTEST_SKIP() << ferry_why_;                               \
    }                                                           \
  } while (0)
