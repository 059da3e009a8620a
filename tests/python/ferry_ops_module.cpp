// ferry_ops: every CPU op on numpy arrays, for the float64 reference tests in test_ops.py.
//
// Each call goes through the real backend: inputs are copied into backend buffers on a stream,
// the op is validated and enqueued with Backend::run, outputs are copied back and the stream is
// synchronized. Arrays are 2-D; bf16 is numpy's ml_dtypes.bfloat16 (uint16 bit patterns are also
// accepted); f32 is float32; indices are int32. A 2-D input may have a row stride (a column slice
// of a wider array); it reaches the op as a view with that row_stride. Every output buffer is
// followed by guard bytes that must survive the op. Validation errors raise ValueError; errors
// reported by synchronize raise RuntimeError.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"

namespace py = pybind11;

namespace ferry {
namespace {

constexpr size_t kGuardBytes = 64;
constexpr uint8_t kGuard = 0xa5;

DType parse_out_dtype(const std::string& name) {
  if (name == "bf16") return DType::bf16;
  if (name == "f32") return DType::f32;
  throw py::value_error("dtype must be 'bf16' or 'f32', got '" + name + "'");
}

Activation parse_act(const std::string& name) {
  if (name == "none") return Activation::none;
  if (name == "silu") return Activation::silu;
  if (name == "gelu_tanh") return Activation::gelu_tanh;
  if (name == "gelu_erf") return Activation::gelu_erf;
  throw py::value_error("unknown activation '" + name + "'");
}

py::dtype numpy_dtype(DType t) {
  switch (t) {
    case DType::bf16:
      return py::dtype::from_args(py::module_::import("ml_dtypes").attr("bfloat16"));
    case DType::f32:
      return py::dtype::of<float>();
    case DType::i32:
      return py::dtype::of<int32_t>();
    default:
      throw py::type_error("no numpy dtype for " + std::string(dtype_name(t)));
  }
}

DType dtype_of(const py::array& a) {
  const std::string name = py::str(a.dtype());
  if (name == "bfloat16" || name == "uint16") return DType::bf16;
  if (name == "float32") return DType::f32;
  if (name == "int32") return DType::i32;
  throw py::type_error("unsupported array dtype " + name + " (want bfloat16, float32 or int32)");
}

// One backend and one stream; buffers live for one op call.
class Session {
 public:
  explicit Session(CpuBackendOptions opt) : options_(opt) {
    backend_ = create_cpu_backend(opt);
    stream_ = backend_->create_stream();
  }

  int threads() const { return options_.threads; }

  // Copies a 2-D array (its row stride kept) into a new buffer; returns the view of it.
  TensorView upload(const py::array& a, const char* arg) {
    if (a.ndim() != 2) throw py::value_error(std::string(arg) + ": expected a 2-D array");
    const DType t = dtype_of(a);
    const auto item = static_cast<int64_t>(a.itemsize());
    const int64_t rows = a.shape(0);
    const int64_t cols = a.shape(1);
    int64_t stride = cols;
    if (rows > 0 && cols > 1 && a.strides(1) != item) {
      throw py::value_error(std::string(arg) + ": columns must be contiguous");
    }
    if (rows > 1) {
      if (a.strides(0) % item != 0 || a.strides(0) < cols * item) {
        throw py::value_error(std::string(arg) + ": unsupported row stride");
      }
      stride = a.strides(0) / item;
    }
    const size_t span = rows == 0 ? 0 : static_cast<size_t>(((rows - 1) * stride + cols) * item);
    void* data = new_buffer(span, false);
    backend_->copy_to_device(*stream_, data, a.data(), span);
    keep_.push_back(a);  // the host array must outlive the asynchronous copy
    return make_view(data, t, rows, cols, stride == cols ? 0 : stride);
  }

  // A new output buffer, filled with guard bytes, followed by kGuardBytes more.
  TensorView output(DType t, int64_t rows, int64_t cols) {
    void* data = new_buffer(static_cast<size_t>(rows * cols) * dtype_size(t), true);
    return make_view(data, t, rows, cols);
  }

  void run(const Op& op) {
    Status s = backend_->run(*stream_, op);
    if (!s.ok()) throw py::value_error(s.error().to_string());
  }

