// `deconvjit bench --report FILE.svg|FILE.html`: the run as a picture. Top panel, per problem: speed-up
// bars on a log axis, one per comparison with oneDNN (the kernel race, and the user-layout comparison of
// each layout timed); without oneDNN, our % of the measured FMA peak. Bottom panel: a roofline, each
// kernel's GFLOP/s against its arithmetic intensity (FLOP per byte of src + weights + dst) under the peak
// and bandwidth the run measured. The HTML page wraps the same SVG with the run's table.
#pragma once

#include <string>
#include <vector>

#include "bench/results.hpp"

namespace deconvjit::bench {

enum class ReportKind { Svg, Html };
// From the file name's extension (.svg, .html or .htm, any case); throws Error(InvalidArgument) otherwise.
ReportKind report_kind(const std::string& path);

std::string report_svg(const RunInfo& run, const std::vector<ProblemResult>& rows);
std::string report_html(const RunInfo& run, const std::vector<ProblemResult>& rows);

}  // namespace deconvjit::bench
