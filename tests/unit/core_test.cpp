#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/bf16.h"
#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"

namespace ferry {
namespace {

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 is exactly halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1.0).
  EXPECT_EQ(f32_to_bf16(1.0f + 0.00390625f), 0x3f80);
  // 1 + 3·2^-8 is halfway between 1+2^-7 (odd) and 1+2^-6 (even): rounds up to even.
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * 0.00390625f), 0x3f82);
  EXPECT_EQ(bf16_to_f32(0xc000), -2.0f);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
}

TEST(DType, ParsesSafetensorsNames) {
  EXPECT_EQ(parse_dtype("BF16"), DType::bf16);
  EXPECT_EQ(parse_dtype("F8_E4M3"), DType::f8_e4m3);
  EXPECT_FALSE(parse_dtype("bf16").has_value());
  EXPECT_EQ(dtype_size(DType::i64), 8u);
  EXPECT_EQ(dtype_name(DType::f32), "F32");
}

Result<int> half(int v) {
  if (v % 2) return make_error(ErrorCode::invalid_argument, "odd");
  return v / 2;
}
Result<int> quarter(int v) {
  FERRY_ASSIGN_OR_RETURN(int h, half(v));
  return half(h);
}

TEST(Status, PropagatesErrors) {
  EXPECT_EQ(quarter(8).value(), 2);
  auto r = quarter(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().to_string(), "invalid argument: odd");
}

TEST(TensorView, SlicesRowsAndColumns) {
  float data[12];
  TensorView v = make_view(data, DType::f32, 3, 4);
  TensorView c = v.slice_cols(1, 2).slice_rows(1, 2);
  EXPECT_EQ(c.data, &data[5]);
  EXPECT_EQ(c.rows, 2);
  EXPECT_EQ(c.cols, 2);
  EXPECT_EQ(c.stride(), 4);
}

}  // namespace
}  // namespace ferry