  // Copies a view back into a new contiguous numpy array (after synchronizing).
  py::array download(const TensorView& v) {
    const size_t item = dtype_size(v.dtype);
    const size_t span =
        v.rows == 0 ? 0 : static_cast<size_t>((v.rows - 1) * v.stride() + v.cols) * item;
    std::vector<uint8_t> host(span);
    backend_->copy_to_host(*stream_, host.data(), v.data, span);
    sync();
    py::array out(numpy_dtype(v.dtype), std::vector<py::ssize_t>{v.rows, v.cols});
    for (int64_t r = 0; r < v.rows; ++r) {
      std::memcpy(
          static_cast<uint8_t*>(out.mutable_data()) + static_cast<size_t>(r * v.cols) * item,
          host.data() + static_cast<size_t>(r * v.stride()) * item,
          static_cast<size_t>(v.cols) * item);
    }
    return out;
  }

  // Synchronizes, checks every guard region, and releases the call's buffers.
  void finish() {
    sync();
    for (const auto& g : guards_) {
      std::vector<uint8_t> bytes(kGuardBytes);
      backend_->copy_to_host(*stream_, bytes.data(), g, kGuardBytes);
      sync();
      for (uint8_t b : bytes) {
        if (b != kGuard) throw std::runtime_error("an op wrote past the end of its output");
      }
    }
    guards_.clear();
    buffers_.clear();
    keep_.clear();
  }

 private:
  void sync() {
    Status s = backend_->synchronize(*stream_);
    if (!s.ok()) {
      guards_.clear();
      buffers_.clear();
      keep_.clear();
      throw std::runtime_error(s.error().to_string());
    }
  }

  void* new_buffer(size_t bytes, bool guarded) {
    auto r = backend_->allocate(bytes + (guarded ? kGuardBytes : 0));
    if (!r.ok()) throw std::runtime_error(r.error().to_string());
    buffers_.push_back(std::move(r).value());
    void* data = buffers_.back().data();
    if (guarded) {
      pattern_.assign(bytes + kGuardBytes, kGuard);
      backend_->copy_to_device(*stream_, data, pattern_.data(), pattern_.size());
      sync();  // pattern_ is reused by the next output
      guards_.push_back(static_cast<uint8_t*>(data) + bytes);
    }
    return data;
  }

