// A small raster canvas over an RgbImage for the pictures ferry draws (docs/inputs.md):
// anti-aliased thick line segments, discs and rectangles blended onto the pixels, and images
// copied in. Coordinates are pixel centres at (x + 0.5, y + 0.5); anything outside is clipped.
#pragma once

#include <cstdint>

#include "image/image.h"

namespace ferry {

struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
};

class Canvas {
 public:
  // A height × width canvas filled with `background` (sides ≥ 1, at most 16384).
  static Result<Canvas> create(int64_t height, int64_t width, Rgb background);

  void fill_rect(double x0, double y0, double x1, double y1, Rgb color, double alpha = 1.0);
  // A segment `width` pixels wide with round ends.
  void line(double x0, double y0, double x1, double y1, double width, Rgb color,
            double alpha = 1.0);
  void disc(double cx, double cy, double radius, Rgb color, double alpha = 1.0);
  // Copies `image` with its top-left corner at (x, y).
  void paste(const RgbImage& image, int64_t x, int64_t y);

  const RgbImage& image() const { return image_; }
  int64_t height() const { return image_.height; }
  int64_t width() const { return image_.width; }

 private:
  explicit Canvas(RgbImage image) : image_(std::move(image)) {}
  void blend(int64_t x, int64_t y, Rgb color, double coverage);

  RgbImage image_;
};

}  // namespace ferry
