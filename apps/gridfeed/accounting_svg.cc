#include "accounting_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

namespace gridfeed::app {
namespace {

const char* const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};
const char* Color(size_t k) { return kColors[k % 6]; }

std::string Num(double v, const char* format = "%.2f") {
  char b[40];
  std::snprintf(b, sizeof(b), format, v);
  return b;
}

// About `count` round values (1, 2, 2.5 or 5 times a power of ten apart) covering [lo, hi].
std::vector<double> NiceTicks(double lo, double hi, int count = 5) {
  if (!(hi > lo)) return {lo};
  const double raw = (hi - lo) / count;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = 10 * mag;
  for (double m : {1.0, 2.0, 2.5, 5.0}) {
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  }
  std::vector<double> ticks;
  for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) {
    ticks.push_back(std::abs(v) < step * 1e-9 ? 0.0 : v);
  }
  return ticks;
}

// A plot area with axes: x in iterations [x_lo, x_hi], y in [y_lo, y_hi].
struct Frame {
  double width, height, left, right, top, bottom;
  double x_lo, x_hi, y_lo, y_hi;
  double X(double v) const {
    return left + (width - left - right) * (v - x_lo) / std::max(x_hi - x_lo, 1e-12);
  }
  double Y(double v) const {
    return height - bottom - (height - top - bottom) * (v - y_lo) / std::max(y_hi - y_lo, 1e-12);
  }
  // Background, title, both axes with ticks and their names.
  std::string Axes(const std::string& title, const std::string& x_name, const std::string& y_name,
                   const char* y_format) const {
    const double x0 = left, x1 = width - right, y0 = height - bottom, y1 = top;
    std::string s = "<svg xmlns='http://www.w3.org/2000/svg' width='" + Num(width, "%.0f") +
                    "' height='" + Num(height, "%.0f") + "'>\n<rect width='" + Num(width, "%.0f") +
                    "' height='" + Num(height, "%.0f") + "' fill='white'/>\n<text x='" + Num(left) +
                    "' y='20' font-size='14'>" + XmlEscape(title) + "</text>\n";
    s += "<line x1='" + Num(x0) + "' y1='" + Num(y0) + "' x2='" + Num(x1) + "' y2='" + Num(y0) +
         "' stroke='black'/><line x1='" + Num(x0) + "' y1='" + Num(y0) + "' x2='" + Num(x0) +
         "' y2='" + Num(y1) + "' stroke='black'/>\n";
    for (double t : NiceTicks(x_lo, x_hi)) {
      const std::string tx = Num(X(t));
      s += "<line class='x-tick' x1='" + tx + "' y1='" + Num(y0) + "' x2='" + tx + "' y2='" +
           Num(y0 + 5) + "' stroke='black'/><text x='" + tx + "' y='" + Num(y0 + 18) +
           "' font-size='11' text-anchor='middle'>" + Num(t, "%.0f") + "</text>\n";
    }
    for (double t : NiceTicks(y_lo, y_hi)) {
      const std::string ty = Num(Y(t));
      s += "<line class='y-tick' x1='" + Num(x0 - 5) + "' y1='" + ty + "' x2='" + Num(x0) +
           "' y2='" + ty + "' stroke='black'/><text x='" + Num(x0 - 8) + "' y='" + Num(Y(t) + 4) +
           "' font-size='11' text-anchor='end'>" + Num(t, y_format) + "</text>\n";
    }
    const std::string mid_y = Num((y0 + y1) / 2);
    s += "<text class='x-label' x='" + Num((x0 + x1) / 2) + "' y='" + Num(height - 12) +
         "' font-size='12' text-anchor='middle'>" + XmlEscape(x_name) + "</text>\n";
    s += "<text class='y-label' x='16' y='" + mid_y +
         "' font-size='12' text-anchor='middle' transform='rotate(-90 16 " + mid_y + ")'>" +
         XmlEscape(y_name) + "</text>\n";
    return s;
  }
};

std::string Legend(const audit::Accounting& acc, double x, double y) {
  std::string s;
  for (size_t k = 0; k < acc.sources.size(); ++k) {
    s += "<text x='" + Num(x) + "' y='" + Num(y + 15.0 * static_cast<double>(k)) +
         "' font-size='11' fill='" + Color(k) + "'>" + XmlEscape(acc.sources[k].prefix) +
         "</text>\n";
  }
  return s;
}

}  // namespace