  CpuBackendOptions options_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Stream> stream_;
  std::vector<DeviceBuffer> buffers_;
  std::vector<void*> guards_;
  std::vector<py::array> keep_;
  std::vector<uint8_t> pattern_;
};

std::unique_ptr<Session>& session() {
  static std::unique_ptr<Session> s = std::make_unique<Session>(CpuBackendOptions{});
  return s;
}

// Runs one op whose outputs are `outs`, returning them as numpy arrays.
py::object finish_with(Session& s, const std::vector<TensorView>& outs) {
  std::vector<py::array> arrays;
  for (const auto& v : outs) arrays.push_back(s.download(v));
  s.finish();
  if (arrays.size() == 1) return arrays[0];
  return py::tuple(py::cast(arrays));
}

py::object linear(const py::array& x, const py::array& w, const std::optional<py::array>& bias,
                  const std::string& out_dtype, const std::string& act) {
  Session& s = *session();
  Linear op;
  op.x = s.upload(x, "x");
  op.w = s.upload(w, "w");
  if (bias) op.bias = s.upload(*bias, "bias");
  op.y = s.output(parse_out_dtype(out_dtype), op.x.rows, op.w.rows);
  op.act = parse_act(act);
  s.run(op);
  return finish_with(s, {op.y});
}

py::object rms_norm(const py::array& x, const py::array& w, int64_t dim, float eps, bool in_place) {
  Session& s = *session();
  RmsNorm op;
  op.x = s.upload(x, "x");
  op.w = s.upload(w, "w");
  op.y = in_place ? op.x : s.output(op.x.dtype, op.x.rows, op.x.cols);
  op.dim = dim > 0 ? dim : op.x.cols;
  op.eps = eps;
  s.run(op);
  return finish_with(s, {op.y});
}

py::object layer_norm(const py::array& x, const py::array& w, const py::array& b, float eps,
                      const std::string& out_dtype) {
  Session& s = *session();
  LayerNorm op;
  op.x = s.upload(x, "x");
  op.w = s.upload(w, "w");
  op.b = s.upload(b, "b");
  op.y =
      s.output(out_dtype.empty() ? op.x.dtype : parse_out_dtype(out_dtype), op.x.rows, op.x.cols);
  op.eps = eps;
  s.run(op);
  return finish_with(s, {op.y});
}

py::object rope(const py::array& x, const py::array& cos, const py::array& sin, int num_heads,
                int head_dim, const std::string& math) {
  Session& s = *session();
  Rope op;
  op.x = s.upload(x, "x");
  op.cos = s.upload(cos, "cos");
  op.sin = s.upload(sin, "sin");
  op.num_heads = num_heads;
  op.head_dim = head_dim;
  if (math != "bf16" && math != "f32") throw py::value_error("math must be 'bf16' or 'f32'");
  op.math = math == "bf16" ? RopeMath::bf16 : RopeMath::f32;
  s.run(op);
  return finish_with(s, {op.x});
}

py::object rope_table(const py::array& pos, int head_dim, float theta,
                      const std::array<int, 3>& sections) {
  Session& s = *session();
  RopeTable op;
  op.pos = s.upload(pos, "pos");
  op.cos = s.output(DType::f32, op.pos.rows, head_dim / 2);
  op.sin = s.output(DType::f32, op.pos.rows, head_dim / 2);
  op.head_dim = head_dim;
  op.theta = theta;
  op.sections = sections;
  s.run(op);
  return finish_with(s, {op.cos, op.sin});
}

// The attention op both bindings below build: q, one or two k/v spans, the output, the heads.
Attention attention_op(Session& s, const py::array& q, const py::array& k, const py::array& v,
                       int num_heads, int num_kv_heads, int head_dim, float scale, bool causal,
                       const std::optional<py::array>& k2, const std::optional<py::array>& v2) {
  Attention op;
  op.q = s.upload(q, "q");
  op.kv[0] = {s.upload(k, "k"), s.upload(v, "v")};
  op.num_spans = 1;
  if (k2 || v2) {
    if (!k2 || !v2) throw py::value_error("k2 and v2 go together");
    op.kv[1] = {s.upload(*k2, "k2"), s.upload(*v2, "v2")};
    op.num_spans = 2;
  }
  op.out = s.output(DType::bf16, op.q.rows, op.q.cols);
  op.num_heads = num_heads;
  op.num_kv_heads = num_kv_heads;
  op.head_dim = head_dim;
  op.scale = scale;
  op.causal = causal;
  return op;
}

py::object attention(const py::array& q, const py::array& k, const py::array& v, int num_heads,
                     int num_kv_heads, int head_dim, float scale, bool causal, int64_t q_pos0,
                     const std::optional<py::array>& k2, const std::optional<py::array>& v2,
                     const std::optional<py::array>& q_pos0_dev) {
  Session& s = *session();
  Attention op = attention_op(s, q, k, v, num_heads, num_kv_heads, head_dim, scale, causal, k2, v2);
  op.q_pos0 = q_pos0;
  if (q_pos0_dev) op.q_pos0_dev = s.upload(*q_pos0_dev, "q_pos0_dev");  // read when the op runs
  s.run(op);
  return finish_with(s, {op.out});
}

// Attention with segments (ops.h): q, k, v have S rows; segments is an int32 [n + 1, 1] array of
// row offsets. causal and k2/v2 exist only to check that validate() refuses them.
py::object attention_segmented(const py::array& q, const py::array& k, const py::array& v,
                               int num_heads, int num_kv_heads, int head_dim, float scale,
                               const py::array& segments, int64_t max_segment_rows, bool causal,
                               const std::optional<py::array>& k2,
                               const std::optional<py::array>& v2) {
  Session& s = *session();
  Attention op = attention_op(s, q, k, v, num_heads, num_kv_heads, head_dim, scale, causal, k2, v2);
  op.segments = s.upload(segments, "segments");
  op.max_segment_rows = max_segment_rows;
  s.run(op);
  return finish_with(s, {op.out});
}

py::object swiglu(const py::array& gate, const py::array& up) {
  Session& s = *session();
  SwiGlu op;
  op.gate = s.upload(gate, "gate");
  op.up = s.upload(up, "up");
  op.out = s.output(DType::bf16, op.gate.rows, op.gate.cols);
  s.run(op);
  return finish_with(s, {op.out});
}

py::object add(const py::array& dst, const py::array& src) {
  Session& s = *session();
  Add op{s.upload(dst, "dst"), s.upload(src, "src")};
  s.run(op);
  return finish_with(s, {op.dst});
}

py::object add_rows(const py::array& dst, const py::array& src, const py::array& rows) {
  Session& s = *session();
  AddRows op{s.upload(dst, "dst"), s.upload(src, "src"), s.upload(rows, "rows")};
  s.run(op);
  return finish_with(s, {op.dst});
}

py::object gather_rows(const py::array& table, const py::array& ids) {
  Session& s = *session();
  GatherRows op;
  op.table = s.upload(table, "table");
  op.ids = s.upload(ids, "ids");
  op.out = s.output(op.table.dtype, op.ids.rows, op.table.cols);
  s.run(op);
  return finish_with(s, {op.out});
}

py::object scatter_rows(const py::array& src, const py::array& rows, const py::array& dst) {
  Session& s = *session();
  ScatterRows op{s.upload(src, "src"), s.upload(rows, "rows"), s.upload(dst, "dst")};
  s.run(op);
  return finish_with(s, {op.dst});
}

py::object cast(const py::array& x, const std::string& out_dtype) {
  Session& s = *session();
  Cast op;
  op.x = s.upload(x, "x");
  op.y = s.output(parse_out_dtype(out_dtype), op.x.rows, op.x.cols);
  s.run(op);
  return finish_with(s, {op.y});
}

// Writes src into columns [col0, col0 + src.cols) of a copy of dst; returns the whole of dst.
py::object copy(const py::array& src, const py::array& dst, int64_t col0) {
  Session& s = *session();
  Copy op;
  op.src = s.upload(src, "src");
  const TensorView whole = s.upload(dst, "dst");
  if (col0 < 0 || col0 + op.src.cols > whole.cols) throw py::value_error("col0 out of range");
  op.dst = whole.slice_cols(col0, op.src.cols);
  s.run(op);
  return finish_with(s, {whole});
}

py::object pos_embed_interp(const py::array& table, const py::array& idx, const py::array& weight) {
  Session& s = *session();
  PosEmbedInterp op;
  op.table = s.upload(table, "table");
  op.idx = s.upload(idx, "idx");
  op.weight = s.upload(weight, "weight");
  op.out = s.output(DType::bf16, op.idx.rows, op.table.cols);
  s.run(op);
  return finish_with(s, {op.out});
}

py::object argmax(const py::array& x) {
  Session& s = *session();
  Argmax op;
  op.x = s.upload(x, "x");
  op.out = s.output(DType::i32, op.x.rows, 1);
  s.run(op);
  return finish_with(s, {op.out});
}

}  // namespace
}  // namespace ferry

