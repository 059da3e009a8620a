#include "image/trajectory_picture.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numbers>

#include "image/canvas.h"
#include "image/resize.h"

namespace ferry {

namespace {

constexpr int64_t kPanel = 512;  // height of the picture, side of the bird's-eye view
constexpr double kMargin = 28.0;
constexpr Rgb kBackground{24, 24, 28};
constexpr Rgb kGrid{58, 58, 66};
constexpr Rgb kAxis{96, 96, 108};
constexpr Rgb kEgo{235, 235, 235};
constexpr Rgb kHistory{80, 160, 255};
constexpr Rgb kPredicted{70, 225, 100};
constexpr Rgb kMark{255, 255, 255};

double radians(double deg) {
  return deg * std::numbers::pi / 180.0;
}

using Point = std::array<double, 2>;

// Where everything goes, shared by the PNG and the SVG.
struct Layout {
  std::optional<RgbImage> frame;  // scaled to kPanel high
  int64_t frame_w = 0;
  std::vector<std::optional<Point>> on_frame;  // per waypoint, in picture pixels
  double bev_x0 = 0.0;                         // left edge of the bird's-eye view
  double scale = 1.0;                          // pixels per metre
  double mid_x = 0.0, mid_y = 0.0;             // metres at the panel's centre
  double grid = 10.0;                          // metres between grid lines
  int64_t width = 0;

  Point bev(double x, double y) const {
    return {bev_x0 + kPanel / 2.0 - (y - mid_y) * scale, kPanel / 2.0 - (x - mid_x) * scale};
  }
  Point bev(const std::array<float, 3>& p) const { return bev(p[0], p[1]); }
  // The metres the panel shows: [x_lo, x_hi] forward, [y_lo, y_hi] left.
  double half() const { return kPanel / 2.0 / scale; }
};

bool finite_points(const std::vector<std::array<float, 3>>& pts) {
  return std::all_of(pts.begin(), pts.end(), [](const auto& p) {
    return std::isfinite(p[0]) && std::isfinite(p[1]) && std::isfinite(p[2]);
  });
}

Result<Layout> layout(const TrajectoryScene& s) {
  if (s.trajectory.empty()) {
    return make_error(ErrorCode::invalid_argument, "picture: no trajectory to draw");
  }
  if (!finite_points(s.history) || !finite_points(s.trajectory)) {
    return make_error(ErrorCode::invalid_argument, "picture: the trajectory is not finite");
  }
  Layout l;
  if (s.front && s.front->height > 0 && s.front->width > 0) {
    const int64_t w = std::clamp<int64_t>(
        (s.front->width * kPanel + s.front->height / 2) / s.front->height, 16, 4 * kPanel);
    FERRY_ASSIGN_OR_RETURN(RgbImage scaled, resize_bicubic_aa(*s.front, kPanel, w));
    l.frame = std::move(scaled);
    l.frame_w = w;
    for (const auto& p : s.trajectory) l.on_frame.push_back(s.camera.project(p, w, kPanel));
  }
  l.bev_x0 = static_cast<double>(l.frame_w);
  l.width = l.frame_w + kPanel;
  // The bird's-eye view fits the origin, the history and the prediction, at least 20 m across.
  double x_lo = 0.0, x_hi = 0.0, y_lo = 0.0, y_hi = 0.0;
  for (const auto* pts : {&s.history, &s.trajectory}) {
    for (const auto& p : *pts) {
      x_lo = std::min(x_lo, double(p[0]));
      x_hi = std::max(x_hi, double(p[0]));
      y_lo = std::min(y_lo, double(p[1]));
      y_hi = std::max(y_hi, double(p[1]));
    }
  }
  const double span = std::max({x_hi - x_lo, y_hi - y_lo, 20.0});
  l.scale = (kPanel - 2.0 * kMargin) / span;
  l.mid_x = (x_lo + x_hi) / 2.0;
  l.mid_y = (y_lo + y_hi) / 2.0;
  for (double step : {1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0}) {
    l.grid = step;
    if (span / step <= 10.0) break;
  }
  return l;
}

// Grid lines at multiples of the spacing: (from, to) pairs in picture pixels.
std::vector<std::pair<Point, Point>> grid_lines(const Layout& l, std::vector<bool>* axis) {
  std::vector<std::pair<Point, Point>> out;
  const double h = l.half();
  const auto first = [&](double lo) { return std::ceil(lo / l.grid) * l.grid; };
  for (double x = first(l.mid_x - h); x <= l.mid_x + h; x += l.grid) {
    out.push_back({l.bev(x, l.mid_y + h), l.bev(x, l.mid_y - h)});
    axis->push_back(std::abs(x) < 1e-9);
  }
  for (double y = first(l.mid_y - h); y <= l.mid_y + h; y += l.grid) {
    out.push_back({l.bev(l.mid_x + h, y), l.bev(l.mid_x - h, y)});
    axis->push_back(std::abs(y) < 1e-9);
  }
  return out;
}

// The ego vehicle's outline at t0: 4.6 m x 1.9 m from 1 m behind the origin (the rear axle).
std::array<Point, 4> ego_box(const Layout& l) {
  return {l.bev(3.6, 0.95), l.bev(3.6, -0.95), l.bev(-1.0, -0.95), l.bev(-1.0, 0.95)};
}

// Waypoint indices one second apart (the last waypoint of each second).
std::vector<size_t> second_marks(const TrajectoryScene& s) {
  std::vector<size_t> marks;
  const double per_second = s.dt > 0.0 ? std::clamp(1.0 / s.dt, 1.0, 1000.0) : 10.0;
  for (double k = per_second; k <= static_cast<double>(s.trajectory.size()) + 1e-9;
       k += per_second) {
    marks.push_back(static_cast<size_t>(std::lround(k)) - 1);
  }
  return marks;
}

std::string base64(const std::string& bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t v = static_cast<uint8_t>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) v |= static_cast<uint32_t>(static_cast<uint8_t>(bytes[i + 1])) << 8;
    if (i + 2 < bytes.size()) v |= static_cast<uint8_t>(bytes[i + 2]);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[v & 63] : '=';
  }
  return out;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string color(Rgb c) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", c.r, c.g, c.b);
  return buf;
}

