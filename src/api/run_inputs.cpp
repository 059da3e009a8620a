#include "api/run_inputs.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "api/npy.h"
#include "format/strict_json.h"
#include "model/workload.h"

namespace ferry::api {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr size_t kMaxJsonBytes = 1 << 20;
constexpr int kMaxJsonDepth = 8;

Error bad(const std::string& path, const std::string& msg) {
  return make_error(ErrorCode::invalid_argument, path + ": " + msg);
}

bool ends_with_ci(const std::string& s, std::string_view suffix) {
  if (s.size() < suffix.size()) return false;
  return std::equal(
      suffix.begin(), suffix.end(), s.end() - static_cast<std::ptrdiff_t>(suffix.size()),
      [](char lower, char c) { return std::tolower(static_cast<unsigned char>(c)) == lower; });
}

bool is_image_name(const std::string& name) {
  return ends_with_ci(name, ".jpg") || ends_with_ci(name, ".jpeg") || ends_with_ci(name, ".png");
}

Result<json> read_json(const std::string& path) {
  FERRY_ASSIGN_OR_RETURN(std::string text, read_text_file(path, kMaxJsonBytes));
  return strict_json::parse(text, kMaxJsonDepth, path, "JSON");
}

// A JSON number as a double, or an error naming `what`.
Result<double> number(const json& v, const std::string& path, const std::string& what) {
  if (!v.is_number()) return bad(path, what + " is not a number");
  return v.get<double>();
}

// Every number of a nested array, in order, when its shape is `shape` exactly.
Status flatten(const json& v, std::span<const size_t> shape, const std::string& path,
               const std::string& what, std::vector<double>& out) {
  if (shape.empty()) {
    FERRY_ASSIGN_OR_RETURN(double x, number(v, path, what));
    out.push_back(x);
    return {};
  }
  if (!v.is_array() || v.size() != shape[0]) {
    return bad(path, what + " must be an array of " + std::to_string(shape[0]) +
                         (shape.size() > 1 ? " arrays" : " numbers"));
  }
  for (const json& e : v) FERRY_RETURN_IF_ERROR(flatten(e, shape.subspan(1), path, what, out));
  return {};
}

Status read_camera(const json& j, const std::string& path, CameraModel& cam) {
  if (!j.is_object()) return bad(path, "\"camera\" must be an object");
  for (const auto& [key, value] : j.items()) {
    double* field = key == "hfov_deg"    ? &cam.hfov_deg
                    : key == "forward_m" ? &cam.forward_m
                    : key == "lateral_m" ? &cam.lateral_m
                    : key == "height_m"  ? &cam.height_m
                    : key == "pitch_deg" ? &cam.pitch_deg
                    : key == "yaw_deg"   ? &cam.yaw_deg
                                         : nullptr;
    if (field == nullptr) return bad(path, "unknown camera key \"" + key + "\"");
    FERRY_ASSIGN_OR_RETURN(*field, number(value, path, "camera " + key));
    if (!std::isfinite(*field) || std::abs(*field) > 1e4) {
      return bad(path, "camera " + key + " is out of range");
    }
  }
  if (!(cam.hfov_deg > 1.0 && cam.hfov_deg < 179.0)) {
    return bad(path, "camera hfov_deg must lie in (1, 179)");
  }
  return {};
}

Result<FrameSet> read_manifest(const std::string& path) {
  FERRY_ASSIGN_OR_RETURN(json j, read_json(path));
  if (!j.is_object()) return bad(path, "a frames manifest is a JSON object");
  FrameSet set;
  const fs::path base = fs::path(path).parent_path();
  bool have_frames = false;
  for (const auto& [key, value] : j.items()) {
    if (key == "frames") {
      if (!value.is_array()) return bad(path, "\"frames\" must be an array of file names");
      if (value.size() > static_cast<size_t>(kMaxImages)) {
        return bad(path, "more than " + std::to_string(kMaxImages) + " frames");
      }
      for (const json& f : value) {
        if (!f.is_string() || f.get<std::string>().empty()) {
          return bad(path, "\"frames\" must be an array of file names");
        }
        const fs::path p(f.get<std::string>());
        set.paths.push_back((p.is_absolute() ? p : base / p).string());
      }
      have_frames = true;
    } else if (key == "front") {
      if (!value.is_number_integer() || value.get<int64_t>() < 0) {
        return bad(path, "\"front\" must be a frame index");
      }
      set.front = value.get<int64_t>();
    } else if (key == "camera") {
      FERRY_RETURN_IF_ERROR(read_camera(value, path, set.camera));
    } else {
      return bad(path, "unknown key \"" + key + "\" (frames, front, camera)");
    }
  }
  if (!have_frames) return bad(path, "no \"frames\" list");
  if (set.front && *set.front >= static_cast<int64_t>(set.paths.size())) {
    return bad(path, "\"front\" is " + std::to_string(*set.front) + " but there are " +
                         std::to_string(set.paths.size()) + " frames");
  }
  return set;
}

}  // namespace

