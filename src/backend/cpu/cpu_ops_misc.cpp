// Element-wise and row-movement ops, argmax, and the op dispatch.
#include <cmath>
#include <cstring>
#include <string>
#include <variant>
#include <vector>

#include "backend/cpu/cpu_common.h"
#include "backend/cpu/cpu_ops.h"
#include "core/thread_pool.h"

namespace ferry::cpu {
namespace {

int64_t rows_per_range(int64_t cols) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, cols));
}

// dst row rd += src row rs, in dst's dtype (ops.h Add).
void add_row(const TensorView& dst, int64_t rd, const TensorView& src, int64_t rs) {
  for (int64_t c = 0; c < dst.cols; ++c) {
    store_f32(dst, rd, c, load_f32(dst, rd, c) + load_f32(src, rs, c));
  }
}

void copy_row(const TensorView& dst, int64_t rd, const TensorView& src, int64_t rs) {
  std::memcpy(row_bytes(dst, rd), row_bytes(src, rs),
              static_cast<size_t>(src.cols) * dtype_size(src.dtype));
}

int32_t index_at(const TensorView& idx, int64_t r, int64_t c = 0) {
  return row_ptr<const int32_t>(idx, r)[c];
}

}  // namespace

Status add(const Add& op, ThreadPool* pool) {
  parallel_for(pool, op.dst.rows, rows_per_range(op.dst.cols), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) add_row(op.dst, r, op.src, r);
  });
  return Status();
}

// Row indices that must be distinct (ops.h): a repeat would make the result depend on the order
// threads run in, so it is an error.
static Status check_distinct(const char* op, const TensorView& rows, int64_t dst_rows) {
  std::vector<bool> seen(static_cast<size_t>(dst_rows), false);
  for (int64_t i = 0; i < rows.rows; ++i) {
    const int32_t r = index_at(rows, i);
    if (seen[static_cast<size_t>(r)]) {
      return make_error(ErrorCode::invalid_argument, std::string(op) + ": rows: row " +
                                                         std::to_string(r) +
                                                         " repeats (rows must be distinct)");
    }
    seen[static_cast<size_t>(r)] = true;
  }
  return Status();
}

Status add_rows(const AddRows& op, ThreadPool* pool) {
  FERRY_RETURN_IF_ERROR(check_indices("add_rows", "rows", op.rows, op.dst.rows));
  FERRY_RETURN_IF_ERROR(check_distinct("add_rows", op.rows, op.dst.rows));
  // Rows are distinct (ops.h), so ranges of i touch disjoint dst rows.
  parallel_for(pool, op.src.rows, rows_per_range(op.src.cols), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) add_row(op.dst, index_at(op.rows, i), op.src, i);
  });
  return Status();
}

Status gather_rows(const GatherRows& op, ThreadPool* pool) {
  FERRY_RETURN_IF_ERROR(check_indices("gather_rows", "ids", op.ids, op.table.rows));
  parallel_for(pool, op.out.rows, rows_per_range(op.out.cols), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) copy_row(op.out, i, op.table, index_at(op.ids, i));
  });
  return Status();
}

Status scatter_rows(const ScatterRows& op, ThreadPool* pool) {
  FERRY_RETURN_IF_ERROR(check_indices("scatter_rows", "rows", op.rows, op.dst.rows));
  FERRY_RETURN_IF_ERROR(check_distinct("scatter_rows", op.rows, op.dst.rows));
  parallel_for(pool, op.src.rows, rows_per_range(op.src.cols), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) copy_row(op.dst, index_at(op.rows, i), op.src, i);
  });
  return Status();
}

Status cast(const Cast& op, ThreadPool* pool) {
  parallel_for(pool, op.x.rows, rows_per_range(op.x.cols), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      if (op.x.dtype == op.y.dtype) {
        copy_row(op.y, r, op.x, r);
        continue;
      }
      for (int64_t c = 0; c < op.x.cols; ++c) store_f32(op.y, r, c, load_f32(op.x, r, c));
    }
  });
  return Status();
}

