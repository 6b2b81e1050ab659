// What one `deconvjit bench` run measured, and the ways it is shown: JSON Lines, the text table and its
// summary (the SVG/HTML report reads the same structures). Two comparisons with oneDNN are kept apart:
// - user layout: ours on tensors in a given layout against oneDNN's best on plain tensors in that same
//   layout (its plain primitive, or `any` with the reorders from and back to the plain tensors timed);
//   what a user holding plain tensors pays.
// - kernel race: our fastest layout against oneDNN's fastest kernel, plain NCX, plain NXC or `any` with the
//   data already in its blocked formats (no reorders); what an engine that keeps oneDNN's layouts pays.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "deconvjit/deconvjit.hpp"

namespace deconvjit::bench {

// Times in ms. Negative means "not measured" (printed "-"), NaN "not possible" (printed "n/a").
struct LayoutResult {  // our kernel on the problem with its data in one layout
  DataFormat layout = DataFormat::NCX;
  std::string kernel, error, verify;  // error: why no kernel (Unsupported); verify: "", "ok" or "FAIL"
  Isa isa = Isa::best;
  double compile_ms = -1, ours_ms = -1, gflops = -1, peak_pct = -1, gbps = -1, bw_pct = -1;
  bool memory_bound = false;
  double onednn_any_reordered_ms = -1;  // `any`, reorders from and back to this layout timed
  double user_ratio = -1;               // min(oneDNN plain in this layout, any reordered) / ours
};

struct ProblemResult {
  std::string name;
  double gflop = 0, mbytes = 0;  // mbytes: src + weights + dst, what the roofline divides by
  std::vector<LayoutResult> layouts;
  bool onednn = false;  // oneDNN was asked for (it may still have refused: see onednn_note)
  double onednn_ncx_ms = -1, onednn_nxc_ms = -1, onednn_any_ms = -1;  // kernels alone
  std::string onednn_note, impl_ncx, impl_nxc, impl_any, any_format;
  bool onednn_agrees = true;  // every oneDNN variant's output matched ours
  double race_ratio = -1;     // oneDNN's fastest kernel / our fastest layout
  std::string race_ours, race_onednn;  // who raced: "NXC", and "ncx", "nxc" or "any"

  double onednn_plain_ms(DataFormat f) const { return f == DataFormat::NCX ? onednn_ncx_ms : onednn_nxc_ms; }
  const LayoutResult* fastest() const;  // ours, among the layouts that have a kernel; null if none
};

// Fills the comparisons (user_ratio, race_*) from the times.
void compare(ProblemResult& r);

struct RunInfo {
  int threads = 1;
  Isa isa = Isa::best;
  double peak_gflops = 0, bandwidth_gbps = 0;
  bool onednn = false, verify = false;
  std::string onednn_version;
  int verify_failures = 0, unsupported = 0;
};

// One JSON object per layout timed: the kernel, then "user_layout" and "kernel_race" when oneDNN ran.
std::vector<nlohmann::ordered_json> problem_json(const ProblemResult& r);
nlohmann::ordered_json summary_json(const RunInfo& run, const std::vector<ProblemResult>& rows);
class Table;
Table result_table(const RunInfo& run, const std::vector<ProblemResult>& rows);  // what print_table prints
std::string table_legend();  // what the oneDNN columns mean
void print_table(std::ostream& out, const RunInfo& run, const std::vector<ProblemResult>& rows);
void print_summary(std::ostream& out, const RunInfo& run, const std::vector<ProblemResult>& rows);

// Geometric mean of the finite positive ratios; `count` and `below_one` say how many and how many < 1.
double geomean(const std::vector<double>& ratios, int* count, std::vector<size_t>* below_one = nullptr);

}  // namespace deconvjit::bench
