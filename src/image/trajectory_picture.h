// The picture of an Alpamayo-R1 prediction: the front camera frame with the predicted path
// projected onto it, beside a bird's-eye view of the ego history and the predicted trajectory
// (x forward up, y left to the left, 1 s marks, a grid with its spacing). As a PNG (drawn here,
// written with libpng) or an SVG (vector lines and labels over the frame, embedded as a PNG).
//
// ferry has no camera calibration, so the projection uses a nominal pinhole camera (CameraModel,
// overridable from the frames manifest): it shows where the path goes, not a calibrated overlay.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "image/image.h"

namespace ferry {

// A pinhole camera in the t0 ego frame (x forward, y left, z up), looking forward.
struct CameraModel {
  double hfov_deg = 120.0;  // horizontal field of view (front_wide_120fov)
  double forward_m = 1.7;   // position of the camera
  double lateral_m = 0.0;
  double height_m = 1.5;
  double pitch_deg = 0.0;  // positive: looking down
  double yaw_deg = 0.0;    // positive: looking left

  // Pixel (u, v) of an ego-frame point on a width × height frame, if it lies ahead of the camera.
  std::optional<std::array<double, 2>> project(const std::array<float, 3>& p, int64_t width,
                                               int64_t height) const;
};

struct TrajectoryScene {
  std::vector<std::array<float, 3>> history;     // past positions, oldest first (t0 last)
  std::vector<std::array<float, 3>> trajectory;  // predicted waypoints
  double dt = 0.1;                               // seconds between waypoints
  std::optional<RgbImage> front;                 // the front camera frame at t0, decoded
  CameraModel camera;
};

// The picture as an image (PNG bytes come from encode_png).
Result<RgbImage> draw_trajectory_picture(const TrajectoryScene& scene);
// The picture as an SVG document.
Result<std::string> trajectory_svg(const TrajectoryScene& scene);

}  // namespace ferry
