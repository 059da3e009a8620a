// op_name and validate: the shape, dtype, stride and aliasing checks every backend shares.
#include "backend/ops.h"

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>

namespace ferry {
namespace {

// "[3, 8]"; a negative extent (in an expected shape: "any") prints as "*".
std::string shape_str(int64_t rows, int64_t cols) {
  std::string s = "[";
  s += rows < 0 ? std::string("*") : std::to_string(rows);
  s += ", ";
  s += cols < 0 ? std::string("*") : std::to_string(cols);
  s += "]";
  return s;
}

// Checks for one op; every message reads "<op>: <arg>: <what is wrong>".
class Checker {
 public:
  explicit Checker(std::string_view op) : op_(op) {}

  Error fail(std::string_view arg, const std::string& what) const {
    std::string msg(op_);
    if (!arg.empty()) msg += ": " + std::string(arg);
    return make_error(ErrorCode::invalid_argument, msg + ": " + what);
  }

  // A present view: non-null, one of `dtypes`, a sane shape and stride.
  Status view(std::string_view arg, const TensorView& v,
              std::initializer_list<DType> dtypes) const {
    if (v.data == nullptr) return fail(arg, "null data pointer");
    bool dtype_ok = false;
    std::string expected;
    for (DType t : dtypes) {
      dtype_ok = dtype_ok || v.dtype == t;
      if (!expected.empty()) expected += " or ";
      expected += dtype_name(t);
    }
    if (!dtype_ok) {
      return fail(arg, "expected dtype " + expected + ", got " + std::string(dtype_name(v.dtype)));
    }
    if (v.rows < 0 || v.cols <= 0) return fail(arg, "invalid shape " + shape_str(v.rows, v.cols));
    if (v.row_stride != 0 && v.row_stride < v.cols) {
      return fail(
          arg, "row_stride " + std::to_string(v.row_stride) + " < cols " + std::to_string(v.cols));
    }
    const int64_t limit = std::numeric_limits<int64_t>::max() / 16;
    if (v.rows > 0 && v.stride() > limit / v.rows) {
      return fail(arg, "shape " + shape_str(v.rows, v.cols) + " with row_stride " +
                           std::to_string(v.stride()) + " overflows");
    }
    return Status();
  }

  // rows or cols < 0 means "any".
  Status shape(std::string_view arg, const TensorView& v, int64_t rows, int64_t cols) const {
    if ((rows >= 0 && v.rows != rows) || (cols >= 0 && v.cols != cols)) {
      return fail(arg,
                  "expected shape " + shape_str(rows, cols) + ", got " + shape_str(v.rows, v.cols));
    }
    return Status();
  }

  Status same_shape(std::string_view arg, const TensorView& v, const TensorView& like) const {
    return shape(arg, v, like.rows, like.cols);
  }

  // Output `out` must not share an element with input `in`.
  Status disjoint(std::string_view out_arg, const TensorView& out, std::string_view in_arg,
                  const TensorView& in) const;
  // `out` may be exactly `in` (same memory, stride, dtype, shape) but must not partly overlap it.
  Status alias_or_disjoint(std::string_view out_arg, const TensorView& out, std::string_view in_arg,
                           const TensorView& in) const {
    if (out.data == in.data && out.stride() == in.stride() && out.dtype == in.dtype &&
        out.rows == in.rows && out.cols == in.cols) {
      return Status();
    }
    return disjoint(out_arg, out, in_arg, in);
  }

  Status positive(std::string_view arg, int64_t value) const {
    if (value <= 0) return fail(arg, "must be positive, got " + std::to_string(value));
    return Status();
  }

