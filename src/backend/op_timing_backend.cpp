#include "backend/op_timing_backend.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <utility>

namespace ferry {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string dims(const TensorView& v) {
  return std::to_string(v.rows) + "x" + std::to_string(v.cols);
}

// " f32" for an f32 view, nothing for bf16 (the common case), the dtype otherwise.
std::string dtype_tag(const TensorView& v) {
  if (v.dtype == DType::bf16) return "";
  std::string s(dtype_name(v.dtype));
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return " " + s;
}

const char* activation_tag(Activation a) {
  switch (a) {
    case Activation::none:
      return "";
    case Activation::silu:
      return " silu";
    case Activation::gelu_tanh:
      return " gelu_tanh";
    case Activation::gelu_erf:
      return " gelu_erf";
  }
  return "";
}

struct Shaper {
  OpSignature sig;

  void operator()(const Linear& o) {
    sig.shape = dims(o.x) + " -> " + std::to_string(o.y.cols);
    if (!o.bias.empty()) sig.shape += " +bias";
    sig.shape += activation_tag(o.act);
    if (o.x.dtype != DType::bf16) sig.shape += " in" + dtype_tag(o.x);
    if (o.y.dtype != DType::bf16) sig.shape += " out" + dtype_tag(o.y);
  }
  void operator()(const RmsNorm& o) {
    sig.shape = dims(o.x);
    if (o.dim != o.x.cols) sig.shape += " dim=" + std::to_string(o.dim);
    sig.shape += dtype_tag(o.x);
  }
  void operator()(const LayerNorm& o) { sig.shape = dims(o.x) + dtype_tag(o.x) + dtype_tag(o.y); }
  void operator()(const Rope& o) {
    sig.shape =
        dims(o.x) + " h=" + std::to_string(o.num_heads) + " d=" + std::to_string(o.head_dim);
    if (o.math == RopeMath::f32) sig.shape += " f32 math";
  }
  void operator()(const RopeTable& o) {
    sig.shape = "S=" + std::to_string(o.pos.rows) + " d=" + std::to_string(o.head_dim);
  }
  void operator()(const Attention& o) {
    sig.shape = "S=" + std::to_string(o.q.rows) + " h=" + std::to_string(o.num_heads) + "/" +
                std::to_string(o.num_kv_heads) + " d=" + std::to_string(o.head_dim);
    if (o.causal) sig.shape += " causal";
    if (o.num_spans > 1) sig.shape += " spans=" + std::to_string(o.num_spans);
    if (!o.segments.empty()) sig.shape += " segs=" + std::to_string(o.segments.rows - 1);
    sig.keys = 0;
    for (int i = 0; i < std::clamp(o.num_spans, 0, static_cast<int>(o.kv.size())); ++i) {
      sig.keys += o.kv[static_cast<size_t>(i)].k.rows;
    }
  }
  void operator()(const SwiGlu& o) { sig.shape = dims(o.out); }
  void operator()(const Add& o) { sig.shape = dims(o.dst) + dtype_tag(o.dst) + dtype_tag(o.src); }
  void operator()(const AddRows& o) {
    sig.shape = dims(o.src) + " into " + std::to_string(o.dst.rows) + dtype_tag(o.dst);
  }
  void operator()(const GatherRows& o) { sig.shape = dims(o.out) + dtype_tag(o.out); }
  void operator()(const ScatterRows& o) {
    sig.shape = dims(o.src) + " into " + std::to_string(o.dst.rows) + dtype_tag(o.dst);
  }
  void operator()(const Cast& o) {
    sig.shape = dims(o.x) + dtype_tag(o.x) + " ->" + dtype_tag(o.y);
    if (o.y.dtype == DType::bf16) sig.shape += " bf16";
  }
  void operator()(const Copy& o) { sig.shape = dims(o.src) + dtype_tag(o.src); }
  void operator()(const PosEmbedInterp& o) { sig.shape = dims(o.out); }
  void operator()(const Argmax& o) { sig.shape = dims(o.x) + dtype_tag(o.x); }
  void operator()(const AddRmsNorm& o) { sig.shape = dims(o.dst) + dtype_tag(o.dst); }
  void operator()(const QkNormRope& o) {
    sig.shape = dims(o.x) + " h=" + std::to_string(o.q_heads) + "+" + std::to_string(o.k_heads) +
                " d=" + std::to_string(o.head_dim);
  }
};

}  // namespace

