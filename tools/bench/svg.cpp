#include "bench/svg.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace deconvjit::bench {
namespace {

// Two decimals are plenty for pixels and keep the file small.
std::string px(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", std::isfinite(v) ? v : 0.0);
  std::string s = buf;
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

std::string attr(const char* name, const std::string& value) {
  return std::string(" ") + name + "=\"" + xml_escape(value) + "\"";
}

std::string title(const std::string& tip) { return tip.empty() ? "" : "<title>" + xml_escape(tip) + "</title>"; }

}  // namespace

std::string xml_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        out += static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' ? '?' : c;
    }
  }
  return out;
}

Svg::Svg(double width, double height) : width_(width), height_(height) {}

void Svg::rect(double x, double y, double w, double h, const std::string& fill, const std::string& cls,
               const std::string& tip) {
  body_ << "<rect" << attr("x", px(x)) << attr("y", px(y)) << attr("width", px(std::max(w, 0.0)))
        << attr("height", px(std::max(h, 0.0))) << attr("fill", fill) << (cls.empty() ? "" : attr("class", cls));
  if (tip.empty()) {
    body_ << "/>\n";
  } else {
    body_ << ">" << title(tip) << "</rect>\n";
  }
}

void Svg::line(double x1, double y1, double x2, double y2, const std::string& stroke, double width,
               const std::string& dash) {
  body_ << "<line" << attr("x1", px(x1)) << attr("y1", px(y1)) << attr("x2", px(x2)) << attr("y2", px(y2))
        << attr("stroke", stroke) << attr("stroke-width", px(width))
        << (dash.empty() ? "" : attr("stroke-dasharray", dash)) << "/>\n";
}

void Svg::circle(double cx, double cy, double r, const std::string& fill, const std::string& stroke,
                 const std::string& cls, const std::string& tip) {
  body_ << "<circle" << attr("cx", px(cx)) << attr("cy", px(cy)) << attr("r", px(r)) << attr("fill", fill)
        << attr("stroke", stroke) << (cls.empty() ? "" : attr("class", cls)) << ">" << title(tip) << "</circle>\n";
}

void Svg::text(double x, double y, const std::string& s, Anchor anchor, double size, double rotate,
               const std::string& weight) {
  const char* a = anchor == Anchor::Start ? "start" : anchor == Anchor::Middle ? "middle" : "end";
  body_ << "<text" << attr("x", px(x)) << attr("y", px(y)) << attr("text-anchor", a) << attr("font-size", px(size))
        << (weight == "normal" ? "" : attr("font-weight", weight))
        << (rotate != 0 ? attr("transform", "rotate(" + px(rotate) + " " + px(x) + " " + px(y) + ")") : "") << ">"
        << xml_escape(s) << "</text>\n";
}

void Svg::open_group(const std::string& cls, const std::string& id) {
  body_ << "<g" << attr("class", cls) << (id.empty() ? "" : attr("id", id)) << ">\n";
  ++open_groups_;
}

void Svg::close_group() {
  if (open_groups_ == 0) return;
  body_ << "</g>\n";
  --open_groups_;
}

std::string Svg::str() const {
  std::ostringstream out;
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << px(width_) << "\" height=\"" << px(height_)
      << "\" viewBox=\"0 0 " << px(width_) << " " << px(height_) << "\" font-family=\"sans-serif\">\n"
      << "<rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << body_.str();
  for (int i = 0; i < open_groups_; ++i) out << "</g>\n";
  out << "</svg>\n";
  return out.str();
}

Scale::Scale(double lo, double hi, double px_lo, double px_hi, bool log)
    : lo_(lo), hi_(hi), px_lo_(px_lo), px_hi_(px_hi), log_(log) {}

double Scale::operator()(double v) const {
  auto f = [this](double x) { return log_ ? std::log10(std::max(x, 1e-300)) : x; };
  const double span = f(hi_) - f(lo_);
  const double t = span > 0 ? (f(v) - f(lo_)) / span : 0.5;
  return px_lo_ + std::clamp(t, -0.05, 1.05) * (px_hi_ - px_lo_);  // far outliers stay near the frame
}

std::vector<double> Scale::ticks(bool base2) const {
  std::vector<double> t;
  if (log_) {
    const double step = base2 ? 2 : 10;
    const double lg = std::log(step);
    // A 1-2-5 series within each decade when there are few decades, so the eye can read values in between.
    const bool fine = !base2 && std::log10(hi_ / lo_) <= 3.01;
    for (double v = std::pow(step, std::floor(std::log(lo_) / lg + 1e-9)); v <= hi_ * (1 + 1e-9); v *= step) {
      for (double m : fine ? std::vector<double>{1, 2, 5} : std::vector<double>{1}) {
        if (v * m >= lo_ * (1 - 1e-9) && v * m <= hi_ * (1 + 1e-9)) t.push_back(v * m);
      }
    }
    return t;
  }
  const double raw = (hi_ - lo_) / 5;
  const double mag = std::pow(10, std::floor(std::log10(raw > 0 ? raw : 1)));
  const double step = raw / mag < 2 ? mag * 2 : raw / mag < 5 ? mag * 5 : mag * 10;
  for (double v = std::ceil(lo_ / step) * step; v <= hi_ + step * 1e-9; v += step) t.push_back(v);
  return t;
}

std::string tick_label(double v) {
  char buf[32];
  if (v != 0 && (std::fabs(v) >= 1e5 || std::fabs(v) < 1e-3)) {
    std::snprintf(buf, sizeof buf, "%.0e", v);
  } else {
    std::snprintf(buf, sizeof buf, "%g", v);
  }
  return buf;
}

}  // namespace deconvjit::bench
