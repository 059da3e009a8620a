// The trajectory picture (image/trajectory_picture.h), the canvas under it and PNG writing.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "image/canvas.h"
#include "image/image.h"
#include "image/trajectory_picture.h"

namespace ferry {
namespace {

RgbImage solid(int64_t h, int64_t w, uint8_t v) {
  RgbImage img;
  img.height = h;
  img.width = w;
  img.planes.assign(3 * img.plane_size(), v);
  return img;
}

std::array<uint8_t, 3> pixel(const RgbImage& img, int64_t x, int64_t y) {
  const auto i = static_cast<size_t>(y * img.width + x);
  return {img.plane(0)[i], img.plane(1)[i], img.plane(2)[i]};
}

TrajectoryScene scene(bool with_frame) {
  TrajectoryScene s;
  for (int k = 0; k < 16; ++k) s.history.push_back({1.0f * float(k - 15), 0.0f, 0.0f});
  for (int k = 1; k <= 64; ++k) {
    const float t = 0.1f * float(k);
    s.trajectory.push_back({10.0f * t, 0.3f * t * t, 0.0f});  // ahead, drifting left
  }
  if (with_frame) s.front = solid(1080, 1920, 90);
  return s;
}

TEST(CameraModel, ProjectsAheadAndRefusesBehind) {
  CameraModel cam;  // 120° at 1.5 m, 1.7 m ahead of the origin
  auto ahead = cam.project({20.0f, 0.0f, 0.0f}, 1920, 1080);
  ASSERT_TRUE(ahead.has_value());
  EXPECT_NEAR((*ahead)[0], 960.0, 1e-9);  // centred
  EXPECT_GT((*ahead)[1], 540.0);          // the ground is below the horizon
  auto left = cam.project({20.0f, 3.0f, 0.0f}, 1920, 1080);
  ASSERT_TRUE(left.has_value());
  EXPECT_LT((*left)[0], 960.0);
  EXPECT_FALSE(cam.project({-5.0f, 0.0f, 0.0f}, 1920, 1080).has_value());
  // 60° off-axis lands on the frame's edge with a 120° field of view.
  auto edge = cam.project({1.7f + 10.0f, float(10.0 * std::tan(M_PI / 3)), 1.5f}, 1920, 1080);
  ASSERT_TRUE(edge.has_value());
  EXPECT_NEAR((*edge)[0], 0.0, 1e-3);
  EXPECT_NEAR((*edge)[1], 540.0, 1e-3);
}

TEST(TrajectoryPicture, FrameBesideTheBirdsEyeView) {
  auto img = draw_trajectory_picture(scene(true));
  ASSERT_TRUE(img.ok()) << img.error().to_string();
  EXPECT_EQ(img->height, 512);
  EXPECT_EQ(img->width, 910 + 512);  // 1920x1080 scaled to 512 high, then the square view
  EXPECT_EQ(pixel(*img, 5, 5), (std::array<uint8_t, 3>{90, 90, 90}));  // the frame
  // The path is drawn on the frame below the horizon, near the centre column, and nowhere above.
  int64_t below = 0, above = 0;
  for (int64_t y = 0; y < 512; ++y) {
    for (int64_t x = 0; x < 910; ++x) {
      const auto p = pixel(*img, x, y);
      if (p[1] > 180 && p[0] < 150) {
        (y > 256 ? below : above) += 1;
        EXPECT_NEAR(double(x), 430.0, 60.0);
      }
    }
  }
  EXPECT_GT(below, 100);
  EXPECT_EQ(above, 0);
  auto png = encode_png(*img);
  ASSERT_TRUE(png.ok()) << png.error().to_string();
  auto back = decode_image(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(png->data()), png->size()),
      "picture.png");
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(back->planes, img->planes);
}

TEST(TrajectoryPicture, BirdsEyeViewAloneAndSvg) {
  auto img = draw_trajectory_picture(scene(false));
  ASSERT_TRUE(img.ok());
  EXPECT_EQ(img->width, 512);
  auto svg = trajectory_svg(scene(true));
  ASSERT_TRUE(svg.ok()) << svg.error().to_string();
  EXPECT_EQ(svg->rfind("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"1422\"", 0), 0u);
  EXPECT_NE(svg->find("data:image/png;base64,iVBORw0KGgo"), std::string::npos);
  EXPECT_NE(svg->find("ego history"), std::string::npos);
  EXPECT_EQ(svg->substr(svg->size() - 7), "</svg>\n");
  TrajectoryScene bad = scene(false);
  bad.trajectory[3][1] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(draw_trajectory_picture(bad).ok());
  EXPECT_FALSE(trajectory_svg(bad).ok());
  bad.trajectory.clear();
  EXPECT_FALSE(draw_trajectory_picture(bad).ok());
}

TEST(Canvas, LinesAreCoveredAndClipped) {
  auto c = Canvas::create(20, 30, Rgb{0, 0, 0});
  ASSERT_TRUE(c.ok());
  c->line(-10, 10, 40, 10, 3.0, Rgb{255, 0, 0});
  EXPECT_EQ(pixel(c->image(), 15, 9)[0], 255);  // centre row of a 3-px line at y = 10
  EXPECT_EQ(pixel(c->image(), 15, 5)[0], 0);    // far from it
  c->disc(1e9, 1e9, 5, Rgb{0, 255, 0});         // off the canvas: nothing
  c->line(NAN, 0, 5, 5, 2, Rgb{0, 0, 255});     // not finite: nothing
  EXPECT_FALSE(Canvas::create(0, 10, Rgb{}).ok());
}

}  // namespace
}  // namespace ferry