std::string polyline(const std::vector<Point>& pts, Rgb c, double width) {
  std::string s =
      "<polyline fill=\"none\" stroke-linejoin=\"round\" stroke-linecap=\"round\" "
      "stroke=\"" +
      color(c) + "\" stroke-width=\"" + num(width) + "\" points=\"";
  for (const Point& p : pts) s += num(p[0]) + "," + num(p[1]) + " ";
  return s + "\"/>\n";
}

std::string circle(const Point& p, double r, Rgb c) {
  return "<circle cx=\"" + num(p[0]) + "\" cy=\"" + num(p[1]) + "\" r=\"" + num(r) + "\" fill=\"" +
         color(c) + "\"/>\n";
}

std::string line_svg(const Point& a, const Point& b, Rgb c, double width) {
  return "<line x1=\"" + num(a[0]) + "\" y1=\"" + num(a[1]) + "\" x2=\"" + num(b[0]) + "\" y2=\"" +
         num(b[1]) + "\" stroke=\"" + color(c) + "\" stroke-width=\"" + num(width) + "\"/>\n";
}

std::string text_svg(double x, double y, const std::string& text, Rgb c) {
  return "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\" fill=\"" + color(c) +
         "\" font-family=\"sans-serif\" font-size=\"13\">" + text + "</text>\n";
}

// The projected path as runs of consecutive visible waypoints.
std::vector<std::vector<Point>> frame_runs(const Layout& l) {
  std::vector<std::vector<Point>> runs(1);
  for (const auto& p : l.on_frame) {
    if (p) {
      runs.back().push_back(*p);
    } else if (!runs.back().empty()) {
      runs.emplace_back();
    }
  }
  return runs;
}

}  // namespace

std::optional<std::array<double, 2>> CameraModel::project(const std::array<float, 3>& p,
                                                          int64_t width, int64_t height) const {
  const double dx = p[0] - forward_m, dy = p[1] - lateral_m, dz = p[2] - height_m;
  const double cy = std::cos(radians(yaw_deg)), sy = std::sin(radians(yaw_deg));
  const double ahead = cy * dx + sy * dy, left = -sy * dx + cy * dy;
  const double cp = std::cos(radians(pitch_deg)), sp = std::sin(radians(pitch_deg));
  const double depth = cp * ahead - sp * dz, up = sp * ahead + cp * dz;
  if (!(depth > 0.5) || !(hfov_deg > 1.0 && hfov_deg < 179.0)) return std::nullopt;
  const auto w = static_cast<double>(width), h = static_cast<double>(height);
  const double f = w / 2.0 / std::tan(radians(hfov_deg) / 2.0);
  const double u = w / 2.0 - f * left / depth, v = h / 2.0 - f * up / depth;
  // Far outside the frame: drawing would only draw a clipped line.
  if (std::abs(u) > 8.0 * w || std::abs(v) > 8.0 * h) return std::nullopt;
  return std::array<double, 2>{u, v};
}

