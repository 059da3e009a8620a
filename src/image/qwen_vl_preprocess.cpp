// Qwen3-VL preprocessing (see qwen_vl_preprocess.h). The float steps copy transformers' dtypes:
// the mean and std are multiplied by 1/rescale_factor in f32 (the fused rescale-normalize),
// then each pixel is (f32(x) − mean) / std in f32, a true division, as torchvision's normalize.
#include "image/qwen_vl_preprocess.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <fstream>
#include <sstream>
#include <thread>

#include "format/strict_json.h"
#include "image/resize.h"
#include "model/vision_tables.h"

namespace ferry {
namespace {

// Pixel counts past this are refused whatever a config asks (2^26 pixels = 256 Ki patches of
// 16², about 1.6 GB of f32 pixel values).
constexpr int64_t kMaxPixelsCap = int64_t{1} << 26;
// transformers refuses images whose long side is over 200 times the short one.
constexpr double kMaxAspectRatio = 200.0;

Error bad(const std::string& label, const std::string& what) {
  return make_error(ErrorCode::format, label + ": " + what);
}

Result<int64_t> read_int(const nlohmann::json& j, const char* key, int64_t lo, int64_t hi,
                         const std::string& label) {
  const nlohmann::json& v = j.at(key);
  if (!v.is_number_integer()) return bad(label, std::string(key) + " must be an integer");
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) {
    return bad(label, std::string(key) + " = " + std::to_string(x) + " is outside [" +
                          std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return x;
}

Result<std::array<double, 3>> read_triple(const nlohmann::json& j, const char* key,
                                          const std::string& label) {
  const nlohmann::json& v = j.at(key);
  std::array<double, 3> out{};
  if (v.is_number()) {  // one value for every channel
    out.fill(v.get<double>());
  } else if (v.is_array() && v.size() == 3 &&
             std::all_of(v.begin(), v.end(), [](const auto& e) { return e.is_number(); })) {
    for (size_t c = 0; c < 3; ++c) out[c] = v[c].get<double>();
  } else {
    return bad(label, std::string(key) + " must be a number or 3 numbers");
  }
  for (double x : out) {
    if (!std::isfinite(x) || std::abs(x) > 1e6) {
      return bad(label, std::string(key) + " has a value out of range");
    }
  }
  return out;
}

Status require_true(const nlohmann::json& j, const char* key, const std::string& label) {
  if (!j.contains(key) || j.at(key).is_null()) return Status::ok_status();
  if (!j.at(key).is_boolean()) return bad(label, std::string(key) + " must be true or false");
  if (!j.at(key).get<bool>()) {
    return make_error(ErrorCode::unsupported, label + ": " + key + " = false is not supported");
  }
  return Status::ok_status();
}

bool present(const nlohmann::json& j, const char* key) {
  return j.contains(key) && !j.at(key).is_null();
}

}  // namespace

VisionPreprocessConfig VisionPreprocessConfig::alpamayo_r1() {
  VisionPreprocessConfig c;
  c.min_pixels = 163840;
  c.max_pixels = 196608;
  return c;
}

Result<VisionPreprocessConfig> parse_preprocessor_config(std::string_view json_text,
                                                         const std::string& label) {
  FERRY_ASSIGN_OR_RETURN(nlohmann::json j,
                         strict_json::parse(json_text, 8, label, "preprocessor config"));
  if (!j.is_object()) return bad(label, "not a JSON object");
  VisionPreprocessConfig c;
  if (present(j, "size")) {
    const nlohmann::json& size = j.at("size");
    if (!size.is_object()) return bad(label, "size must be an object");
    if (present(size, "shortest_edge")) {
      FERRY_ASSIGN_OR_RETURN(c.min_pixels,
                             read_int(size, "shortest_edge", 1, kMaxPixelsCap, label));
    }
    if (present(size, "longest_edge")) {
      FERRY_ASSIGN_OR_RETURN(c.max_pixels, read_int(size, "longest_edge", 1, kMaxPixelsCap, label));
    }
  }
  // As in the processor's __init__: min_pixels / max_pixels win over size.
  if (present(j, "min_pixels")) {
    FERRY_ASSIGN_OR_RETURN(c.min_pixels, read_int(j, "min_pixels", 1, kMaxPixelsCap, label));
  }
  if (present(j, "max_pixels")) {
    FERRY_ASSIGN_OR_RETURN(c.max_pixels, read_int(j, "max_pixels", 1, kMaxPixelsCap, label));
  }
  if (present(j, "patch_size")) {
    FERRY_ASSIGN_OR_RETURN(c.patch_size, read_int(j, "patch_size", 1, 256, label));
  }
  if (present(j, "temporal_patch_size")) {
    FERRY_ASSIGN_OR_RETURN(c.temporal_patch_size, read_int(j, "temporal_patch_size", 1, 16, label));
  }
  if (present(j, "merge_size")) {
    FERRY_ASSIGN_OR_RETURN(c.merge_size, read_int(j, "merge_size", 1, 16, label));
  }
  if (present(j, "image_mean")) {
    FERRY_ASSIGN_OR_RETURN(c.image_mean, read_triple(j, "image_mean", label));
  }
  if (present(j, "image_std")) {
    FERRY_ASSIGN_OR_RETURN(c.image_std, read_triple(j, "image_std", label));
  }
  for (double s : c.image_std) {
    if (s == 0.0) return bad(label, "image_std has a zero");
  }
  if (present(j, "rescale_factor")) {
    const nlohmann::json& r = j.at("rescale_factor");
    if (!r.is_number() || !(r.get<double>() > 0.0) || !std::isfinite(1.0 / r.get<double>())) {
      return bad(label, "rescale_factor must be a positive number");
    }
    c.rescale_factor = r.get<double>();
  }
  for (const char* key : {"do_resize", "do_rescale", "do_normalize", "do_convert_rgb"}) {
    FERRY_RETURN_IF_ERROR(require_true(j, key, label));
  }
  if (present(j, "resample")) {  // PIL's enum: 3 = BICUBIC
    FERRY_ASSIGN_OR_RETURN(int64_t resample, read_int(j, "resample", 0, 5, label));
    if (resample != 3) {
      return make_error(ErrorCode::unsupported, label + ": resample = " + std::to_string(resample) +
                                                    " is not supported (only 3, bicubic)");
    }
  }
  if (c.min_pixels > c.max_pixels) return bad(label, "min_pixels is above max_pixels");
  if (c.max_pixels < c.factor() * c.factor()) {
    return bad(label, "max_pixels is below one patch window (" +
                          std::to_string(c.factor() * c.factor()) + ")");
  }
  return c;
}

Result<VisionPreprocessConfig> load_preprocessor_config(const std::string& model_dir) {
  // Either preprocessor_config.json (save_pretrained's flat file), or the image_processor object
  // of processor_config.json (the combined file some checkpoints ship instead).
  for (const char* name : {"preprocessor_config.json", "processor_config.json"}) {
    const std::string path = model_dir + "/" + name;
    std::ifstream f(path, std::ios::binary);
    if (!f) continue;
    std::ostringstream text;
    text << f.rdbuf();
    if (f.bad()) return make_error(ErrorCode::io, path + ": cannot read");
    if (std::string(name) == "preprocessor_config.json") {
      return parse_preprocessor_config(text.str(), path);
    }
    FERRY_ASSIGN_OR_RETURN(nlohmann::json j,
                           strict_json::parse(text.str(), 8, path, "processor config"));
    if (j.is_object() && j.contains("image_processor")) {
      return parse_preprocessor_config(j.at("image_processor").dump(), path);
    }
  }
  return VisionPreprocessConfig::qwen3_vl();
}

Status check_preprocess_matches(const VisionPreprocessConfig& pre, const VisionConfig& vision) {
  if (pre.patch_size != vision.patch_size ||
      pre.temporal_patch_size != vision.temporal_patch_size ||
      pre.merge_size != vision.spatial_merge_size || vision.in_channels != 3) {
    return make_error(
        ErrorCode::format,
        "preprocessor config (patch " + std::to_string(pre.patch_size) + ", temporal " +
            std::to_string(pre.temporal_patch_size) + ", merge " + std::to_string(pre.merge_size) +
            ") does not match the vision config (patch " + std::to_string(vision.patch_size) +
            ", temporal " + std::to_string(vision.temporal_patch_size) + ", merge " +
            std::to_string(vision.spatial_merge_size) + ", " + std::to_string(vision.in_channels) +
            " channels)");
  }
  return Status::ok_status();
}

Result<ResizedSize> smart_resize(int64_t height, int64_t width, const VisionPreprocessConfig& cfg) {
  const std::string size = std::to_string(width) + "x" + std::to_string(height);
  if (height < 1 || width < 1) {
    return make_error(ErrorCode::invalid_argument, "smart_resize: empty image " + size);
  }
  const auto h = static_cast<double>(height), w = static_cast<double>(width);
  if (std::max(h, w) / std::min(h, w) > kMaxAspectRatio) {
    return make_error(ErrorCode::invalid_argument,
                      "image " + size + ": aspect ratio over 200 (the processor refuses it)");
  }
  const auto f = static_cast<double>(cfg.factor());
  // Python's round() on the quotient: ties to even, which nearbyint does in the default mode.
  double hb = std::nearbyint(h / f) * f, wb = std::nearbyint(w / f) * f;
  const auto min_px = static_cast<double>(cfg.min_pixels);
  const auto max_px = static_cast<double>(cfg.max_pixels);
  if (hb * wb > max_px) {
    const double beta = std::sqrt((h * w) / max_px);
    hb = std::max(f, std::floor(h / beta / f) * f);
    wb = std::max(f, std::floor(w / beta / f) * f);
  } else if (hb * wb < min_px) {
    const double beta = std::sqrt(min_px / (h * w));
    hb = std::ceil(h * beta / f) * f;
    wb = std::ceil(w * beta / f) * f;
  }
  if (hb < f || wb < f || hb * wb > static_cast<double>(kMaxPixelsCap)) {
    return make_error(ErrorCode::invalid_argument,
                      "image " + size + ": resizes to " + std::to_string(wb) + "x" +
                          std::to_string(hb) + ", outside what ferry accepts");
  }
  return ResizedSize{static_cast<int64_t>(hb), static_cast<int64_t>(wb)};
}

int64_t PreprocessedImages::num_patches() const {
  return patch_values > 0 ? static_cast<int64_t>(pixel_values.size()) / patch_values : 0;
}

Result<RgbImage> qwen_vl_resize(const RgbImage& image, const VisionPreprocessConfig& cfg) {
  FERRY_ASSIGN_OR_RETURN(ResizedSize s, smart_resize(image.height, image.width, cfg));
  if (s.height == image.height && s.width == image.width) return image;  // torchvision: as is
  return resize_bicubic_aa(image, s.height, s.width);
}

Status patchify_into(const RgbImage& resized, const VisionPreprocessConfig& cfg,
                     std::span<float> out) {
  const int64_t ps = cfg.patch_size, tp = cfg.temporal_patch_size, merge = cfg.merge_size;
  if (resized.height % cfg.factor() != 0 || resized.width % cfg.factor() != 0) {
    return make_error(ErrorCode::invalid_argument,
                      "patchify: image size is not a multiple of " + std::to_string(cfg.factor()));
  }
  const std::vector<PatchCoord> order =
      window_order(resized.height / ps, resized.width / ps, merge);
  const int64_t cols = cfg.patch_values();
  if (static_cast<int64_t>(out.size()) != static_cast<int64_t>(order.size()) * cols) {
    return make_error(ErrorCode::internal, "patchify: output size");
  }
  // transformers' fused rescale-normalize: f32 tensors mean·(1/rescale) and std·(1/rescale).
  const auto inv_rescale = static_cast<float>(1.0 / cfg.rescale_factor);
  std::array<float, 3> mean{}, stdev{};
  for (size_t c = 0; c < 3; ++c) {
    mean[c] = static_cast<float>(cfg.image_mean[c]) * inv_rescale;
    stdev[c] = static_cast<float>(cfg.image_std[c]) * inv_rescale;
  }
  // One table per channel: the 256 possible values.
  std::array<std::array<float, 256>, 3> lut{};
  for (size_t c = 0; c < 3; ++c) {
    for (int v = 0; v < 256; ++v)
      lut[c][static_cast<size_t>(v)] = (static_cast<float>(v) - mean[c]) / stdev[c];
  }
  for (size_t r = 0; r < order.size(); ++r) {
    float* row = out.data() + r * static_cast<size_t>(cols);
    for (int64_t c = 0; c < 3; ++c) {
      const uint8_t* plane = resized.plane(static_cast<int>(c));
      for (int64_t py = 0; py < ps; ++py) {
        const uint8_t* src = plane + (order[r].row * ps + py) * resized.width + order[r].col * ps;
        // The still image repeated in time: every τ slot holds the same frame.
        for (int64_t tau = 0; tau < tp; ++tau) {
          float* dst = row + ((c * tp + tau) * ps + py) * ps;
          for (int64_t px = 0; px < ps; ++px) dst[px] = lut[static_cast<size_t>(c)][src[px]];
        }
      }
    }
  }
  return Status::ok_status();
}

namespace {

// Runs f(i) for i in [0, n) on up to hardware_concurrency threads; returns the first error by
// index, so the result does not depend on scheduling.
template <class F>
Status parallel_for_images(size_t n, F&& f) {
  std::vector<Status> status(n);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < n; i = next++) status[i] = f(i);
  };
  const size_t threads = std::min<size_t>(n, std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  for (Status& s : status) {
    if (!s.ok()) return s;
  }
  return Status::ok_status();
}

// Shapes, offsets and allocation for images of the given original sizes.
Result<PreprocessedImages> plan_output(std::span<const RgbImage> images,
                                       const VisionPreprocessConfig& cfg,
                                       std::vector<size_t>& offsets) {
  PreprocessedImages out;
  out.patch_values = cfg.patch_values();
  size_t total = 0;
  for (const RgbImage& im : images) {
    FERRY_ASSIGN_OR_RETURN(ResizedSize s, smart_resize(im.height, im.width, cfg));
    const int64_t gh = s.height / cfg.patch_size, gw = s.width / cfg.patch_size;
    out.sizes.push_back(s);
    out.grid_thw.push_back({1, gh, gw});
    offsets.push_back(total);
    total += static_cast<size_t>(gh * gw * out.patch_values);
    if (total >
        static_cast<size_t>(kMaxPixelsCap) * 3 * static_cast<size_t>(cfg.temporal_patch_size)) {
      return make_error(ErrorCode::invalid_argument,
                        "images: more pixels in all than ferry accepts");
    }
  }
  out.pixel_values.resize(total);
  return out;
}

}  // namespace

Result<PreprocessedImages> preprocess_decoded(std::span<const RgbImage> images,
                                              const VisionPreprocessConfig& cfg) {
  std::vector<size_t> offsets;
  FERRY_ASSIGN_OR_RETURN(PreprocessedImages out, plan_output(images, cfg, offsets));
  std::vector<size_t> ends(offsets.begin() + 1, offsets.end());
  ends.push_back(out.pixel_values.size());
  FERRY_RETURN_IF_ERROR(parallel_for_images(images.size(), [&](size_t i) -> Status {
    FERRY_ASSIGN_OR_RETURN(RgbImage resized, qwen_vl_resize(images[i], cfg));
    return patchify_into(
        resized, cfg, std::span<float>(out.pixel_values).subspan(offsets[i], ends[i] - offsets[i]));
  }));
  return out;
}

Result<PreprocessedImages> preprocess_images(std::span<const std::string> paths,
                                             const VisionPreprocessConfig& cfg) {
  std::vector<RgbImage> decoded(paths.size());
  FERRY_RETURN_IF_ERROR(parallel_for_images(paths.size(), [&](size_t i) -> Status {
    FERRY_ASSIGN_OR_RETURN(decoded[i], read_image(paths[i], cfg.limits));
    return Status::ok_status();
  }));
  return preprocess_decoded(decoded, cfg);
}

}  // namespace ferry