Status copy(const Copy& op, ThreadPool* pool) {
  parallel_for(pool, op.src.rows, rows_per_range(op.src.cols), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) copy_row(op.dst, r, op.src, r);
  });
  return Status();
}

Status pos_embed_interp(const PosEmbedInterp& op, ThreadPool* pool) {
  FERRY_RETURN_IF_ERROR(check_indices("pos_embed_interp", "idx", op.idx, op.table.rows));
  const int64_t cols = op.out.cols;
  parallel_for(pool, op.out.rows, rows_per_range(cols), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const uint16_t* e[4];
      float w[4];
      for (int k = 0; k < 4; ++k) {
        e[k] = row_ptr<const uint16_t>(op.table, index_at(op.idx, r, k));
        w[k] = round_bf16(row_ptr<const float>(op.weight, r)[k]);
      }
      uint16_t* out = row_ptr<uint16_t>(op.out, r);
      for (int64_t c = 0; c < cols; ++c) {
        float acc = round_bf16(bf16_to_f32(e[0][c]) * w[0]);
        for (int k = 1; k < 4; ++k) acc = round_bf16(acc + round_bf16(bf16_to_f32(e[k][c]) * w[k]));
        out[c] = f32_to_bf16(acc);
      }
    }
  });
  return Status();
}

Status argmax(const Argmax& op, ThreadPool* pool) {
  parallel_for(pool, op.x.rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      int64_t best = 0;
      float best_value = std::nanf("");
      for (int64_t c = 0; c < op.x.cols; ++c) {
        const float v = load_f32(op.x, r, c);
        if (std::isnan(v)) continue;
        if (std::isnan(best_value) || v > best_value) {
          best = c;
          best_value = v;
        }
      }
      row_ptr<int32_t>(op.out, r)[0] = static_cast<int32_t>(best);
    }
  });
  return Status();
}

namespace {
struct Executor {
  ThreadPool* pool;
  Status operator()(const Linear& o) const { return linear(o, pool); }
  Status operator()(const RmsNorm& o) const { return rms_norm(o, pool); }
  Status operator()(const LayerNorm& o) const { return layer_norm(o, pool); }
  Status operator()(const Rope& o) const { return rope(o, pool); }
  Status operator()(const RopeTable& o) const { return rope_table(o, pool); }
  Status operator()(const Attention& o) const { return attention(o, pool); }
  Status operator()(const SwiGlu& o) const { return swiglu(o, pool); }
  Status operator()(const Add& o) const { return add(o, pool); }
  Status operator()(const AddRows& o) const { return add_rows(o, pool); }
  Status operator()(const GatherRows& o) const { return gather_rows(o, pool); }
  Status operator()(const ScatterRows& o) const { return scatter_rows(o, pool); }
  Status operator()(const Cast& o) const { return cast(o, pool); }
  Status operator()(const Copy& o) const { return copy(o, pool); }
  Status operator()(const PosEmbedInterp& o) const { return pos_embed_interp(o, pool); }
  Status operator()(const Argmax& o) const { return argmax(o, pool); }
  // The fused ops are their sequences, run in order: the reference by construction.
  Status operator()(const AddRmsNorm& o) const {
    FERRY_RETURN_IF_ERROR((*this)(add_part(o)));
    return (*this)(norm_part(o));
  }
  Status operator()(const QkNormRope& o) const {
    FERRY_RETURN_IF_ERROR((*this)(q_norm_part(o)));
    FERRY_RETURN_IF_ERROR((*this)(k_norm_part(o)));
    FERRY_RETURN_IF_ERROR((*this)(rope_part(o)));
    return o.kv_dst.empty() ? Status() : (*this)(store_part(o));
  }
};
}  // namespace

Status execute(const Op& op, ThreadPool* pool) {
  return std::visit(Executor{pool}, op);
}

Status run_op(const Op& op, ThreadPool* pool) {
  FERRY_RETURN_IF_ERROR(validate(op));
  return execute(op, pool);
}

}  // namespace ferry::cpu
