#include "backend/gemv_order.h"

#include "core/bf16.h"

namespace ferry {

float dot_fixed_order_ref(const uint16_t* x, const uint16_t* w_row, int64_t k) {
  float a[kGemvPositions] = {};
  for (int64_t i = 0; i < k; ++i) {
    a[i % kGemvPositions] += bf16_to_f32(x[i]) * bf16_to_f32(w_row[i]);
  }
  float s[kGemvLanes];
  for (int l = 0; l < kGemvLanes; ++l) {
    static_assert(kGemvPositionsPerLane == 8, "the lane sum below pairs 8 positions");
    const float* p = a + kGemvPositionsPerLane * l;
    s[l] = ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
  }
  for (int off = kGemvLanes / 2; off >= 1; off /= 2) {
    for (int l = 0; l < off; ++l) s[l] = s[l] + s[l + off];
  }
  return s[0];
}

void gemv_fixed_order_ref(const uint16_t* x, const uint16_t* w, int64_t ldw, int64_t n, int64_t k,
                          float* out) {
  for (int64_t r = 0; r < n; ++r) out[r] = dot_fixed_order_ref(x, w + r * ldw, k);
}

}  // namespace ferry
