// validate(): each op accepts a well-formed instance and rejects broken shapes, dtypes, strides,
// null pointers, head counts and aliasing with a message that names the op and the argument.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend/ops.h"

namespace ferry {
namespace {

// Distinct, non-overlapping host buffers big enough for every view below.
class OpsValidate : public ::testing::Test {
 protected:
  void* buf(int i) { return storage_[static_cast<size_t>(i)].data(); }
  TensorView bf16(int i, int64_t rows, int64_t cols, int64_t stride = 0) {
    return make_view(buf(i), DType::bf16, rows, cols, stride);
  }
  TensorView f32(int i, int64_t rows, int64_t cols, int64_t stride = 0) {
    return make_view(buf(i), DType::f32, rows, cols, stride);
  }
  TensorView i32(int i, int64_t rows, int64_t cols) {
    return make_view(buf(i), DType::i32, rows, cols);
  }

  // Expects validate to fail with a message containing every fragment.
  static void expect_error(const Op& op, const std::vector<std::string>& fragments) {
    Status s = validate(op);
    ASSERT_FALSE(s.ok()) << "expected " << op_name(op) << " to be rejected";
    EXPECT_EQ(s.error().code, ErrorCode::invalid_argument);
    for (const auto& f : fragments) {
      EXPECT_NE(s.error().message.find(f), std::string::npos)
          << "message '" << s.error().message << "' lacks '" << f << "'";
    }
  }
  static void expect_ok(const Op& op) {
    Status s = validate(op);
    EXPECT_TRUE(s.ok()) << s.error().to_string();
  }

