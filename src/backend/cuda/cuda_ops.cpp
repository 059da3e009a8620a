// The op layer: dispatches a validated op to its launcher.
#include <string>
#include <type_traits>
#include <variant>

#include "backend/cuda/argmax.cuh"
#include "backend/cuda/attention.cuh"
#include "backend/cuda/elementwise.cuh"
#include "backend/cuda/fused.cuh"
#include "backend/cuda/linear.cuh"
#include "backend/cuda/norm.cuh"
#include "backend/cuda/op_context.h"
#include "backend/cuda/rope.cuh"
#include "backend/cuda/rows.cuh"

namespace ferry::cuda {

Status check_cuda_limits(const Op& op) {
  if (const auto* a = std::get_if<Attention>(&op)) {
    if (a->head_dim <= 0 || a->head_dim > kAttentionMaxHeadDim) {
      return make_error(ErrorCode::unsupported,
                        "attention: the cuda backend supports head_dim <= " +
                            std::to_string(kAttentionMaxHeadDim) + ", got " +
                            std::to_string(a->head_dim));
    }
    if (a->num_spans < 1 || a->num_spans > 2) {
      return make_error(ErrorCode::invalid_argument, "attention: num_spans must be 1 or 2");
    }
  }
  return Status();
}

Status run_cuda_op(const OpContext& ctx, const Op& op) {
  return std::visit(
      [&](const auto& o) -> Status {
        using T = std::decay_t<decltype(o)>;
        if constexpr (std::is_same_v<T, Linear>) return run_linear(ctx, o);
        if constexpr (std::is_same_v<T, RmsNorm>) return run_rms_norm(ctx, o);
        if constexpr (std::is_same_v<T, LayerNorm>) return run_layer_norm(ctx, o);
        if constexpr (std::is_same_v<T, Rope>) return run_rope(ctx, o);
        if constexpr (std::is_same_v<T, RopeTable>) return run_rope_table(ctx, o);
        if constexpr (std::is_same_v<T, Attention>) return run_attention(ctx, o);
        if constexpr (std::is_same_v<T, SwiGlu>) return run_swiglu(ctx, o);
        if constexpr (std::is_same_v<T, Add>) return run_add(ctx, o);
        if constexpr (std::is_same_v<T, AddRows>) return run_add_rows(ctx, o);
        if constexpr (std::is_same_v<T, GatherRows>) return run_gather_rows(ctx, o);
        if constexpr (std::is_same_v<T, ScatterRows>) return run_scatter_rows(ctx, o);
        if constexpr (std::is_same_v<T, Cast>) return run_cast(ctx, o);
        if constexpr (std::is_same_v<T, Copy>) return run_copy(ctx, o);
        if constexpr (std::is_same_v<T, PosEmbedInterp>) return run_pos_embed_interp(ctx, o);
        if constexpr (std::is_same_v<T, Argmax>) return run_argmax(ctx, o);
        if constexpr (std::is_same_v<T, AddRmsNorm>) return run_add_rms_norm(ctx, o);
        if constexpr (std::is_same_v<T, QkNormRope>) return run_qk_norm_rope(ctx, o);
      },
      op);
}

}  // namespace ferry::cuda
