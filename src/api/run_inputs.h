// The files `ferry run` reads as real inputs (docs/inputs.md): camera frames (a folder of
// images, or a JSON manifest listing them), the ego history (JSON or .npy, rotations optional),
// and prompt files. Files are hostile input: sizes are bounded, JSON is parsed strictly
// (duplicate keys, unknown keys) and every error is one line naming the file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "image/trajectory_picture.h"
#include "model/ego_history.h"

namespace ferry::api {

// Alpamayo-R1's frames: 4 cameras x 4 times, camera-major (spec §4.1); the front wide camera is
// camera 1, so its frame at t0 is index 7.
inline constexpr int64_t kAlpamayoFrames = 16;
inline constexpr int64_t kAlpamayoFrontFrame = 7;

struct FrameSet {
  std::vector<std::string> paths;  // in the order the model takes them
  std::optional<int64_t> front;    // the manifest's "front": the frame the picture draws on
  CameraModel camera;              // the manifest's "camera", else the nominal camera
};

// `path` is a manifest (a .json file) or a folder: DIR/frames.json when it exists, else every
// .jpg, .jpeg and .png file of DIR (not hidden ones) in byte order of their names. A manifest is
//   {"frames": ["cam0_0.jpg", ...], "front": 7,
//    "camera": {"hfov_deg": 120, "forward_m": 1.7, "lateral_m": 0, "height_m": 1.5,
//               "pitch_deg": 0, "yaw_deg": 0}}
// with paths relative to the manifest's folder; only "frames" is required. `count` > 0: exactly
// that many frames; 0: at least one.
Result<FrameSet> read_frame_set(const std::string& path, int64_t count);

// The ego history (model/ego_history.h: ego_history_from). `path` is
//   - JSON: {"xyz": [[x, y, z] x 16], "rot": [16 row-major 3x3 matrices] | "yaw": [16 angles]}
//     ("rot" and "yaw" optional), or a bare [[x, y, z] x 16];
//   - .npy: 48 positions of shape [..., 16, 3] (as the reference's ego_history_xyz).
// `rotations_path` (may be empty): 16 rotations as .npy [..., 16, 3, 3] (ego_history_rot) or a
// JSON array, for a history whose file has none.
Result<EgoHistory> read_ego_history(const std::string& path, const std::string& rotations_path);

// A UTF-8 text file of at most `max_bytes`.
Result<std::string> read_text_file(const std::string& path, size_t max_bytes);

}  // namespace ferry::api
