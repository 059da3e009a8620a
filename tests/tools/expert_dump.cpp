// Runs ferry's action expert (CPU backend) on an Alpamayo checkpoint folder over a seeded random
// stand-in for the text KV cache, and writes its inputs and outputs as .npy files for
// scripts/compare_expert_transformers.py:
//   x0.npy [waypoints, 2] f32, velocities.npy [steps, waypoints·2] f32 (exact bf16 values),
//   actions.npy [waypoints, 2] f32, k_cache.npy and v_cache.npy [layers·cache_len, kv] f32
//   (exact bf16 values), meta.npy [1, 3] i64 = (cache_len, offset, rope_pos0).
// Usage: ferry_expert_dump CHECKPOINT OUT_DIR [SEED]
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/bf16.h"
#include "format/safetensors.h"
#include "model/action_expert.h"
#include "model/config_json.h"
#include "model/weights.h"
#include "npy_write.h"
#include "resident_weights.h"

namespace ferry {
namespace {

constexpr int64_t kCacheLen = 20, kOffset = 15, kRopePos0 = 40;

Status run(const std::string& ckpt_dir, const std::string& out, uint64_t seed) {
  FERRY_ASSIGN_OR_RETURN(ModelConfig config, load_config(ckpt_dir));
  const AlpamayoConfig* a = config.alpamayo();
  if (a == nullptr) return make_error(ErrorCode::invalid_argument, "not an Alpamayo model");
  FERRY_ASSIGN_OR_RETURN(ModelWeights weights, describe_weights(config));
  FERRY_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::open(ckpt_dir));
  auto backend = create_cpu_backend();
  auto stream = backend->create_stream();

  // Every group resident, as ferry run loads them (dtype, shape and size checked).
  FERRY_RETURN_IF_ERROR(bind_checkpoint(weights, ckpt));
  FERRY_ASSIGN_OR_RETURN(testing::ResidentWeights resident,
                         testing::ResidentWeights::load(*backend, *stream, weights, ckpt));

  // The stand-in text cache: per layer kCacheLen rows of N(0, 1) keys and values.
  const int64_t layers = a->expert.num_layers, kv = a->expert.num_kv_heads * a->expert.head_dim;
  std::vector<uint16_t> k_host(static_cast<size_t>(layers * kCacheLen * kv));
  std::vector<uint16_t> v_host(k_host.size());
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (auto* h : {&k_host, &v_host}) {
    for (uint16_t& b : *h) b = f32_to_bf16(nd(rng));
  }
  FERRY_ASSIGN_OR_RETURN(DeviceBuffer k_dev, backend->allocate(k_host.size() * 2));
  FERRY_ASSIGN_OR_RETURN(DeviceBuffer v_dev, backend->allocate(v_host.size() * 2));
  backend->copy_to_device(*stream, k_dev.data(), k_host.data(), k_host.size() * 2);
  backend->copy_to_device(*stream, v_dev.data(), v_host.data(), v_host.size() * 2);

  FERRY_ASSIGN_OR_RETURN(ActionExpert expert, ActionExpert::create(*a, *backend));
  expert.begin(seed);
  const std::vector<float> x0(expert.actions().begin(), expert.actions().end());
  std::vector<float> velocities;
  for (int step = 0; step < expert.num_steps(); ++step) {
    for (size_t i = 0; i < weights.groups.size(); ++i) {
      const WeightGroup& g = weights.groups[i];
      void* base = resident.base(static_cast<int>(i));
      if (g.kind == GroupKind::expert_in) {
        FERRY_RETURN_IF_ERROR(expert.run_in(*stream, step, g, base));
      } else if (g.kind == GroupKind::expert_layer) {
        const size_t first = static_cast<size_t>(g.layer * kCacheLen * kv) * 2;
        ExpertLayerContext ctx;
        ctx.k_cache =
            make_view(static_cast<char*>(k_dev.data()) + first, DType::bf16, kCacheLen, kv);
        ctx.v_cache =
            make_view(static_cast<char*>(v_dev.data()) + first, DType::bf16, kCacheLen, kv);
        ctx.cache_len = kCacheLen;
        ctx.offset = kOffset;
        ctx.rope_pos0 = kRopePos0;
        FERRY_RETURN_IF_ERROR(expert.run_layer(*stream, g.layer, g, base, ctx));
      } else if (g.kind == GroupKind::expert_out) {
        FERRY_RETURN_IF_ERROR(expert.run_out(*stream, step, g, base));
        FERRY_RETURN_IF_ERROR(expert.finish_step(*stream, step));
        velocities.insert(velocities.end(), expert.last_velocity().begin(),
                          expert.last_velocity().end());
      }
    }
  }

  const int64_t tok = expert.num_tokens(), dims = a->action_space.action_dims;
  auto as_f32 = [](const std::vector<uint16_t>& h) {
    std::vector<float> f(h.size());
    for (size_t i = 0; i < h.size(); ++i) f[i] = bf16_to_f32(h[i]);
    return f;
  };
  const std::vector<float> kf = as_f32(k_host), vf = as_f32(v_host);
  const std::vector<int64_t> meta = {kCacheLen, kOffset, kRopePos0};
  bool ok = write_npy(out + "/x0.npy", "<f4", tok, dims, x0.data(), x0.size() * 4);
  ok = ok && write_npy(out + "/velocities.npy", "<f4", expert.num_steps(), tok * dims,
                       velocities.data(), velocities.size() * 4);
  ok = ok && write_npy(out + "/actions.npy", "<f4", tok, dims, expert.actions().data(),
                       expert.actions().size_bytes());
  ok = ok &&
       write_npy(out + "/k_cache.npy", "<f4", layers * kCacheLen, kv, kf.data(), kf.size() * 4);
  ok = ok &&
       write_npy(out + "/v_cache.npy", "<f4", layers * kCacheLen, kv, vf.data(), vf.size() * 4);
  ok = ok && write_npy(out + "/meta.npy", "<i8", 1, 3, meta.data(), meta.size() * 8);
  if (!ok) return make_error(ErrorCode::io, "cannot write to " + out);
  return Status::ok_status();
}

}  // namespace
}  // namespace ferry

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: ferry_expert_dump CHECKPOINT OUT_DIR [SEED]\n";
    return 2;
  }
  try {
    const ferry::Status st = ferry::run(argv[1], argv[2], argc > 3 ? std::stoull(argv[3]) : 1);
    if (!st.ok()) {
      std::cerr << st.error().to_string() << "\n";
      return 1;
    }
  } catch (const std::exception& e) {
    std::cerr << "bad argument: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