 private:
  std::string_view op_;
};

// Whether two views may share an element. Exact for views whose byte ranges do not overlap and
// for views with the same row stride (e.g. column slices of one fused matrix); conservative
// (reports an overlap) otherwise.
bool may_overlap(const TensorView& a, const TensorView& b) {
  if (a.rows == 0 || b.rows == 0 || a.empty() || b.empty()) return false;
  const auto begin_a = reinterpret_cast<uintptr_t>(a.data);
  const auto begin_b = reinterpret_cast<uintptr_t>(b.data);
  const auto ea = static_cast<int64_t>(dtype_size(a.dtype));
  const auto eb = static_cast<int64_t>(dtype_size(b.dtype));
  const uintptr_t end_a =
      begin_a + static_cast<uintptr_t>(((a.rows - 1) * a.stride() + a.cols) * ea);
  const uintptr_t end_b =
      begin_b + static_cast<uintptr_t>(((b.rows - 1) * b.stride() + b.cols) * eb);
  if (end_a <= begin_b || end_b <= begin_a) return false;
  const int64_t period = a.stride() * ea;
  const int64_t width_a = a.cols * ea;
  const int64_t width_b = b.cols * eb;
  if (period != b.stride() * eb || width_a > period || width_b > period) return true;
  // Same period: within each period a occupies [0, width_a), b occupies [d, d + width_b) mod it.
  const auto diff = static_cast<int64_t>(begin_b - begin_a);  // two's complement: signed offset
  const int64_t d = ((diff % period) + period) % period;
  return d < width_a || d + width_b > period;
}

Status Checker::disjoint(std::string_view out_arg, const TensorView& out, std::string_view in_arg,
                         const TensorView& in) const {
  if (may_overlap(out, in)) return fail(out_arg, "overlaps " + std::string(in_arg));
  return Status();
}

constexpr std::initializer_list<DType> kFloat = {DType::bf16, DType::f32};
constexpr std::initializer_list<DType> kBf16 = {DType::bf16};
constexpr std::initializer_list<DType> kF32 = {DType::f32};
constexpr std::initializer_list<DType> kI32 = {DType::i32};

Status check(const Linear& op) {
  const Checker c("linear");
  FERRY_RETURN_IF_ERROR(c.view("x", op.x, kFloat));
  FERRY_RETURN_IF_ERROR(c.view("w", op.w, kBf16));
  FERRY_RETURN_IF_ERROR(c.shape("w", op.w, -1, op.x.cols));
  FERRY_RETURN_IF_ERROR(c.view("y", op.y, kFloat));
  FERRY_RETURN_IF_ERROR(c.shape("y", op.y, op.x.rows, op.w.rows));
  if (!op.bias.empty()) {
    FERRY_RETURN_IF_ERROR(c.view("bias", op.bias, kBf16));
    FERRY_RETURN_IF_ERROR(c.shape("bias", op.bias, 1, op.w.rows));
    FERRY_RETURN_IF_ERROR(c.disjoint("y", op.y, "bias", op.bias));
  }
  switch (op.act) {
    case Activation::none:
    case Activation::silu:
    case Activation::gelu_tanh:
    case Activation::gelu_erf:
      break;
    default:
      return c.fail("act", "unknown activation " + std::to_string(int(op.act)));
  }
  FERRY_RETURN_IF_ERROR(c.disjoint("y", op.y, "x", op.x));
  return c.disjoint("y", op.y, "w", op.w);
}

Status check(const RmsNorm& op) {
  const Checker c("rms_norm");
  FERRY_RETURN_IF_ERROR(c.view("x", op.x, kFloat));
  FERRY_RETURN_IF_ERROR(c.positive("dim", op.dim));
  if (op.x.cols % op.dim != 0) {
    return c.fail("dim", "cols " + std::to_string(op.x.cols) + " is not a multiple of dim " +
                             std::to_string(op.dim));
  }
  FERRY_RETURN_IF_ERROR(c.view("w", op.w, kBf16));
  FERRY_RETURN_IF_ERROR(c.shape("w", op.w, 1, op.dim));
  FERRY_RETURN_IF_ERROR(c.view("y", op.y, {op.x.dtype}));
  FERRY_RETURN_IF_ERROR(c.same_shape("y", op.y, op.x));
  if (!(op.eps >= 0.0f) || !std::isfinite(op.eps)) return c.fail("eps", "must be finite and >= 0");
  FERRY_RETURN_IF_ERROR(c.disjoint("y", op.y, "w", op.w));
  return c.alias_or_disjoint("y", op.y, "x", op.x);
}

Status check(const LayerNorm& op) {
  const Checker c("layer_norm");
  FERRY_RETURN_IF_ERROR(c.view("x", op.x, kFloat));
  FERRY_RETURN_IF_ERROR(c.view("w", op.w, kBf16));
  FERRY_RETURN_IF_ERROR(c.shape("w", op.w, 1, op.x.cols));
  FERRY_RETURN_IF_ERROR(c.view("b", op.b, kBf16));
  FERRY_RETURN_IF_ERROR(c.shape("b", op.b, 1, op.x.cols));
  FERRY_RETURN_IF_ERROR(c.view("y", op.y, kFloat));
  FERRY_RETURN_IF_ERROR(c.same_shape("y", op.y, op.x));
  if (!(op.eps >= 0.0f) || !std::isfinite(op.eps)) return c.fail("eps", "must be finite and >= 0");
  FERRY_RETURN_IF_ERROR(c.disjoint("y", op.y, "w", op.w));
  FERRY_RETURN_IF_ERROR(c.disjoint("y", op.y, "b", op.b));
  return c.alias_or_disjoint("y", op.y, "x", op.x);
}

Status check_head_dim(const Checker& c, int head_dim) {
  FERRY_RETURN_IF_ERROR(c.positive("head_dim", head_dim));
  if (head_dim % 2 != 0) return c.fail("head_dim", "must be even, got " + std::to_string(head_dim));
  return Status();
}

Status check(const Rope& op) {
  const Checker c("rope");
  if (op.math != RopeMath::bf16 && op.math != RopeMath::f32) return c.fail("math", "unknown value");
  FERRY_RETURN_IF_ERROR(c.view("x", op.x, kBf16));
  FERRY_RETURN_IF_ERROR(c.positive("num_heads", op.num_heads));
  FERRY_RETURN_IF_ERROR(check_head_dim(c, op.head_dim));
  FERRY_RETURN_IF_ERROR(c.shape("x", op.x, -1, int64_t{op.num_heads} * op.head_dim));
  FERRY_RETURN_IF_ERROR(c.view("cos", op.cos, kF32));
  FERRY_RETURN_IF_ERROR(c.shape("cos", op.cos, op.x.rows, op.head_dim / 2));
  FERRY_RETURN_IF_ERROR(c.view("sin", op.sin, kF32));
  FERRY_RETURN_IF_ERROR(c.shape("sin", op.sin, op.x.rows, op.head_dim / 2));
  FERRY_RETURN_IF_ERROR(c.disjoint("x", op.x, "cos", op.cos));
  return c.disjoint("x", op.x, "sin", op.sin);
}

Status check(const RopeTable& op) {
  const Checker c("rope_table");
  FERRY_RETURN_IF_ERROR(c.view("pos", op.pos, kI32));
  FERRY_RETURN_IF_ERROR(c.shape("pos", op.pos, -1, 3));
  FERRY_RETURN_IF_ERROR(check_head_dim(c, op.head_dim));
  FERRY_RETURN_IF_ERROR(c.view("cos", op.cos, kF32));
  FERRY_RETURN_IF_ERROR(c.shape("cos", op.cos, op.pos.rows, op.head_dim / 2));
  FERRY_RETURN_IF_ERROR(c.view("sin", op.sin, kF32));
  FERRY_RETURN_IF_ERROR(c.shape("sin", op.sin, op.pos.rows, op.head_dim / 2));
  if (!(op.theta > 0.0f) || !std::isfinite(op.theta)) {
    return c.fail("theta", "must be finite and > 0");
  }
  for (int s : op.sections) {
    if (s < 0) return c.fail("sections", "must not be negative, got " + std::to_string(s));
  }
  const RopeLlama3& l = op.llama3;
  if (l.factor != 0.0f) {
    if (!(l.factor > 0.0f) || !std::isfinite(l.factor))
      return c.fail("llama3.factor", "must be > 0");
    if (!(l.low_freq_factor > 0.0f) || !(l.high_freq_factor > l.low_freq_factor) ||
        !std::isfinite(l.high_freq_factor)) {
      return c.fail("llama3", "needs 0 < low_freq_factor < high_freq_factor");
    }
    if (!(l.original_max_positions >= 1.0f) || !std::isfinite(l.original_max_positions)) {
      return c.fail("llama3.original_max_positions", "must be >= 1");
    }
    if (op.head_dim > kMaxScaledRopeHeadDim) {
      return c.fail("head_dim", "at most " + std::to_string(kMaxScaledRopeHeadDim) +
                                    " with llama3 scaling, got " + std::to_string(op.head_dim));
    }
  }
  FERRY_RETURN_IF_ERROR(c.disjoint("cos", op.cos, "sin", op.sin));
  FERRY_RETURN_IF_ERROR(c.disjoint("cos", op.cos, "pos", op.pos));
  return c.disjoint("sin", op.sin, "pos", op.pos);
}

}  // namespace

void rope_inv_freq(const RopeTable& op, float* out) {
  const int half = op.head_dim / 2;
  for (int j = 0; j < half; ++j) {
    const float e = static_cast<float>(2 * j) / static_cast<float>(op.head_dim);
    out[j] = 1.0f / std::pow(op.theta, e);
  }
  const RopeLlama3& l = op.llama3;
  if (l.factor == 0.0f) return;
  // Each line is one fp32 operation of transformers' _compute_llama3_parameters (a Python scalar
  // divided by a tensor is the tensor's reciprocal times the scalar there).
  const float two_pi = static_cast<float>(2.0 * 3.14159265358979323846);
  // These three are Python floats (double) there, rounded to fp32 where they meet the tensor.
  const auto low_wavelen = static_cast<float>(double{l.original_max_positions} / l.low_freq_factor);
  const auto high_wavelen =
      static_cast<float>(double{l.original_max_positions} / l.high_freq_factor);
  const auto span = static_cast<float>(double{l.high_freq_factor} - l.low_freq_factor);
  for (int j = 0; j < half; ++j) {
    const float inv = out[j];
    const float recip = 1.0f / inv;
    const float wavelen = recip * two_pi;
    if (wavelen > low_wavelen) {
      out[j] = inv / l.factor;
    } else if (!(wavelen < high_wavelen)) {
      const float ratio = (1.0f / wavelen) * l.original_max_positions;
      const float smooth = (ratio - l.low_freq_factor) / span;
      const float a = ((1.0f - smooth) * inv) / l.factor;
      const float b = smooth * inv;
      out[j] = a + b;
    }
  }
}

namespace {

Status check(const Attention& op) {
  const Checker c("attention");
  FERRY_RETURN_IF_ERROR(c.positive("num_heads", op.num_heads));
  FERRY_RETURN_IF_ERROR(c.positive("num_kv_heads", op.num_kv_heads));
  FERRY_RETURN_IF_ERROR(c.positive("head_dim", op.head_dim));
  if (op.num_heads % op.num_kv_heads != 0) {
    return c.fail("num_heads", std::to_string(op.num_heads) +
                                   " is not a multiple of num_kv_heads " +
                                   std::to_string(op.num_kv_heads));
  }
  if (op.num_spans < 1 || op.num_spans > static_cast<int>(op.kv.size())) {
    return c.fail("num_spans", "must be 1 or 2, got " + std::to_string(op.num_spans));
  }
  const int64_t q_cols = int64_t{op.num_heads} * op.head_dim;
  const int64_t kv_cols = int64_t{op.num_kv_heads} * op.head_dim;
  FERRY_RETURN_IF_ERROR(c.view("q", op.q, kBf16));
  FERRY_RETURN_IF_ERROR(c.shape("q", op.q, -1, q_cols));
  FERRY_RETURN_IF_ERROR(c.view("out", op.out, kBf16));
  FERRY_RETURN_IF_ERROR(c.shape("out", op.out, op.q.rows, q_cols));
  FERRY_RETURN_IF_ERROR(c.disjoint("out", op.out, "q", op.q));
  for (int s = 0; s < op.num_spans; ++s) {
    const std::string k = "kv[" + std::to_string(s) + "].k";
    const std::string v = "kv[" + std::to_string(s) + "].v";
    FERRY_RETURN_IF_ERROR(c.view(k, op.kv[s].k, kBf16));
    FERRY_RETURN_IF_ERROR(c.shape(k, op.kv[s].k, -1, kv_cols));
    FERRY_RETURN_IF_ERROR(c.view(v, op.kv[s].v, kBf16));
    FERRY_RETURN_IF_ERROR(c.shape(v, op.kv[s].v, op.kv[s].k.rows, kv_cols));
    FERRY_RETURN_IF_ERROR(c.disjoint("out", op.out, k, op.kv[s].k));
    FERRY_RETURN_IF_ERROR(c.disjoint("out", op.out, v, op.kv[s].v));
  }
  if (!std::isfinite(op.scale)) return c.fail("scale", "must be finite");
  if (op.q_pos0 < 0) return c.fail("q_pos0", "must not be negative");
  if (!op.q_pos0_dev.empty()) {
    FERRY_RETURN_IF_ERROR(c.view("q_pos0_dev", op.q_pos0_dev, kI32));
    FERRY_RETURN_IF_ERROR(c.shape("q_pos0_dev", op.q_pos0_dev, 1, 1));
    if (!op.causal) return c.fail("q_pos0_dev", "needs causal attention");
    if (op.q_pos0 != 0) return c.fail("q_pos0", "must be 0 when q_pos0_dev is given");
  }
  if (!op.segments.empty()) {
    FERRY_RETURN_IF_ERROR(c.view("segments", op.segments, kI32));
    if (op.segments.rows < 2 || op.segments.cols != 1) {
      return c.fail("segments", "expected shape [n + 1, 1] with n >= 1, got " +
                                    shape_str(op.segments.rows, op.segments.cols));
    }
    if (op.causal) return c.fail("segments", "needs non-causal attention");
    if (op.num_spans != 1 || op.kv[0].k.rows != op.q.rows) {
      return c.fail("segments", "needs one span with as many rows as q");
    }
    if (op.max_segment_rows <= 0 || op.max_segment_rows > op.q.rows) {
      return c.fail("max_segment_rows",
                    "must lie in [1, S], got " + std::to_string(op.max_segment_rows));
    }
  }
  return Status();
}

Status check(const SwiGlu& op) {
  const Checker c("swiglu");
  FERRY_RETURN_IF_ERROR(c.view("gate", op.gate, kBf16));
  FERRY_RETURN_IF_ERROR(c.view("up", op.up, kBf16));
  FERRY_RETURN_IF_ERROR(c.same_shape("up", op.up, op.gate));
  FERRY_RETURN_IF_ERROR(c.view("out", op.out, kBf16));
  FERRY_RETURN_IF_ERROR(c.same_shape("out", op.out, op.gate));
  FERRY_RETURN_IF_ERROR(c.disjoint("out", op.out, "gate", op.gate));
  return c.disjoint("out", op.out, "up", op.up);
}

Status check(const Add& op) {
  const Checker c("add");
  FERRY_RETURN_IF_ERROR(c.view("dst", op.dst, kFloat));
  FERRY_RETURN_IF_ERROR(c.view("src", op.src, kFloat));
  FERRY_RETURN_IF_ERROR(c.same_shape("src", op.src, op.dst));
  return c.disjoint("dst", op.dst, "src", op.src);
}

Status check_index_column(const Checker& c, std::string_view arg, const TensorView& idx,
                          int64_t rows) {
  FERRY_RETURN_IF_ERROR(c.view(arg, idx, kI32));
  return c.shape(arg, idx, rows, 1);
}

Status check(const AddRows& op) {
  const Checker c("add_rows");
  FERRY_RETURN_IF_ERROR(c.view("dst", op.dst, kFloat));
  FERRY_RETURN_IF_ERROR(c.view("src", op.src, kFloat));
  FERRY_RETURN_IF_ERROR(c.shape("src", op.src, -1, op.dst.cols));
  FERRY_RETURN_IF_ERROR(check_index_column(c, "rows", op.rows, op.src.rows));
  FERRY_RETURN_IF_ERROR(c.disjoint("dst", op.dst, "src", op.src));
  return c.disjoint("dst", op.dst, "rows", op.rows);
}

Status check(const GatherRows& op) {
  const Checker c("gather_rows");
  FERRY_RETURN_IF_ERROR(c.view("table", op.table, {op.table.dtype}));
  FERRY_RETURN_IF_ERROR(c.view("out", op.out, {op.table.dtype}));
  FERRY_RETURN_IF_ERROR(c.shape("out", op.out, -1, op.table.cols));
  FERRY_RETURN_IF_ERROR(check_index_column(c, "ids", op.ids, op.out.rows));
  FERRY_RETURN_IF_ERROR(c.disjoint("out", op.out, "table", op.table));
  return c.disjoint("out", op.out, "ids", op.ids);
}

Status check(const ScatterRows& op) {
  const Checker c("scatter_rows");
  FERRY_RETURN_IF_ERROR(c.view("src", op.src, {op.src.dtype}));
  FERRY_RETURN_IF_ERROR(c.view("dst", op.dst, {op.src.dtype}));
  FERRY_RETURN_IF_ERROR(c.shape("dst", op.dst, -1, op.src.cols));
  FERRY_RETURN_IF_ERROR(check_index_column(c, "rows", op.rows, op.src.rows));
  FERRY_RETURN_IF_ERROR(c.disjoint("dst", op.dst, "src", op.src));
  return c.disjoint("dst", op.dst, "rows", op.rows);
}

Status check(const Cast& op) {
  const Checker c("cast");
  FERRY_RETURN_IF_ERROR(c.view("x", op.x, kFloat));
  FERRY_RETURN_IF_ERROR(c.view("y", op.y, kFloat));
  FERRY_RETURN_IF_ERROR(c.same_shape("y", op.y, op.x));
  return c.disjoint("y", op.y, "x", op.x);
}

Status check(const Copy& op) {
  const Checker c("copy");
  FERRY_RETURN_IF_ERROR(c.view("src", op.src, {op.src.dtype}));
  FERRY_RETURN_IF_ERROR(c.view("dst", op.dst, {op.src.dtype}));
  FERRY_RETURN_IF_ERROR(c.same_shape("dst", op.dst, op.src));
  return c.disjoint("dst", op.dst, "src", op.src);
}

Status check(const PosEmbedInterp& op) {
  const Checker c("pos_embed_interp");
  FERRY_RETURN_IF_ERROR(c.view("table", op.table, kBf16));
  FERRY_RETURN_IF_ERROR(c.view("idx", op.idx, kI32));
  FERRY_RETURN_IF_ERROR(c.shape("idx", op.idx, -1, 4));
  FERRY_RETURN_IF_ERROR(c.view("weight", op.weight, kF32));
  FERRY_RETURN_IF_ERROR(c.shape("weight", op.weight, op.idx.rows, 4));
  FERRY_RETURN_IF_ERROR(c.view("out", op.out, kBf16));
  FERRY_RETURN_IF_ERROR(c.shape("out", op.out, op.idx.rows, op.table.cols));
  FERRY_RETURN_IF_ERROR(c.disjoint("out", op.out, "table", op.table));
  FERRY_RETURN_IF_ERROR(c.disjoint("out", op.out, "idx", op.idx));
  return c.disjoint("out", op.out, "weight", op.weight);
}

Status check(const Argmax& op) {
  const Checker c("argmax");
  FERRY_RETURN_IF_ERROR(c.view("x", op.x, kFloat));
  FERRY_RETURN_IF_ERROR(c.view("out", op.out, kI32));
  FERRY_RETURN_IF_ERROR(c.shape("out", op.out, op.x.rows, 1));
  return c.disjoint("out", op.out, "x", op.x);
}

Status check(const AddRmsNorm& op) {
  const Checker c("add_rms_norm");
  FERRY_RETURN_IF_ERROR(check(add_part(op)));
  FERRY_RETURN_IF_ERROR(check(norm_part(op)));
  FERRY_RETURN_IF_ERROR(c.disjoint("y", op.y, "dst", op.dst));
  return c.disjoint("y", op.y, "src", op.src);
}

Status check(const QkNormRope& op) {
  const Checker c("qk_norm_rope");
  FERRY_RETURN_IF_ERROR(c.positive("q_heads", op.q_heads));
  FERRY_RETURN_IF_ERROR(c.positive("k_heads", op.k_heads));
  FERRY_RETURN_IF_ERROR(c.positive("head_dim", op.head_dim));
  FERRY_RETURN_IF_ERROR(c.view("x", op.x, kBf16));
  FERRY_RETURN_IF_ERROR(c.shape("x", op.x, -1, int64_t{op.q_heads + op.k_heads} * op.head_dim));
  FERRY_RETURN_IF_ERROR(check(q_norm_part(op)));
  FERRY_RETURN_IF_ERROR(check(k_norm_part(op)));
  FERRY_RETURN_IF_ERROR(check(rope_part(op)));
  if (op.kv_dst.empty()) return Status();
  FERRY_RETURN_IF_ERROR(check(store_part(op)));
  const int64_t kv_cols = 2 * int64_t{op.k_heads} * op.head_dim;
  const TensorView k = k_norm_part(op).x;
  if (op.kv.cols != kv_cols || op.kv.rows != op.x.rows || op.kv.data != k.data ||
      op.kv.stride() != op.x.stride() || op.kv.dtype != DType::bf16) {
    return c.fail("kv", "must be x's k columns followed by the values: [S, " +
                            std::to_string(kv_cols) + "] bf16 at x's first k column, x's stride");
  }
  return Status();
}

struct Namer {
  std::string_view operator()(const Linear&) const { return "linear"; }
  std::string_view operator()(const RmsNorm&) const { return "rms_norm"; }
  std::string_view operator()(const LayerNorm&) const { return "layer_norm"; }
  std::string_view operator()(const Rope&) const { return "rope"; }
  std::string_view operator()(const RopeTable&) const { return "rope_table"; }
  std::string_view operator()(const Attention&) const { return "attention"; }
  std::string_view operator()(const SwiGlu&) const { return "swiglu"; }
  std::string_view operator()(const Add&) const { return "add"; }
  std::string_view operator()(const AddRows&) const { return "add_rows"; }
  std::string_view operator()(const GatherRows&) const { return "gather_rows"; }
  std::string_view operator()(const ScatterRows&) const { return "scatter_rows"; }
  std::string_view operator()(const Cast&) const { return "cast"; }
  std::string_view operator()(const Copy&) const { return "copy"; }
  std::string_view operator()(const PosEmbedInterp&) const { return "pos_embed_interp"; }
  std::string_view operator()(const Argmax&) const { return "argmax"; }
  std::string_view operator()(const AddRmsNorm&) const { return "add_rms_norm"; }
  std::string_view operator()(const QkNormRope&) const { return "qk_norm_rope"; }
};

}  // namespace

Add add_part(const AddRmsNorm& op) {
  return Add{op.dst, op.src};
}

RmsNorm norm_part(const AddRmsNorm& op) {
  return RmsNorm{op.dst, op.w, op.y, op.dst.cols, op.eps};
}

RmsNorm q_norm_part(const QkNormRope& op) {
  const TensorView q = op.x.slice_cols(0, int64_t{op.q_heads} * op.head_dim);
  return RmsNorm{q, op.wq, q, op.head_dim, op.eps};
}

RmsNorm k_norm_part(const QkNormRope& op) {
  const TensorView k =
      op.x.slice_cols(int64_t{op.q_heads} * op.head_dim, int64_t{op.k_heads} * op.head_dim);
  return RmsNorm{k, op.wk, k, op.head_dim, op.eps};
}

Rope rope_part(const QkNormRope& op) {
  return Rope{op.x, op.cos, op.sin, op.q_heads + op.k_heads, op.head_dim, op.math};
}

ScatterRows store_part(const QkNormRope& op) {
  return ScatterRows{op.kv, op.rows, op.kv_dst};
}

std::string_view op_name(const Op& op) {
  return std::visit(Namer{}, op);
}

Status validate(const Op& op) {
  return std::visit([](const auto& o) { return check(o); }, op);
}

}  // namespace ferry