OpSignature op_signature(const Op& op) {
  Shaper s;
  s.sig.kind = std::string(op_name(op));
  std::visit(s, op);
  return std::move(s.sig);
}

std::string OpBucket::label() const {
  std::string s = kind + " " + shape;
  if (min_keys >= 0) {
    s += " L=" + std::to_string(min_keys);
    if (max_keys != min_keys) s += ".." + std::to_string(max_keys);
  }
  return s;
}

void OpTimingBackend::set_phase(std::string_view phase) {
  std::lock_guard<std::mutex> lock(mu_);
  phase_ = std::string(phase);
}

std::string OpTimingBackend::phase() const {
  std::lock_guard<std::mutex> lock(mu_);
  return phase_;
}

std::vector<OpBucket> OpTimingBackend::buckets() const {
  std::lock_guard<std::mutex> lock(mu_);
  return buckets_;
}

void OpTimingBackend::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  buckets_.clear();
  index_.clear();
  deferred_ = Status();
}

void OpTimingBackend::add(std::string_view kind, std::string shape, double seconds, uint64_t bytes,
                          int64_t keys) {
  std::lock_guard<std::mutex> lock(mu_);
  Key key{phase_, std::string(kind), std::move(shape)};
  auto [it, inserted] = index_.try_emplace(key, buckets_.size());
  if (inserted) {
    OpBucket b;
    std::tie(b.phase, b.kind, b.shape) = it->first;
    buckets_.push_back(std::move(b));
  }
  OpBucket& b = buckets_[it->second];
  b.count += 1;
  b.seconds += seconds;
  b.bytes += bytes;
  if (keys >= 0) {
    b.min_keys = b.min_keys < 0 ? keys : std::min(b.min_keys, keys);
    b.max_keys = std::max(b.max_keys, keys);
  }
}

template <class Enqueue>
void OpTimingBackend::time_transfer(Stream& stream, std::string_view kind, size_t bytes,
                                    Enqueue&& enqueue) {
  const auto start = Clock::now();
  enqueue();
  Status st = inner_.synchronize(stream);
  const double t = seconds_since(start);
  add(kind, std::to_string(bytes) + " B", t, bytes, -1);
  if (!st.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    if (deferred_.ok()) deferred_ = std::move(st);
  }
}

void OpTimingBackend::copy_to_device(Stream& stream, void* dst, const void* host_src,
                                     size_t bytes) {
  time_transfer(stream, "copy_to_device", bytes,
                [&] { inner_.copy_to_device(stream, dst, host_src, bytes); });
}

void OpTimingBackend::copy_to_host(Stream& stream, void* host_dst, const void* src, size_t bytes) {
  time_transfer(stream, "copy_to_host", bytes,
                [&] { inner_.copy_to_host(stream, host_dst, src, bytes); });
}

void OpTimingBackend::copy_on_device(Stream& stream, void* dst, const void* src, size_t bytes) {
  time_transfer(stream, "copy_on_device", bytes,
                [&] { inner_.copy_on_device(stream, dst, src, bytes); });
}

void OpTimingBackend::fill_zero(Stream& stream, void* dst, size_t bytes) {
  time_transfer(stream, "fill_zero", bytes, [&] { inner_.fill_zero(stream, dst, bytes); });
}

Status OpTimingBackend::run(Stream& stream, const Op& op) {
  OpSignature sig = op_signature(op);
  const auto start = Clock::now();
  FERRY_RETURN_IF_ERROR(inner_.run(stream, op));
  FERRY_RETURN_IF_ERROR(inner_.synchronize(stream));
  add(sig.kind, std::move(sig.shape), seconds_since(start), 0, sig.keys);
  return {};
}

Status OpTimingBackend::synchronize(Stream& stream) {
  Status st = inner_.synchronize(stream);
  std::lock_guard<std::mutex> lock(mu_);
  if (!deferred_.ok()) return std::exchange(deferred_, Status());
  return st;
}

}  // namespace ferry