Result<std::string> read_text_file(const std::string& path, size_t max_bytes) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return bad(path, "is a folder, not a file");
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) return make_error(ErrorCode::io, path + ": cannot open");
  const std::streamoff size = f.tellg();
  if (size < 0) return make_error(ErrorCode::io, path + ": cannot read");
  if (static_cast<uint64_t>(size) > max_bytes) {
    return bad(path, std::to_string(size) + " bytes, more than " + std::to_string(max_bytes));
  }
  std::string text(static_cast<size_t>(size), '\0');
  f.seekg(0);
  if (!f.read(text.data(), size)) return make_error(ErrorCode::io, path + ": read failed");
  if (auto at = strict_json::find_invalid_utf8(text)) {
    return bad(path, "not valid UTF-8 at byte " + std::to_string(*at));
  }
  return text;
}

Result<FrameSet> read_frame_set(const std::string& path, int64_t count) {
  std::error_code ec;
  FrameSet set;
  if (fs::is_directory(path, ec)) {
    const fs::path manifest = fs::path(path) / "frames.json";
    if (fs::exists(manifest, ec)) {
      FERRY_ASSIGN_OR_RETURN(set, read_manifest(manifest.string()));
    } else {
      for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (!name.empty() && name[0] != '.' && is_image_name(name)) {
          set.paths.push_back(it->path().string());
        }
        if (set.paths.size() > static_cast<size_t>(kMaxImages)) {
          return bad(path, "more than " + std::to_string(kMaxImages) + " images");
        }
      }
      if (ec) return make_error(ErrorCode::io, path + ": cannot list: " + ec.message());
      std::sort(set.paths.begin(), set.paths.end());
    }
  } else if (fs::exists(path, ec)) {
    FERRY_ASSIGN_OR_RETURN(set, read_manifest(path));
  } else {
    return make_error(ErrorCode::io, path + ": no such file or folder");
  }
  const auto n = static_cast<int64_t>(set.paths.size());
  if (n == 0) return bad(path, "no frames (.jpg, .jpeg or .png files, or a frames.json)");
  if (count > 0 && n != count) {
    return bad(path, std::to_string(n) + " frames, the model takes " + std::to_string(count) +
                         " (4 cameras x 4 times, camera-major)");
  }
  return set;
}

Result<EgoHistory> read_ego_history(const std::string& path, const std::string& rotations_path) {
  constexpr size_t kPoints = kHistoryPoints;
  std::vector<double> xyz, rot, yaw;
  if (ends_with_ci(path, ".npy")) {
    FERRY_ASSIGN_OR_RETURN(NpyArray a, read_npy(path, 4096));
    const size_t dims = a.shape.size();
    if (a.values.size() != kPoints * 3 || dims < 2 || a.shape[dims - 1] != 3 ||
        a.shape[dims - 2] != static_cast<int64_t>(kPoints)) {
      return bad(path, "expected 16 positions of shape [..., 16, 3]");
    }
    xyz = std::move(a.values);
  } else {
    FERRY_ASSIGN_OR_RETURN(json j, read_json(path));
    const std::array<size_t, 2> pos_shape = {kPoints, 3};
    const std::array<size_t, 3> rot_shape = {kPoints, 3, 3};
    const std::array<size_t, 1> yaw_shape = {kPoints};
    if (j.is_array()) {
      FERRY_RETURN_IF_ERROR(flatten(j, pos_shape, path, "the history", xyz));
    } else if (j.is_object()) {
      for (const auto& [key, value] : j.items()) {
        if (key == "xyz") {
          FERRY_RETURN_IF_ERROR(flatten(value, pos_shape, path, "\"xyz\"", xyz));
        } else if (key == "rot") {
          FERRY_RETURN_IF_ERROR(flatten(value, rot_shape, path, "\"rot\"", rot));
        } else if (key == "yaw") {
          FERRY_RETURN_IF_ERROR(flatten(value, yaw_shape, path, "\"yaw\"", yaw));
        } else {
          return bad(path, "unknown key \"" + key + "\" (xyz, rot, yaw)");
        }
      }
      if (xyz.empty()) return bad(path, "no \"xyz\" positions");
    } else {
      return bad(path, "an ego history is a JSON object or an array of 16 [x, y, z]");
    }
  }
  if (!rotations_path.empty()) {
    if (!rot.empty() || !yaw.empty()) {
      return bad(rotations_path, "the history file has headings already");
    }
    if (ends_with_ci(rotations_path, ".npy")) {
      FERRY_ASSIGN_OR_RETURN(NpyArray a, read_npy(rotations_path, 4096));
      const size_t dims = a.shape.size();
      if (a.values.size() != kPoints * 9 || dims < 3 || a.shape[dims - 1] != 3 ||
          a.shape[dims - 2] != 3) {
        return bad(rotations_path, "expected 16 rotations of shape [..., 16, 3, 3]");
      }
      rot = std::move(a.values);
    } else {
      FERRY_ASSIGN_OR_RETURN(json j, read_json(rotations_path));
      const std::array<size_t, 3> rot_shape = {kPoints, 3, 3};
      FERRY_RETURN_IF_ERROR(flatten(j, rot_shape, rotations_path, "the rotations", rot));
    }
  }
  Result<EgoHistory> h = ego_history_from(xyz, rot, yaw);
  if (!h.ok()) return make_error(h.error().code, path + ": " + h.error().message);
  return h;
}

}  // namespace ferry::api
