// Scaled dot-product attention with grouped-query heads, two passes per (query, head): scores of
// the visible keys into one row buffer, then softmax and the weighted sum of values.
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_common.h"
#include "backend/cpu/cpu_ops.h"
#include "core/thread_pool.h"

namespace ferry::cpu {

Status attention(const Attention& op, ThreadPool* pool) {
  const int64_t s_rows = op.q.rows;
  const int64_t heads = op.num_heads;
  const int64_t dim = op.head_dim;
  const int64_t group = heads / op.num_kv_heads;
  const int64_t rows0 = op.kv[0].k.rows;
  const int64_t total = rows0 + (op.num_spans > 1 ? op.kv[1].k.rows : 0);

  // Head kv_head of key (or value) j: span 0's rows come first, then span 1's.
  auto kv_row = [&](bool value, int64_t j, int64_t kv_head) {
    const bool first = j < rows0;
    const KvSpan& span = op.kv[first ? 0 : 1];
    return row_ptr<const uint16_t>(value ? span.v : span.k, first ? j : j - rows0) + kv_head * dim;
  };

  // Device-side inputs are plain memory here; read them when the op runs (after the work that
  // wrote them), exactly as the CUDA kernels do.
  const int64_t q_pos0 =
      op.q_pos0_dev.empty() ? op.q_pos0 : *row_ptr<const int32_t>(op.q_pos0_dev, 0);
  if (q_pos0 < 0) return make_error(ErrorCode::invalid_argument, "attention: q_pos0_dev < 0");
  std::vector<int64_t> seg;  // segment starts, then S
  if (!op.segments.empty()) {
    for (int64_t r = 0; r < op.segments.rows; ++r) {
      seg.push_back(*row_ptr<const int32_t>(op.segments, r));
      const int64_t len = r > 0 ? seg[r] - seg[r - 1] : 0;
      if ((r == 0 && seg[0] != 0) || len < 0 || len > op.max_segment_rows) {
        return make_error(ErrorCode::invalid_argument,
                          "attention: segments must run from 0 to S in steps of at most "
                          "max_segment_rows");
      }
    }
    if (seg.back() != s_rows) {
      return make_error(ErrorCode::invalid_argument, "attention: the last segment must end at S");
    }
  }
  // Keys [first, end) that query i may see.
  auto key_range = [&](int64_t i) -> std::pair<int64_t, int64_t> {
    if (!seg.empty()) {
      const auto it = std::upper_bound(seg.begin(), seg.end(), i);
      return {*(it - 1), *it};
    }
    if (op.causal) return {0, std::clamp<int64_t>(q_pos0 + i + 1, 0, total)};
    return {0, total};
  };

  const int64_t work = std::max<int64_t>(1, total * dim);
  parallel_for(pool, s_rows * heads, std::max<int64_t>(1, 65536 / work),
               [&](int64_t begin, int64_t end) {
                 std::vector<float> scores(static_cast<size_t>(std::max<int64_t>(1, total)));
                 std::vector<float> qf(static_cast<size_t>(dim));
                 std::vector<float> acc(static_cast<size_t>(dim));
                 for (int64_t item = begin; item < end; ++item) {
                   const int64_t i = item / heads;
                   const int64_t h = item % heads;
                   const int64_t kv_head = h / group;
                   const auto [first, end_key] = key_range(i);
                   uint16_t* out = row_ptr<uint16_t>(op.out, i) + h * dim;
                   if (end_key <= first) {
                     std::fill(out, out + dim, uint16_t{0});
                     continue;
                   }
                   const uint16_t* q = row_ptr<const uint16_t>(op.q, i) + h * dim;
                   for (int64_t d = 0; d < dim; ++d) qf[d] = bf16_to_f32(q[d]);
                   float max_score = -std::numeric_limits<float>::infinity();
                   for (int64_t j = first; j < end_key; ++j) {
                     const float s = dot_f32(qf.data(), kv_row(false, j, kv_head), dim) * op.scale;
                     scores[j] = s;
                     max_score = std::max(max_score, s);
                   }
                   float sum = 0.0f;
                   for (int64_t j = first; j < end_key; ++j) {
                     scores[j] = std::exp(scores[j] - max_score);
                     sum += scores[j];
                   }
                   std::fill(acc.begin(), acc.end(), 0.0f);
                   for (int64_t j = first; j < end_key; ++j) {
                     const float p = scores[j] / sum;
                     const uint16_t* v = kv_row(true, j, kv_head);
                     for (int64_t d = 0; d < dim; ++d) acc[d] += p * bf16_to_f32(v[d]);
                   }
                   for (int64_t d = 0; d < dim; ++d) out[d] = f32_to_bf16(acc[d]);
                 }
               });
  return Status();
}

}  // namespace ferry::cpu
