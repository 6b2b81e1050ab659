#include "bench/report.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>

#include "bench/svg.hpp"
#include "bench/table.hpp"

namespace deconvjit::bench {
namespace {

constexpr double kWidth = 960;
constexpr double kBarHeight = 9, kProblemGap = 7;
const char* const kRaceColour = "#1f5fa8";
const char* const kNcxColour = "#e08a1e";
const char* const kNxcColour = "#2e9d48";
const char* const kOnednnColour = "#777777";

using Anchor = Svg::Anchor;

const char* layout_colour(DataFormat f) { return f == DataFormat::NCX ? kNcxColour : kNxcColour; }

bool usable(double v) { return v > 0 && std::isfinite(v); }

std::string num(double v, int digits) { return fixed(v, digits); }

std::string label_of(size_t i, const ProblemResult& r) { return std::to_string(i + 1) + "  " + r.name; }

double label_width(const std::vector<ProblemResult>& rows) {
  size_t longest = 8;
  for (size_t i = 0; i < rows.size(); ++i) longest = std::max(longest, label_of(i, rows[i]).size());
  return std::clamp(static_cast<double>(longest) * 6.6 + 16, 110.0, 300.0);
}

std::vector<DataFormat> layouts_present(const std::vector<ProblemResult>& rows) {
  std::vector<DataFormat> present;
  for (DataFormat f : {DataFormat::NCX, DataFormat::NXC}) {
    const bool any = std::any_of(rows.begin(), rows.end(), [f](const ProblemResult& r) {
      return std::any_of(r.layouts.begin(), r.layouts.end(), [f](const LayoutResult& l) { return l.layout == f; });
    });
    if (any) present.push_back(f);
  }
  return present;
}

// One bar of the top panel: what it shows, its value, its colour and class.
struct Bar {
  std::string cls, colour, tip;
  double value;
  std::string missing = "n/a";  // printed instead of a value that was not measured
};

std::vector<Bar> bars_of(const RunInfo& run, const ProblemResult& r) {
  std::vector<Bar> bars;
  if (run.onednn) {
    bars.push_back({"bar race", kRaceColour,
                    r.name + ": kernel race, oneDNN " + r.race_onednn + " / ours " + r.race_ours, r.race_ratio,
                    r.fastest() ? "n/a" : "unsupported"});
    for (const auto& l : r.layouts) {
      const std::string f = to_string(l.layout);
      bars.push_back({"bar user user-" + f, layout_colour(l.layout),
                      r.name + ": user layout " + f + ", oneDNN's best on " + f + " tensors / ours", l.user_ratio,
                      l.error.empty() ? "n/a" : "unsupported"});
    }
  } else {
    for (const auto& l : r.layouts) {
      bars.push_back({std::string("bar ours ours-") + to_string(l.layout), layout_colour(l.layout),
                      r.name + " " + to_string(l.layout) + ": " + (l.error.empty() ? l.kernel : l.error), l.peak_pct,
                      l.error.empty() ? "n/a" : "unsupported"});
    }
  }
  for (Bar& b : bars) {
    b.tip += " = " + (!usable(b.value) ? b.missing : run.onednn ? num(b.value, 2) : num(b.value, 1) + "%");
  }
  return bars;
}

void legend(Svg& svg, double x, double y, const std::vector<std::pair<std::string, std::string>>& items) {
  for (const auto& [colour, text] : items) {
    svg.rect(x, y - 9, 12, 10, colour);
    svg.text(x + 17, y, text, Anchor::Start, 11);
    x += 30 + 6.2 * static_cast<double>(text.size());
  }
}

// The axis's domain: speed-ups on a log scale around 1, or percentages of peak from 0.
Scale bar_scale(const RunInfo& run, const std::vector<ProblemResult>& rows, double x0, double x1) {
  double lo = 0.5, hi = 2;
  for (const auto& r : rows) {
    for (const Bar& b : bars_of(run, r)) {
      if (usable(b.value)) lo = std::min(lo, b.value), hi = std::max(hi, b.value);
    }
  }
  if (!run.onednn) return Scale(0, std::max(100.0, hi * 1.1), x0, x1, false);
  const double span = std::max(std::log2(hi * 1.15), -std::log2(lo / 1.15));  // symmetric: 1 in the middle
  return Scale(std::pow(2, -span), std::pow(2, span), x0, x1, true);
}

double bar_panel(Svg& svg, const RunInfo& run, const std::vector<ProblemResult>& rows, double top) {
  const double x0 = label_width(rows), x1 = kWidth - 60;
  svg.text(20, top + 14,
           run.onednn ? "Speed-up over oneDNN (oneDNN ms / ours ms, log scale; right of 1: deconvjit faster)"
                      : "Our GFLOP/s as % of the measured FMA peak",
           Anchor::Start, 14, 0, "bold");
  std::vector<std::pair<std::string, std::string>> items;
  if (run.onednn) items.emplace_back(kRaceColour, "kernel race: our fastest layout vs oneDNN's fastest kernel");
  for (DataFormat f : layouts_present(rows)) {
    items.emplace_back(layout_colour(f), std::string(run.onednn ? "user layout " : "ours ") + to_string(f));
  }
  legend(svg, 20, top + 34, items);
  const Scale sx = bar_scale(run, rows, x0, x1);
  double y = top + 48;
  const double plot_top = y;
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::vector<Bar> bars = bars_of(run, rows[i]);
    const double block = static_cast<double>(bars.size()) * kBarHeight;
    svg.open_group("problem", "problem-" + std::to_string(i + 1));
    svg.text(x0 - 8, y + block / 2 + 4, label_of(i, rows[i]), Anchor::End, 11);
    for (const Bar& b : bars) {
      const double base = run.onednn ? sx(1) : sx(0);
      const double end = usable(b.value) ? sx(b.value) : base;
      svg.rect(std::min(base, end), y, std::fabs(end - base), kBarHeight - 1, b.colour, b.cls, b.tip);
      const std::string value = usable(b.value) ? num(b.value, run.onednn ? 2 : 0) : b.missing;
      const bool left = end < base;
      svg.text(end + (left ? -3 : 3), y + kBarHeight - 2, value, left ? Anchor::End : Anchor::Start, 8);
      y += kBarHeight;
    }
    svg.close_group();
    y += kProblemGap;
  }
  for (double t : sx.ticks(true)) {
    const bool one = run.onednn && std::fabs(t - 1) < 1e-9;
    svg.line(sx(t), plot_top - 4, sx(t), y, one ? "#333333" : "#dddddd", one ? 1.2 : 1);
    svg.text(sx(t), y + 14, tick_label(t), Anchor::Middle, 10);
  }
  svg.text((x0 + x1) / 2, y + 32, run.onednn ? "speed-up (x), log scale" : "% of peak", Anchor::Middle, 11);
  return y + 44;
}

// Arithmetic intensity and GFLOP/s of every kernel drawn: ours per layout, and oneDNN's fastest.
struct Point {
  double ai, gflops;
  std::string colour, cls, tip, label;
  bool hollow;
};

std::vector<Point> points_of(const std::vector<ProblemResult>& rows) {
  std::vector<Point> pts;
  for (size_t i = 0; i < rows.size(); ++i) {
    const ProblemResult& r = rows[i];
    const double ai = r.gflop * 1e3 / r.mbytes;  // FLOP per byte
    const std::string id = std::to_string(i + 1);
    for (const auto& l : r.layouts) {
      if (!usable(l.gflops)) continue;
      pts.push_back({ai, l.gflops, layout_colour(l.layout), std::string("point ours-") + to_string(l.layout),
                     id + " " + r.name + " " + to_string(l.layout) + ": " + l.kernel + ", " + num(l.gflops, 1) +
                         " GFLOP/s at " + num(ai, 2) + " FLOP/B",
                     id, false});
    }
    const double dnnl_ms = r.race_onednn == "any" ? r.onednn_any_ms : r.race_onednn == "nxc" ? r.onednn_nxc_ms
                                                                                            : r.onednn_ncx_ms;
    if (!r.race_onednn.empty() && usable(dnnl_ms)) {
      const double g = r.gflop / (dnnl_ms * 1e-3);
      pts.push_back({ai, g, kOnednnColour, "point onednn",
                     id + " " + r.name + ": oneDNN " + r.race_onednn + ", " + num(g, 1) + " GFLOP/s", "", true});
    }
  }
  return pts;
}

// The decades that hold every usable value; [1, 10] when there is none.
std::pair<double, double> decades(const std::vector<double>& values) {
  double lo = 0, hi = 0;
  for (double v : values) {
    if (usable(v)) lo = lo > 0 ? std::min(lo, v) : v, hi = std::max(hi, v);
  }
  if (lo <= 0) return {1, 10};
  return {std::pow(10, std::floor(std::log10(lo / 1.3))), std::pow(10, std::ceil(std::log10(hi * 1.3)))};
}

void roof(Svg& svg, const RunInfo& run, const Scale& sx, const Scale& sy, std::pair<double, double> xr,
          std::pair<double, double> yr) {
  const double peak = run.peak_gflops, bw = run.bandwidth_gbps;
  if (!usable(peak) || !usable(bw)) return;
  const double ridge = peak / bw;
  const double x_start = std::max(xr.first, yr.first / bw);
  svg.line(sx(x_start), sy(bw * x_start), sx(ridge), sy(peak), "#b22222", 2);
  svg.line(sx(ridge), sy(peak), sx(xr.second), sy(peak), "#b22222", 2);
  svg.text(sx(xr.second) - 4, sy(peak) - 6, "peak " + num(peak, 1) + " GFLOP/s (FMA, measured)", Anchor::End, 11);
  const double angle = std::atan2(sy(peak) - sy(bw * x_start), sx(ridge) - sx(x_start)) * 180 / M_PI;
  const double xm = std::sqrt(x_start * ridge);
  svg.text(sx(xm) - 4, sy(bw * xm) - 6, "bandwidth " + num(bw, 1) + " GB/s (triad, measured)", Anchor::Middle, 11,
           angle);
  svg.line(sx(ridge), sy(peak), sx(ridge), sy(yr.first), "#b22222", 1, "3,3");
  svg.text(sx(ridge) + 4, sy(yr.first) - 6, "ridge " + num(ridge, 1) + " FLOP/B", Anchor::Start, 10);
}

double roofline_panel(Svg& svg, const RunInfo& run, const std::vector<ProblemResult>& rows, double top) {
  svg.text(20, top + 14, "Roofline: GFLOP/s against arithmetic intensity (log-log)", Anchor::Start, 14, 0, "bold");
  std::vector<std::pair<std::string, std::string>> items;
  for (DataFormat f : layouts_present(rows)) items.emplace_back(layout_colour(f), std::string("ours ") + to_string(f));
  if (run.onednn) items.emplace_back(kOnednnColour, "oneDNN's fastest kernel (hollow)");
  legend(svg, 20, top + 34, items);
  const std::vector<Point> pts = points_of(rows);
  std::vector<double> ais, gs;
  for (const Point& p : pts) ais.push_back(p.ai), gs.push_back(p.gflops);
  ais.push_back(usable(run.bandwidth_gbps) ? run.peak_gflops / run.bandwidth_gbps : 0);  // the ridge
  gs.push_back(run.peak_gflops);
  const auto xr = decades(ais), yr = decades(gs);
  const double left = 80, right = kWidth - 40, plot_top = top + 50, bottom = plot_top + 380;
  const Scale sx(xr.first, xr.second, left, right, true), sy(yr.first, yr.second, bottom, plot_top, true);
  svg.rect(left, plot_top, right - left, bottom - plot_top, "#fbfbfb");
  for (double t : sx.ticks()) {
    svg.line(sx(t), plot_top, sx(t), bottom, "#e0e0e0");
    svg.text(sx(t), bottom + 14, tick_label(t), Anchor::Middle, 10);
  }
  for (double t : sy.ticks()) {
    svg.line(left, sy(t), right, sy(t), "#e0e0e0");
    svg.text(left - 6, sy(t) + 4, tick_label(t), Anchor::End, 10);
  }
  svg.text((left + right) / 2, bottom + 34, "arithmetic intensity (FLOP per byte of src + weights + dst)",
           Anchor::Middle, 11);
  svg.text(24, (plot_top + bottom) / 2, "GFLOP/s", Anchor::Middle, 11, -90);
  roof(svg, run, sx, sy, xr, yr);
  for (const Point& p : pts) {
    svg.circle(sx(p.ai), sy(p.gflops), p.hollow ? 5 : 4, p.hollow ? "none" : p.colour, p.hollow ? p.colour : "white",
               p.cls, p.tip);
    if (!p.label.empty()) svg.text(sx(p.ai) + 6, sy(p.gflops) + 3, p.label, Anchor::Start, 9);
  }
  return bottom + 50;
}

std::string title_of(const RunInfo& run, size_t problems) {
  std::string t = "deconvjit bench: " + std::to_string(problems) + " problem(s), " + std::to_string(run.threads) +
                  " thread(s), " + to_string(run.isa);
  if (run.onednn) t += ", vs oneDNN " + run.onednn_version;
  return t;
}

}  // namespace