std::string XmlEscape(const std::string& text) {
  std::string out;
  for (char c : text) {
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
      case '\'':
        out += "&apos;";
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

std::string SharesSvg(const audit::Accounting& acc) {
  int64_t lo = -1, hi = 0;
  for (const auto& st : acc.stages) {
    for (int64_t it : st.iterations) {
      lo = lo < 0 ? it : std::min(lo, it);
      hi = std::max(hi, it);
    }
  }
  lo = std::max<int64_t>(lo, 0);
  const Frame f{
      860, 420, 70, 180, 50, 55, static_cast<double>(lo), static_cast<double>(std::max(hi, lo + 1)),
      0,   1};
  std::string svg =
      f.Axes("share per source: achieved over the trailing " + std::to_string(acc.window) +
                 " iterations of each stage (solid) vs target (dashed)",
             "iteration", "share of the samples", "%.2f");
  for (size_t i = 0; i < acc.stages.size(); ++i) {
    const auto& st = acc.stages[i];
    if (st.first_iteration < 0) continue;
    const std::string bx = Num(f.X(static_cast<double>(st.first_iteration)));
    // The first stage is named where the plot starts; later ones at a boundary line.
    if (i > 0) {
      svg += "<line class='stage-boundary' x1='" + bx + "' y1='" + Num(f.Y(0)) + "' x2='" + bx +
             "' y2='" + Num(f.Y(1)) + "' stroke='gray' stroke-dasharray='4,3'/>";
    }
    svg += "<text class='stage-name' x='" + Num(f.X(static_cast<double>(st.first_iteration)) + 3) +
           "' y='" + Num(f.top - 6) + "' font-size='10' fill='gray'>" + XmlEscape(st.name) +
           " (iteration " + std::to_string(st.first_iteration) + ")</text>\n";
  }
  for (const auto& st : acc.stages) {
    for (size_t k = 0; k < st.sources.size(); ++k) {
      const auto& c = st.sources[k];
      for (const bool target : {false, true}) {
        const auto& values = target ? c.target_series : c.share_series;
        std::string pts, data;
        for (size_t j = 0; j < values.size() && j < st.iterations.size(); ++j) {
          const double it = static_cast<double>(st.iterations[j]);
          pts += Num(f.X(it)) + "," + Num(f.Y(std::clamp(values[j], 0.0, 1.0))) + " ";
          data += std::to_string(st.iterations[j]) + ":" + Num(values[j], "%.17g") + " ";
        }
        if (pts.empty()) continue;
        svg += std::string("<polyline class='") + (target ? "target" : "achieved") +
               "' data-source='" + XmlEscape(acc.sources[k].prefix) + "' data-stage='" +
               XmlEscape(st.name) + "' data-values='" + data + "' fill='none' stroke='" + Color(k) +
               (target ? "' stroke-width='1.5' stroke-dasharray='6,3'" : "' stroke-width='2'") +
               " points='" + pts + "'/>\n";
      }
    }
  }
  return svg + Legend(acc, f.width - f.right + 10, f.top + 10) + "</svg>\n";
}

bool TokensPlotIsInformative(const audit::Accounting& acc) { return acc.sources.size() > 1; }

std::string TokensSvg(const audit::Accounting& acc) {
  int64_t max_tokens = 1;
  for (const auto& s : acc.series) {
    for (int64_t v : s) max_tokens = std::max(max_tokens, v);
  }
  const double first = acc.iterations.empty() ? 0 : static_cast<double>(acc.iterations.front());
  const double last = acc.iterations.empty() ? 1 : static_cast<double>(acc.iterations.back());
  const Frame f{820,   400,
                90,    180,
                40,    55,
                first, std::max(last, first + 1),
                0,     static_cast<double>(max_tokens)};
  std::string svg =
      f.Axes("consumed tokens per source", "iteration", "tokens consumed (cumulative)", "%.3g");
  for (size_t i = 0; i < acc.stages.size(); ++i) {
    const auto& st = acc.stages[i];
    if (st.first_iteration < 0) continue;
    const double x = f.X(static_cast<double>(st.first_iteration));
    if (i > 0) {
      svg += "<line class='stage-boundary' x1='" + Num(x) + "' y1='" + Num(f.Y(0)) + "' x2='" +
             Num(x) + "' y2='" + Num(f.top) + "' stroke='gray' stroke-dasharray='4,3'/>";
    }
    svg += "<text class='stage-name' x='" + Num(x + 3) + "' y='" + Num(f.top - 4) +
           "' font-size='10' fill='gray'>" + XmlEscape(st.name) + " (iteration " +
           std::to_string(st.first_iteration) + ")</text>\n";
  }
  for (size_t k = 0; k < acc.series.size(); ++k) {
    std::string pts, data;
    for (size_t i = 0; i < acc.series[k].size() && i < acc.iterations.size(); ++i) {
      const double it = static_cast<double>(acc.iterations[i]);
      pts += Num(f.X(it)) + "," + Num(f.Y(static_cast<double>(acc.series[k][i]))) + " ";
      data += std::to_string(acc.iterations[i]) + ":" + std::to_string(acc.series[k][i]) + " ";
    }
    svg += "<polyline class='tokens' data-source='" + XmlEscape(acc.sources[k].prefix) +
           "' data-values='" + data + "' fill='none' stroke-width='2' stroke='" + Color(k) +
           "' points='" + pts + "'/>\n";
  }
  return svg + Legend(acc, f.width - f.right + 10, f.top + 10) + "</svg>\n";
}

}  // namespace gridfeed::app
