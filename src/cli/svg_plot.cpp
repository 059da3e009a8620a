#include "cli/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace ferry::cli {

namespace {

constexpr double kWidth = 800, kHeight = 480;
constexpr double kLeft = 80, kRight = 200, kTop = 50, kBottom = 60;

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

std::string label(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

// A round step that cuts [0, span] into about `n` pieces: 1, 2 or 5 times a power of ten.
double tick_step(double span, int n) {
  if (!(span > 0)) return 1;
  const double raw = span / n;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * p >= raw) return m * p;
  }
  return 10 * p;
}

}  // namespace

std::string render_svg(const Plot& plot) {
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y1 = 0;
  for (const PlotSeries& s : plot.series) {
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      x0 = std::min(x0, x);
      x1 = std::max(x1, x);
      y1 = std::max(y1, y);
    }
  }
  if (!std::isfinite(x0)) {
    x0 = 0;
    x1 = 1;
  }
  if (x1 <= x0) x1 = x0 + 1;
  const double ystep = tick_step(y1 > 0 ? y1 : 1, 6);
  const double ytop = std::max(ystep, std::ceil(y1 / ystep) * ystep);
  const double xstep = tick_step(x1 - x0, 8);
  const double pw = kWidth - kLeft - kRight, ph = kHeight - kTop - kBottom;
  auto px = [&](double x) { return kLeft + (x - x0) / (x1 - x0) * pw; };
  auto py = [&](double y) { return kTop + ph - y / ytop * ph; };

  std::string o;
  o += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  o += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(kWidth) + "\" height=\"" +
       num(kHeight) + "\" viewBox=\"0 0 " + num(kWidth) + " " + num(kHeight) +
       "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  o += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o += "<text x=\"" + num(kWidth / 2) + "\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">" +
       escape(plot.title) + "</text>\n";
  // Grid and ticks.
  for (double y = 0; y <= ytop + ystep / 2; y += ystep) {
    o += "<line x1=\"" + num(kLeft) + "\" y1=\"" + num(py(y)) + "\" x2=\"" + num(kLeft + pw) +
         "\" y2=\"" + num(py(y)) + "\" stroke=\"#ddd\"/>\n";
    o += "<text x=\"" + num(kLeft - 6) + "\" y=\"" + num(py(y) + 4) + "\" text-anchor=\"end\">" +
         label(y) + "</text>\n";
  }
  for (double x = std::ceil(x0 / xstep) * xstep; x <= x1 + xstep * 1e-9; x += xstep) {
    o += "<line x1=\"" + num(px(x)) + "\" y1=\"" + num(kTop) + "\" x2=\"" + num(px(x)) +
         "\" y2=\"" + num(kTop + ph) + "\" stroke=\"#eee\"/>\n";
    o += "<text x=\"" + num(px(x)) + "\" y=\"" + num(kTop + ph + 18) +
         "\" text-anchor=\"middle\">" + label(x) + "</text>\n";
  }
  o += "<rect x=\"" + num(kLeft) + "\" y=\"" + num(kTop) + "\" width=\"" + num(pw) +
       "\" height=\"" + num(ph) + "\" fill=\"none\" stroke=\"black\"/>\n";
  o += "<text x=\"" + num(kLeft + pw / 2) + "\" y=\"" + num(kHeight - 16) +
       "\" text-anchor=\"middle\">" + escape(plot.x_label) + "</text>\n";
  o += "<text transform=\"translate(20 " + num(kTop + ph / 2) +
       ") rotate(-90)\" text-anchor=\"middle\">" + escape(plot.y_label) + "</text>\n";
  // Series and legend.
  double legend_y = kTop + 10;
  for (const PlotSeries& s : plot.series) {
    std::string pts;
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      pts += num(px(x)) + "," + num(py(y)) + " ";
    }
    const std::string color = escape(s.color);
    const std::string dash = s.dashed ? " stroke-dasharray=\"6 4\"" : "";
    o += "<polyline fill=\"none\" stroke=\"" + color + "\" stroke-width=\"2\"" + dash +
         " points=\"" + pts + "\"/>\n";
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      o += "<circle cx=\"" + num(px(x)) + "\" cy=\"" + num(py(y)) + "\" r=\"3\" fill=\"" + color +
           "\"/>\n";
    }
    const double lx = kLeft + pw + 16;
    o += "<line x1=\"" + num(lx) + "\" y1=\"" + num(legend_y) + "\" x2=\"" + num(lx + 24) +
         "\" y2=\"" + num(legend_y) + "\" stroke=\"" + color + "\" stroke-width=\"2\"" + dash +
         "/>\n";
    o += "<text x=\"" + num(lx + 30) + "\" y=\"" + num(legend_y + 4) + "\">" + escape(s.name) +
         "</text>\n";
    legend_y += 20;
  }
  o += "</svg>\n";
  return o;
}

}  // namespace ferry::cli