std::string report_svg(const RunInfo& run, const std::vector<ProblemResult>& rows) {
  Svg svg(kWidth, 0);
  svg.text(20, 26, title_of(run, rows.size()), Anchor::Start, 16, 0, "bold");
  svg.text(20, 44, "measured peak " + num(run.peak_gflops, 1) + " GFLOP/s, bandwidth " + num(run.bandwidth_gbps, 1) +
                       " GB/s; numbers name the problems in both panels; hover for details",
           Anchor::Start, 11);
  double y = bar_panel(svg, run, rows, 60);
  svg.set_height(roofline_panel(svg, run, rows, y));
  return svg.str();
}

namespace {

std::string html_table(const Table& t) {
  std::ostringstream out;
  out << "<table>\n<thead><tr>";
  for (const auto& h : t.headers()) out << "<th>" << xml_escape(h) << "</th>";
  out << "</tr></thead>\n<tbody>\n";
  for (const auto& row : t.rows()) {
    out << "<tr>";
    for (const auto& c : row) out << "<td>" << xml_escape(c) << "</td>";
    out << "</tr>\n";
  }
  out << "</tbody>\n</table>\n";
  return out.str();
}

}  // namespace

ReportKind report_kind(const std::string& path) {
  const size_t dot = path.rfind('.');
  std::string ext = dot == std::string::npos ? "" : path.substr(dot + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  if (ext == "svg") return ReportKind::Svg;
  if (ext == "html" || ext == "htm") return ReportKind::Html;
  throw Error(Error::Kind::InvalidArgument, "--report '" + path + "': the file name must end in .svg or .html");
}

std::string report_html(const RunInfo& run, const std::vector<ProblemResult>& rows) {
  std::string svg = report_svg(run, rows);
  svg.erase(0, svg.find("<svg"));  // the XML declaration has no place inside a page
  std::ostringstream summary, legend;
  print_summary(summary, run, rows);
  std::ostringstream out;
  out << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n<title>"
      << xml_escape(title_of(run, rows.size())) << "</title>\n<style>\n"
      << "body { font-family: sans-serif; margin: 1.5em; }\n"
      << "table { border-collapse: collapse; font-size: 13px; }\n"
      << "th, td { border: 1px solid #ccc; padding: 2px 6px; text-align: right; }\n"
      << "th { background: #f0f0f0; }\n"
      << "td:nth-child(-n+3) { text-align: left; }\n"
      << "</style>\n</head>\n<body>\n<h1>" << xml_escape(title_of(run, rows.size())) << "</h1>\n"
      << "<pre>" << xml_escape(summary.str()) << "</pre>\n"
      << svg << html_table(result_table(run, rows));
  if (run.onednn) out << "<pre>" << xml_escape(table_legend()) << "</pre>\n";
  out << "</body>\n</html>\n";
  return out.str();
}

}  // namespace deconvjit::bench