Result<RgbImage> draw_trajectory_picture(const TrajectoryScene& s) {
  FERRY_ASSIGN_OR_RETURN(Layout l, layout(s));
  FERRY_ASSIGN_OR_RETURN(Canvas c, Canvas::create(kPanel, l.width, kBackground));
  if (l.frame) {
    c.paste(*l.frame, 0, 0);
    for (const auto& run : frame_runs(l)) {
      for (size_t i = 0; i + 1 < run.size(); ++i) {
        c.line(run[i][0], run[i][1], run[i + 1][0], run[i + 1][1], 5.0, kPredicted, 0.85);
      }
    }
    for (size_t k : second_marks(s)) {
      if (k < l.on_frame.size() && l.on_frame[k]) {
        c.disc((*l.on_frame[k])[0], (*l.on_frame[k])[1], 4.0, kMark);
      }
    }
  }
  std::vector<bool> axis;
  const auto grid = grid_lines(l, &axis);
  for (size_t i = 0; i < grid.size(); ++i) {
    c.line(grid[i].first[0], grid[i].first[1], grid[i].second[0], grid[i].second[1], 1.0,
           axis[i] ? kAxis : kGrid);
  }
  const auto box = ego_box(l);
  for (size_t i = 0; i < 4; ++i) {
    const Point& a = box[i];
    const Point& b = box[(i + 1) % 4];
    c.line(a[0], a[1], b[0], b[1], 2.0, kEgo);
  }
  auto path = [&](const std::vector<std::array<float, 3>>& pts, Rgb col) {
    for (size_t i = 0; i + 1 < pts.size(); ++i) {
      const Point a = l.bev(pts[i]), b = l.bev(pts[i + 1]);
      c.line(a[0], a[1], b[0], b[1], 3.0, col);
    }
    for (const auto& p : pts) {
      const Point q = l.bev(p);
      c.disc(q[0], q[1], 2.0, col);
    }
  };
  path(s.history, kHistory);
  path(s.trajectory, kPredicted);
  for (size_t k : second_marks(s)) {
    if (k < s.trajectory.size()) {
      const Point q = l.bev(s.trajectory[k]);
      c.disc(q[0], q[1], 4.0, kMark);
    }
  }
  return c.image();
}

Result<std::string> trajectory_svg(const TrajectoryScene& s) {
  FERRY_ASSIGN_OR_RETURN(Layout l, layout(s));
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(l.width) +
                    "\" height=\"" + std::to_string(kPanel) + "\" viewBox=\"0 0 " +
                    std::to_string(l.width) + " " + std::to_string(kPanel) + "\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"" + color(kBackground) + "\"/>\n";
  if (l.frame) {
    FERRY_ASSIGN_OR_RETURN(std::string png, encode_png(*l.frame));
    svg += "<image x=\"0\" y=\"0\" width=\"" + std::to_string(l.frame_w) + "\" height=\"" +
           std::to_string(kPanel) + "\" href=\"data:image/png;base64," + base64(png) + "\"/>\n";
    for (const auto& run : frame_runs(l)) {
      if (run.size() > 1) svg += polyline(run, kPredicted, 5.0);
    }
    for (size_t k : second_marks(s)) {
      if (k < l.on_frame.size() && l.on_frame[k]) svg += circle(*l.on_frame[k], 4.0, kMark);
    }
    svg += text_svg(10, 20, "front camera, t0 (nominal projection)", kMark);
  }
  std::vector<bool> axis;
  const auto grid = grid_lines(l, &axis);
  for (size_t i = 0; i < grid.size(); ++i) {
    svg += line_svg(grid[i].first, grid[i].second, axis[i] ? kAxis : kGrid, 1.0);
  }
  const auto box = ego_box(l);
  svg += polyline({box[0], box[1], box[2], box[3], box[0]}, kEgo, 2.0);
  auto path = [&](const std::vector<std::array<float, 3>>& pts, Rgb col) {
    std::vector<Point> q;
    for (const auto& p : pts) q.push_back(l.bev(p));
    svg += polyline(q, col, 3.0);
  };
  path(s.history, kHistory);
  path(s.trajectory, kPredicted);
  for (size_t k : second_marks(s)) {
    if (k < s.trajectory.size()) svg += circle(l.bev(s.trajectory[k]), 4.0, kMark);
  }
  const double x = l.bev_x0 + 10;
  svg += text_svg(x, 20, "bird's-eye view, x forward (up), y left", kMark);
  svg += text_svg(x, 38, "ego history", kHistory);
  svg += text_svg(x, 56, "predicted, a dot each second", kPredicted);
  svg += text_svg(x, kPanel - 12.0, "grid " + num(l.grid) + " m", kAxis);
  return svg + "</svg>\n";
}

}  // namespace ferry
