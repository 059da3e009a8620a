// Runs ferry's vision encoder (CPU backend) on a Qwen3-VL / Alpamayo checkpoint folder and
// writes what it saw and produced as .npy files, for scripts/compare_vision_transformers.py:
//   pixel_values.npy [N, patch_values] f32, image_grid_thw.npy [images, 3] i64 (patch grid),
//   image_embeds.npy [N/4, out_hidden] f32 (exact bf16 values), deepstack_K.npy likewise.
// Usage: ferry_vision_dump CHECKPOINT OUT_DIR IMAGES HEIGHT WIDTH [SEED]
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/bf16.h"
#include "format/config_json.h"
#include "format/safetensors.h"
#include "model/vision_encoder.h"
#include "model/weights.h"

namespace ferry {
namespace {

// A version-1.0 .npy file of a 2-D little-endian array.
bool write_npy(const std::string& path, const char* descr, int64_t rows, int64_t cols,
               const void* data, size_t bytes) {
  std::string header = "{'descr': '" + std::string(descr) +
                       "', 'fortran_order': False, 'shape': (" + std::to_string(rows) + ", " +
                       std::to_string(cols) + "), }";
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  std::ofstream f(path, std::ios::binary);
  const char magic[8] = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0};
  f.write(magic, 8);
  const auto len = static_cast<uint16_t>(header.size());
  const char len_bytes[2] = {static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
  f.write(len_bytes, 2);
  f.write(header.data(), static_cast<std::streamsize>(header.size()));
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  return static_cast<bool>(f);
}

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

  for (const WeightGroup& g : weights.groups) {
    if (g.kind != GroupKind::vision_patch && g.kind != GroupKind::vision_block &&
        g.kind != GroupKind::vision_merger) {
      continue;
    }
    std::vector<std::byte> host(g.bytes);
    for (const WeightSpec& s : g.tensors) {
      const Checkpoint::Entry* e = ckpt.find(s.checkpoint_name);
      if (e == nullptr || e->info->dtype != s.dtype || e->info->bytes != s.bytes) {
        return make_error(ErrorCode::format, "tensor " + s.checkpoint_name + " missing or wrong");
      }
      const auto bytes = ckpt.data(*e);
      std::memcpy(host.data() + s.offset, bytes.data(), bytes.size());
    }
    FERRY_ASSIGN_OR_RETURN(DeviceBuffer dev, backend->allocate(g.bytes));
    backend->copy_to_device(*stream, dev.data(), host.data(), host.size());
    switch (g.kind) {
      case GroupKind::vision_patch:
        FERRY_RETURN_IF_ERROR(enc.run_patch(*stream, g, dev.data()));
        break;
      case GroupKind::vision_block:
        FERRY_RETURN_IF_ERROR(enc.run_block(*stream, g.layer, g, dev.data()));
        break;
      default:
        if (g.layer >= 0) {
          FERRY_RETURN_IF_ERROR(enc.run_deepstack(*stream, g.layer, g, dev.data()));
        } else {
          FERRY_RETURN_IF_ERROR(enc.run_merger(*stream, g, dev.data()));
        }
    }
    FERRY_RETURN_IF_ERROR(backend->synchronize(*stream));  // host and dev die here
  }

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
