// The summation order of the batch-1 decode GEMV (Linear with M = 1): the contract every engine
// that computes its dot products keeps, so that a dot product gives the same fp32 bits whether
// the GPU (CUDA cores), the CPU backend or the host engine computed it (issue 26).
//
// For one row n of w ([N, K] bf16) and the bf16 activation x ([K]; an f32 x is rounded to bf16
// first, as ops.h Linear says):
//   1. 256 position sums, a[j] for j in [0, 256): a[j] = Σ x[k]·w[n, k] over k ≡ j (mod 256),
//      added in increasing k, each starting at +0.0f. Each product is rounded to fp32 and then
//      added (a multiply, then an add: never a fused multiply-add). The product of two bf16
//      values is exact in fp32 unless it underflows below 2^-126 or overflows, and there a fused
//      multiply-add would round differently; so the C++ build turns contraction off
//      (-ffp-contract=off) and CUDA code uses __fmul_rn and __fadd_rn.
//   2. 32 lane sums, s[l] for l in [0, 32), from the 8 position sums a[8l .. 8l+7]:
//      s[l] = ((a[8l] + a[8l+1]) + (a[8l+2] + a[8l+3])) + ((a[8l+4] + a[8l+5]) + (a[8l+6] +
//      a[8l+7])).
//   3. A butterfly over the lanes: for off = 16, 8, 4, 2, 1 in turn, s[l] = s[l] + s[l + off]
//      for every l < off. The dot product is s[0].
// On a GPU this is a warp per row: lane l loads the 8 consecutive values k = 8c .. 8c+7 of every
// chunk c with c mod 32 = l and keeps 8 fp32 sums, then a shuffle-xor tree (off 16 .. 1; xor
// gives the same sums, fp32 addition being commutative). A CPU keeps the 256 sums in 16
// registers of 16 floats and reads w contiguously. No engine may flush denormals, reassociate,
// or use a dot-product instruction (VDPBF16PS) or a built-in horizontal reduction.
// NaN: every engine gives a NaN where another does, but its payload is not part of the contract.
//
// What follows the dot product (bias, activation, rounding to the output dtype: ops.h Linear)
// is the epilogue; it is not part of this order. An engine that hands dot products to another
// device (the host engine) hands over s[0] in fp32 and the epilogue runs where the output lives.
#pragma once

#include <cstdint>

namespace ferry {

inline constexpr int kGemvPositions = 256;  // step 1: k mod 256
inline constexpr int kGemvLanes = 32;       // step 2: 8 positions per lane
inline constexpr int kGemvPositionsPerLane = kGemvPositions / kGemvLanes;  // 8: one 16-byte load

// The plain reference of the order above, one scalar at a time: dot products of the bf16 values
// x[0 .. k) with rows [0, n) of w (row stride ldw elements), written to out[0 .. n). Used by tests
// as the definition every faster engine is compared against, bit for bit.
void gemv_fixed_order_ref(const uint16_t* x, const uint16_t* w, int64_t ldw, int64_t n, int64_t k,
                          float* out);

// One row's dot product by the reference order.
float dot_fixed_order_ref(const uint16_t* x, const uint16_t* w_row, int64_t k);

// The CPU's fast engines for the same order, the same bits as the reference: one row at a time,
// x converted on the fly, the position sums in vector registers (AVX-512: all 256 in 16 registers
// of 16 floats; AVX2: 64 at a time in 8 registers of 8 floats, four passes over the row, each
// reading its quarter of every 512-byte run, the row staying in L1/L2 between passes). Tails
// (K mod 256) are added one element at a time after the vector loop, which keeps each position's
// order. Compiled with
// target attributes and chosen at run time (no ifunc: its resolver runs before sanitizer
// runtimes start).
enum class GemvIsa { scalar, avx2, avx512 };
const char* gemv_isa_name(GemvIsa isa);
bool gemv_isa_supported(GemvIsa isa);
GemvIsa gemv_best_isa();  // the widest engine this CPU runs

// gemv_fixed_order_ref's result with the given engine (the scalar reference where `isa` is not
// supported here).
void gemv_fixed_order(GemvIsa isa, const uint16_t* x, const uint16_t* w, int64_t ldw, int64_t n,
                      int64_t k, float* out);

}  // namespace ferry
