#include "image/canvas.h"

#include <algorithm>
#include <cmath>

namespace ferry {

Result<Canvas> Canvas::create(int64_t height, int64_t width, Rgb background) {
  if (height < 1 || width < 1 || height > 16384 || width > 16384) {
    return make_error(ErrorCode::invalid_argument, "canvas: " + std::to_string(height) + "x" +
                                                       std::to_string(width) + " is out of range");
  }
  RgbImage img;
  img.height = height;
  img.width = width;
  img.planes.resize(3 * img.plane_size());
  std::fill(img.plane(0), img.plane(0) + img.plane_size(), background.r);
  std::fill(img.plane(1), img.plane(1) + img.plane_size(), background.g);
  std::fill(img.plane(2), img.plane(2) + img.plane_size(), background.b);
  return Canvas(std::move(img));
}

void Canvas::blend(int64_t x, int64_t y, Rgb color, double coverage) {
  if (x < 0 || y < 0 || x >= image_.width || y >= image_.height || !(coverage > 0.0)) return;
  const double a = std::min(coverage, 1.0);
  const auto i = static_cast<size_t>(y * image_.width + x);
  const uint8_t c[3] = {color.r, color.g, color.b};
  for (int p = 0; p < 3; ++p) {
    uint8_t& v = image_.plane(p)[i];
    v = static_cast<uint8_t>(std::lround(v + (c[p] - v) * a));
  }
}

void Canvas::fill_rect(double x0, double y0, double x1, double y1, Rgb color, double alpha) {
  const auto xa = static_cast<int64_t>(std::floor(std::max(std::min(x0, x1), 0.0)));
  const auto xb = static_cast<int64_t>(std::ceil(std::min(std::max(x0, x1), double(width()))));
  const auto ya = static_cast<int64_t>(std::floor(std::max(std::min(y0, y1), 0.0)));
  const auto yb = static_cast<int64_t>(std::ceil(std::min(std::max(y0, y1), double(height()))));
  for (int64_t y = ya; y < yb; ++y) {
    for (int64_t x = xa; x < xb; ++x) blend(x, y, color, alpha);
  }
}

void Canvas::line(double x0, double y0, double x1, double y1, double width, Rgb color,
                  double alpha) {
  if (!std::isfinite(x0) || !std::isfinite(y0) || !std::isfinite(x1) || !std::isfinite(y1)) return;
  const double r = width / 2.0;
  const double lo_x = std::max(std::min(x0, x1) - r - 1.0, -1.0);
  const double hi_x = std::min(std::max(x0, x1) + r + 1.0, double(this->width()));
  const double lo_y = std::max(std::min(y0, y1) - r - 1.0, -1.0);
  const double hi_y = std::min(std::max(y0, y1) + r + 1.0, double(height()));
  if (lo_x > hi_x || lo_y > hi_y) return;
  const double dx = x1 - x0, dy = y1 - y0;
  const double len2 = dx * dx + dy * dy;
  for (auto y = static_cast<int64_t>(lo_y); y <= static_cast<int64_t>(hi_y); ++y) {
    for (auto x = static_cast<int64_t>(lo_x); x <= static_cast<int64_t>(hi_x); ++x) {
      const double px = double(x) + 0.5, py = double(y) + 0.5;
      double t = len2 > 0.0 ? ((px - x0) * dx + (py - y0) * dy) / len2 : 0.0;
      t = std::clamp(t, 0.0, 1.0);
      const double d = std::hypot(px - (x0 + t * dx), py - (y0 + t * dy));
      blend(x, y, color, alpha * std::clamp(r + 0.5 - d, 0.0, 1.0));
    }
  }
}

void Canvas::disc(double cx, double cy, double radius, Rgb color, double alpha) {
  line(cx, cy, cx, cy, 2.0 * radius, color, alpha);
}

void Canvas::paste(const RgbImage& src, int64_t x0, int64_t y0) {
  for (int64_t y = std::max<int64_t>(0, -y0); y < src.height && y + y0 < height(); ++y) {
    for (int64_t x = std::max<int64_t>(0, -x0); x < src.width && x + x0 < width(); ++x) {
      const auto s = static_cast<size_t>(y * src.width + x);
      const auto d = static_cast<size_t>((y + y0) * width() + x + x0);
      for (int p = 0; p < 3; ++p) image_.plane(p)[d] = src.plane(p)[s];
    }
  }
}

}  // namespace ferry
