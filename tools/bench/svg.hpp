// Just enough SVG for `deconvjit bench --report`: shapes, text (always escaped) and log/linear axes, so
// the report needs no plotting library. Coordinates are pixels, y down, as in SVG.
#pragma once

#include <sstream>
#include <string>
#include <vector>

namespace deconvjit::bench {

// &, <, >, " and ' as entities; control characters other than tab and newline (not allowed in XML 1.0)
// become '?'.
std::string xml_escape(const std::string& s);

class Svg {
 public:
  Svg(double width, double height);

  // `cls` names the element for styling and for counting (tests count class="bar ..." rects); `tip`
  // becomes a <title> child, which viewers show on hover.
  void rect(double x, double y, double w, double h, const std::string& fill, const std::string& cls = "",
            const std::string& tip = "");
  void line(double x1, double y1, double x2, double y2, const std::string& stroke, double width = 1,
            const std::string& dash = "");
  void circle(double cx, double cy, double r, const std::string& fill, const std::string& stroke,
              const std::string& cls = "", const std::string& tip = "");
  enum class Anchor { Start, Middle, End };
  void text(double x, double y, const std::string& s, Anchor anchor = Anchor::Start, double size = 11,
            double rotate = 0, const std::string& weight = "normal");
  void open_group(const std::string& cls, const std::string& id = "");
  void close_group();

  void set_height(double height) { height_ = height; }  // once the content's extent is known
  std::string str() const;  // the document, with the XML declaration

 private:
  double width_, height_;
  std::ostringstream body_;
  int open_groups_ = 0;
};

// Maps data values to pixels along one axis, linear or log10.
class Scale {
 public:
  Scale(double lo, double hi, double px_lo, double px_hi, bool log);
  double operator()(double v) const;
  // Tick values inside [lo, hi]: powers of 10 (log) or a 1-2-5 step (linear); `base2` gives powers of two
  // for log scales spanning little (speed-ups).
  std::vector<double> ticks(bool base2 = false) const;

 private:
  double lo_, hi_, px_lo_, px_hi_;
  bool log_;
};

// A short number for a tick label: "0.5", "2", "100", "1e+04".
std::string tick_label(double v);

}  // namespace deconvjit::bench