 private:
  std::vector<std::vector<double>> storage_ =
      std::vector<std::vector<double>>(12, std::vector<double>(4096));
};

TEST_F(OpsValidate, NamesEveryOp) {
  EXPECT_EQ(op_name(Linear{}), "linear");
  EXPECT_EQ(op_name(RmsNorm{}), "rms_norm");
  EXPECT_EQ(op_name(Attention{}), "attention");
  EXPECT_EQ(op_name(PosEmbedInterp{}), "pos_embed_interp");
  EXPECT_EQ(op_name(Argmax{}), "argmax");
}

TEST_F(OpsValidate, Linear) {
  const Linear good{bf16(0, 3, 16), bf16(1, 8, 16), bf16(2, 1, 8), f32(3, 3, 8), Activation::silu};
  expect_ok(good);
  Linear no_bias = good;
  no_bias.bias = {};
  expect_ok(no_bias);
  Linear strided = good;
  strided.x = bf16(0, 3, 16, 40);  // a column window of a wider matrix
  expect_ok(strided);

  Linear bad = good;
  bad.w = bf16(1, 8, 15);
  expect_error(bad, {"linear: w:", "expected shape", "[*, 16]", "[8, 15]"});
  bad = good;
  bad.w = f32(1, 8, 16);
  expect_error(bad, {"linear: w: expected dtype BF16, got F32"});
  bad = good;
  bad.y = f32(3, 3, 9);
  expect_error(bad, {"linear: y: expected shape [3, 8], got [3, 9]"});
  bad = good;
  bad.x.data = nullptr;
  expect_error(bad, {"linear: x: null data pointer"});
  bad = good;
  bad.x = bf16(0, 3, 16, 15);
  expect_error(bad, {"linear: x: row_stride 15 < cols 16"});
  bad = good;
  bad.bias = bf16(2, 1, 7);
  expect_error(bad, {"linear: bias:"});
  bad = good;
  bad.y = make_view(buf(0), DType::f32, 3, 8);  // writes over x
  expect_error(bad, {"linear: y: overlaps x"});
  bad = good;
  bad.x = make_view(buf(0), DType::i32, 3, 16);
  expect_error(bad, {"linear: x: expected dtype BF16 or F32, got I32"});
}

TEST_F(OpsValidate, RmsNormAndLayerNorm) {
  const RmsNorm rms{bf16(0, 4, 64), bf16(1, 1, 16), bf16(2, 4, 64), 16, 1e-6f};
  expect_ok(rms);
  RmsNorm in_place = rms;
  in_place.y = in_place.x;
  expect_ok(in_place);

  RmsNorm bad = rms;
  bad.y = f32(2, 4, 64);
  expect_error(bad, {"rms_norm: y: expected dtype BF16, got F32"});
  bad = rms;
  bad.dim = 24;
  expect_error(bad, {"rms_norm: dim:", "not a multiple"});
  bad = rms;
  bad.dim = 0;
  expect_error(bad, {"rms_norm: dim: must be positive"});
  bad = rms;
  bad.w = bf16(1, 1, 64);
  expect_error(bad, {"rms_norm: w: expected shape [1, 16]"});
  bad = rms;
  // y shifted by one row against x: a partial overlap is not an in-place norm.
  bad.y = make_view(static_cast<uint16_t*>(buf(0)) + 64, DType::bf16, 4, 64);
  expect_error(bad, {"rms_norm: y: overlaps x"});

  const LayerNorm ln{f32(0, 2, 32), bf16(1, 1, 32), bf16(2, 1, 32), bf16(3, 2, 32), 1e-6f};
  expect_ok(ln);
  LayerNorm lbad = ln;
  lbad.b = bf16(2, 1, 31);
  expect_error(lbad, {"layer_norm: b: expected shape [1, 32], got [1, 31]"});
  lbad = ln;
  lbad.y = ln.x;
  lbad.y.dtype = DType::bf16;  // same memory, other dtype: not an in-place op
  expect_error(lbad, {"layer_norm: y: overlaps x"});
}

TEST_F(OpsValidate, RopeAndRopeTable) {
  const Rope rope{bf16(0, 5, 4 * 8, 48), f32(1, 5, 4), f32(2, 5, 4), 4, 8, RopeMath::bf16};
  expect_ok(rope);
  Rope bad = rope;
  bad.head_dim = 7;
  expect_error(bad, {"rope: head_dim: must be even"});
  bad = rope;
  bad.num_heads = 3;
  expect_error(bad, {"rope: x: expected shape [*, 24], got [5, 32]"});
  bad = rope;
  bad.cos = f32(1, 4, 4);
  expect_error(bad, {"rope: cos: expected shape [5, 4], got [4, 4]"});
  bad = rope;
  bad.x = f32(0, 5, 32);
  expect_error(bad, {"rope: x: expected dtype BF16, got F32"});
  bad.math = RopeMath::f32;  // fp32 arithmetic, still on bf16 data
  expect_error(bad, {"rope: x: expected dtype BF16, got F32"});

  const RopeTable table{i32(0, 6, 3), f32(1, 6, 64), f32(2, 6, 64), 5e6f, 128, {24, 20, 20}, {}};
  expect_ok(table);
  RopeTable tbad = table;
  tbad.pos = i32(0, 6, 1);
  expect_error(tbad, {"rope_table: pos: expected shape [*, 3]"});
  tbad = table;
  tbad.pos.dtype = DType::i64;
  expect_error(tbad, {"rope_table: pos: expected dtype I32, got I64"});
  tbad = table;
  tbad.sin = table.cos;
  expect_error(tbad, {"rope_table: cos: overlaps sin"});
  tbad = table;
  tbad.theta = 0.0f;
  expect_error(tbad, {"rope_table: theta:"});
}

TEST_F(OpsValidate, Attention) {
  Attention good;
  good.q = bf16(0, 3, 8 * 16);
  good.kv[0] = {bf16(1, 10, 2 * 16), bf16(2, 10, 2 * 16)};
  good.kv[1] = {bf16(3, 1, 2 * 16), bf16(4, 1, 2 * 16)};
  good.num_spans = 2;
  good.out = bf16(5, 3, 8 * 16);
  good.num_heads = 8;
  good.num_kv_heads = 2;
  good.head_dim = 16;
  good.scale = 0.25f;
  good.causal = true;
  good.q_pos0 = 8;
  expect_ok(good);

  Attention bad = good;
  bad.num_kv_heads = 3;
  expect_error(bad, {"attention: num_heads: 8 is not a multiple of num_kv_heads 3"});
  bad = good;
  bad.kv[1].v = bf16(4, 2, 32);
  expect_error(bad, {"attention: kv[1].v: expected shape [1, 32], got [2, 32]"});
  bad = good;
  bad.kv[1].k.data = nullptr;
  expect_error(bad, {"attention: kv[1].k: null data pointer"});
  bad.num_spans = 1;  // span 1 is not read then
  expect_ok(bad);
  bad = good;
  bad.num_spans = 3;
  expect_error(bad, {"attention: num_spans"});
  bad = good;
  bad.out = bf16(5, 2, 128);
  expect_error(bad, {"attention: out: expected shape [3, 128], got [2, 128]"});
  bad = good;
  bad.q.dtype = DType::f32;
  expect_error(bad, {"attention: q: expected dtype BF16, got F32"});
  bad = good;
  bad.out = bf16(1, 3, 128);
  expect_error(bad, {"attention: out: overlaps kv[0].k"});
}

// Segments (the images of a vision batch in one op): non-causal, one span with S rows, an i32
// [n + 1, 1] offset table, max_segment_rows in [1, S]. The offsets' values are the backend's to
// check (they are device data); see the CPU backend tests.
TEST_F(OpsValidate, AttentionSegments) {
  Attention good;
  good.q = bf16(0, 6, 2 * 16);
  good.kv[0] = {bf16(1, 6, 2 * 16), bf16(2, 6, 2 * 16)};
  good.num_spans = 1;
  good.out = bf16(5, 6, 2 * 16);
  good.num_heads = 2;
  good.num_kv_heads = 2;
  good.head_dim = 16;
  good.scale = 0.25f;
  good.segments = i32(6, 3, 1);
  good.max_segment_rows = 4;
  expect_ok(good);

  Attention bad = good;
  bad.causal = true;
  expect_error(bad, {"attention: segments: needs non-causal attention"});
  bad = good;
  bad.kv[1] = {bf16(3, 1, 32), bf16(4, 1, 32)};
  bad.num_spans = 2;
  expect_error(bad, {"attention: segments: needs one span with as many rows as q"});
  bad = good;
  bad.kv[0] = {bf16(1, 5, 32), bf16(2, 5, 32)};
  expect_error(bad, {"attention: segments: needs one span with as many rows as q"});
  for (int64_t rows : {int64_t{0}, int64_t{7}, int64_t{-1}}) {
    bad = good;
    bad.max_segment_rows = rows;
    expect_error(bad,
                 {"attention: max_segment_rows: must lie in [1, S], got " + std::to_string(rows)});
  }
  bad = good;
  bad.max_segment_rows = 6;  // = S: one segment may hold every row
  expect_ok(bad);
  bad = good;
  bad.segments = i32(6, 1, 1);
  expect_error(bad, {"attention: segments: expected shape [n + 1, 1] with n >= 1, got [1, 1]"});
  bad = good;
  bad.segments = i32(6, 3, 2);
  expect_error(bad, {"attention: segments: expected shape [n + 1, 1]"});
  bad = good;
  bad.segments = f32(6, 3, 1);
  expect_error(bad, {"attention: segments: expected dtype I32, got F32"});
}

TEST_F(OpsValidate, ElementwiseAndRowOps) {
  // gate and up as the two halves of one fused [4, 2*24] projection: disjoint column windows.
  const TensorView fused = bf16(0, 4, 48);
  const SwiGlu sw{fused.slice_cols(0, 24), fused.slice_cols(24, 24), bf16(1, 4, 24)};
  expect_ok(sw);
  SwiGlu swbad = sw;
  swbad.out = fused.slice_cols(12, 24);
  expect_error(swbad, {"swiglu: out: overlaps gate"});
  swbad = sw;
  swbad.up = fused.slice_cols(24, 20);
  expect_error(swbad, {"swiglu: up: expected shape [4, 24], got [4, 20]"});

  expect_ok(Add{f32(0, 2, 8), bf16(1, 2, 8)});
  expect_error(Add{f32(0, 2, 8), bf16(1, 3, 8)}, {"add: src: expected shape [2, 8], got [3, 8]"});
  expect_error(Add{f32(0, 2, 8), f32(0, 2, 8)}, {"add: dst: overlaps src"});

  expect_ok(AddRows{bf16(0, 9, 8), bf16(1, 3, 8), i32(2, 3, 1)});
  expect_error(AddRows{bf16(0, 9, 8), bf16(1, 3, 8), i32(2, 2, 1)},
               {"add_rows: rows: expected shape [3, 1], got [2, 1]"});
  expect_error(AddRows{bf16(0, 9, 8), bf16(1, 3, 8), f32(2, 3, 1)},
               {"add_rows: rows: expected dtype I32, got F32"});

  expect_ok(GatherRows{bf16(0, 100, 16), i32(1, 5, 1), bf16(2, 5, 16)});
  expect_error(GatherRows{bf16(0, 100, 16), i32(1, 5, 1), f32(2, 5, 16)},
               {"gather_rows: out: expected dtype BF16, got F32"});
  expect_error(GatherRows{bf16(0, 100, 16), i32(1, 5, 2), bf16(2, 5, 16)},
               {"gather_rows: ids: expected shape [5, 1], got [5, 2]"});

  expect_ok(ScatterRows{bf16(0, 3, 16), i32(1, 3, 1), bf16(2, 40, 16)});
  expect_error(ScatterRows{bf16(0, 3, 16), i32(1, 3, 1), bf16(2, 40, 15)},
               {"scatter_rows: dst: expected shape [*, 16], got [40, 15]"});

  expect_ok(Cast{f32(0, 3, 5), bf16(1, 3, 5)});
  expect_error(Cast{f32(0, 3, 5), i32(1, 3, 5)}, {"cast: y: expected dtype BF16 or F32, got I32"});

  // A KV cache write: contiguous source into a strided destination.
  expect_ok(Copy{bf16(0, 2, 32), bf16(1, 2, 32, 64)});
  expect_error(Copy{bf16(0, 2, 32), f32(1, 2, 32)}, {"copy: dst: expected dtype BF16, got F32"});
  expect_error(Copy{bf16(0, 2, 32), bf16(1, 2, 32, 31)}, {"copy: dst: row_stride 31 < cols 32"});

  expect_ok(PosEmbedInterp{bf16(0, 48, 16), i32(1, 7, 4), f32(2, 7, 4), bf16(3, 7, 16)});
  expect_error(PosEmbedInterp{bf16(0, 48, 16), i32(1, 7, 4), bf16(2, 7, 4), bf16(3, 7, 16)},
               {"pos_embed_interp: weight: expected dtype F32, got BF16"});
  expect_error(PosEmbedInterp{bf16(0, 48, 16), i32(1, 7, 3), f32(2, 7, 4), bf16(3, 7, 16)},
               {"pos_embed_interp: idx: expected shape [*, 4]"});

  expect_ok(Argmax{bf16(0, 2, 1000), i32(1, 2, 1)});
  expect_error(Argmax{bf16(0, 2, 1000), i32(1, 1, 1)}, {"argmax: out: expected shape [2, 1]"});
  expect_error(Argmax{bf16(0, 2, 0), i32(1, 2, 1)}, {"argmax: x: invalid shape [2, 0]"});
}

}  // namespace
}  // namespace ferry
