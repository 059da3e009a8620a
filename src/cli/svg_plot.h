// A line chart as an SVG document, written by hand (a small text format; no plotting library):
// the VRAM-latency curves of `ferry plan --sweep --plot` and `ferry bench --sweep --plot`.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace ferry::cli {

struct PlotSeries {
  std::string name;   // in the legend
  std::string color;  // any SVG color ("#1f77b4")
  bool dashed = false;
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in order; markers at each
};

struct Plot {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<PlotSeries> series;
};

// The chart: axes with round ticks from 0 (y) and the data's x range, a marker at every point, a
// legend. Non-finite points are left out.
std::string render_svg(const Plot& plot);

}  // namespace ferry::cli