PYBIND11_MODULE(ferry_ops, m) {
  using namespace ferry;
  using py::arg;
  m.doc() = "ferry's CPU ops on numpy arrays, through the CPU backend";
  m.def(
      "configure",
      [](int threads, int max_delay_us, uint64_t seed) {
        session() = std::make_unique<Session>(CpuBackendOptions{threads, max_delay_us, seed});
      },
      arg("threads") = 0, arg("max_delay_us") = 0, arg("seed") = 1,
      "Recreates the backend with this many op threads (0 = all cores) and injected delays.");
  m.def("linear", &linear, arg("x"), arg("w"), arg("bias") = py::none(), arg("out_dtype") = "bf16",
        arg("act") = "none");
  m.def("rms_norm", &rms_norm, arg("x"), arg("w"), arg("dim") = 0, arg("eps") = 1e-6f,
        arg("in_place") = false);
  m.def("layer_norm", &layer_norm, arg("x"), arg("w"), arg("b"), arg("eps") = 1e-6f,
        arg("out_dtype") = "");
  m.def("rope", &rope, arg("x"), arg("cos"), arg("sin"), arg("num_heads"), arg("head_dim"),
        arg("math") = "bf16");
  m.def("rope_table", &rope_table, arg("pos"), arg("head_dim"), arg("theta") = 5e6f,
        arg("sections") = std::array<int, 3>{24, 20, 20});
  m.def("attention", &attention, arg("q"), arg("k"), arg("v"), arg("num_heads"),
        arg("num_kv_heads"), arg("head_dim"), arg("scale"), arg("causal") = false,
        arg("q_pos0") = 0, arg("k2") = py::none(), arg("v2") = py::none(),
        arg("q_pos0_dev") = py::none());
  m.def("attention_segmented", &attention_segmented, arg("q"), arg("k"), arg("v"), arg("num_heads"),
        arg("num_kv_heads"), arg("head_dim"), arg("scale"), arg("segments"),
        arg("max_segment_rows"), arg("causal") = false, arg("k2") = py::none(),
        arg("v2") = py::none());
  m.def("swiglu", &swiglu, arg("gate"), arg("up"));
  m.def("add", &add, arg("dst"), arg("src"));
  m.def("add_rows", &add_rows, arg("dst"), arg("src"), arg("rows"));
  m.def("gather_rows", &gather_rows, arg("table"), arg("ids"));
  m.def("scatter_rows", &scatter_rows, arg("src"), arg("rows"), arg("dst"));
  m.def("cast", &cast, arg("x"), arg("out_dtype"));
  m.def("copy", &copy, arg("src"), arg("dst"), arg("col0") = 0);
  m.def("pos_embed_interp", &pos_embed_interp, arg("table"), arg("idx"), arg("weight"));
  m.def("argmax", &argmax, arg("x"));
}
