// Runs ferry's vision encoder (CPU backend) on a Qwen3-VL / Alpamayo checkpoint folder and
// writes what it saw and produced as .npy files, for scripts/compare_vision_transformers.py:
//   pixel_values.npy [N, patch_values] f32, image_grid_thw.npy [images, 3] i64 (patch grid),
//   image_embeds.npy [N/4, out_hidden] f32 (exact bf16 values), deepstack_K.npy likewise.
// Usage: ferry_vision_dump CHECKPOINT OUT_DIR IMAGES HEIGHT WIDTH [SEED]
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/bf16.h"
#include "format/safetensors.h"
#include "model/config_json.h"
#include "model/vision_encoder.h"
#include "model/weights.h"
#include "npy_write.h"
#include "resident_weights.h"

namespace ferry {
namespace {

Status dump_bf16(Backend& backend, Stream& stream, const TensorView& v, const std::string& path) {
  std::vector<uint16_t> raw(static_cast<size_t>(v.numel()));
  backend.copy_to_host(stream, raw.data(), v.data, raw.size() * 2);
  FERRY_RETURN_IF_ERROR(backend.synchronize(stream));
  std::vector<float> f(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) f[i] = bf16_to_f32(raw[i]);
  if (!write_npy(path, "<f4", v.rows, v.cols, f.data(), f.size() * 4)) {
    return make_error(ErrorCode::io, "cannot write " + path);
  }
  return Status::ok_status();
}

Status run(const std::string& ckpt_dir, const std::string& out, int images, int64_t height,
           int64_t width, uint64_t seed) {
  FERRY_ASSIGN_OR_RETURN(ModelConfig config, load_config(ckpt_dir));
  const Qwen3VLConfig* vlm = config.vlm();
  if (vlm == nullptr) return make_error(ErrorCode::invalid_argument, "not a vision model");
  FERRY_ASSIGN_OR_RETURN(ModelWeights weights, describe_weights(config));
  FERRY_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::open(ckpt_dir));
  auto backend = create_cpu_backend();
  auto stream = backend->create_stream();

  const std::vector<ImageGeometry> geoms(static_cast<size_t>(images), {height, width});
  FERRY_ASSIGN_OR_RETURN(VisionEncoder enc, VisionEncoder::create(vlm->vision, *backend, geoms));
  const std::vector<float> pixels = synthetic_pixel_values(seed, geoms, vlm->vision);
  FERRY_RETURN_IF_ERROR(enc.upload_pixels(*stream, pixels));

  // Every group resident, as ferry run loads them (dtype, shape and size checked).
  FERRY_RETURN_IF_ERROR(bind_checkpoint(weights, ckpt));
  FERRY_ASSIGN_OR_RETURN(testing::ResidentWeights resident,
                         testing::ResidentWeights::load(*backend, *stream, weights, ckpt));
  for (size_t i = 0; i < weights.groups.size(); ++i) {
    const WeightGroup& g = weights.groups[i];
    void* base = resident.base(static_cast<int>(i));
    switch (g.kind) {
      case GroupKind::vision_patch:
        FERRY_RETURN_IF_ERROR(enc.run_patch(*stream, g, base));
        break;
      case GroupKind::vision_block:
        FERRY_RETURN_IF_ERROR(enc.run_block(*stream, g.layer, g, base));
        break;
      case GroupKind::vision_merger:
        if (g.layer >= 0) {
          FERRY_RETURN_IF_ERROR(enc.run_deepstack(*stream, g.layer, g, base));
        } else {
          FERRY_RETURN_IF_ERROR(enc.run_merger(*stream, g, base));
        }
        break;
      default:
        break;  // text and expert groups: not the vision tower's
    }
  }
  FERRY_RETURN_IF_ERROR(backend->synchronize(*stream));

  if (!write_npy(out + "/pixel_values.npy", "<f4", enc.num_patches(), vlm->vision.patch_values(),
                 pixels.data(), pixels.size() * 4)) {
    return make_error(ErrorCode::io, "cannot write to " + out);
  }
  std::vector<int64_t> grid;
  for (const ImageGeometry& g : geoms) {
    grid.insert(grid.end(),
                {1, g.height / vlm->vision.patch_size, g.width / vlm->vision.patch_size});
  }
  write_npy(out + "/image_grid_thw.npy", "<i8", images, 3, grid.data(), grid.size() * 8);
  FERRY_RETURN_IF_ERROR(
      dump_bf16(*backend, *stream, enc.image_embeds(), out + "/image_embeds.npy"));
  for (int k = 0; k < enc.num_deepstack(); ++k) {
    FERRY_RETURN_IF_ERROR(dump_bf16(*backend, *stream, enc.deepstack(k),
                                    out + "/deepstack_" + std::to_string(k) + ".npy"));
  }
  return Status::ok_status();
}

}  // namespace
}  // namespace ferry

int main(int argc, char** argv) {
  if (argc < 6) {
    std::cerr << "usage: ferry_vision_dump CHECKPOINT OUT_DIR IMAGES HEIGHT WIDTH [SEED]\n";
    return 2;
  }
  try {
    const ferry::Status st = ferry::run(argv[1], argv[2], std::stoi(argv[3]), std::stoll(argv[4]),
                                        std::stoll(argv[5]), argc > 6 ? std::stoull(argv[6]) : 1);
    if (!st.ok()) {
      std::cerr << st.error().to_string() << "\n";
      return 1;
    }
  } catch (const std::exception& e) {  // std::stoi on a bad argument
    std::cerr << "bad argument: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
