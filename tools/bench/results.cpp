#include "bench/results.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "bench/table.hpp"

namespace deconvjit::bench {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

bool measured(double ms) { return ms > 0 && std::isfinite(ms); }

nlohmann::ordered_json number(double v) {
  if (v < 0 || std::isnan(v)) return nullptr;
  return v;
}

nlohmann::ordered_json text_or_null(const std::string& s) {
  return s.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(s);
}

// The faster of two oneDNN times, NaN unless at least one was measured.
double best_of(std::initializer_list<double> ms) {
  double best = kNaN;
  for (double m : ms) {
    if (measured(m) && !(best <= m)) best = m;
  }
  return best;
}

nlohmann::ordered_json user_layout_json(const ProblemResult& r, const LayoutResult& l) {
  nlohmann::ordered_json j;
  j["onednn_plain_ms"] = number(r.onednn_plain_ms(l.layout));
  j["onednn_any_reordered_ms"] = number(l.onednn_any_reordered_ms);
  j["ratio"] = number(l.user_ratio);
  return j;
}

nlohmann::ordered_json race_json(const ProblemResult& r) {
  nlohmann::ordered_json j;
  const LayoutResult* ours = r.fastest();
  j["ours_layout"] = ours ? nlohmann::ordered_json(to_string(ours->layout)) : nlohmann::ordered_json(nullptr);
  j["ours_ms"] = number(ours ? ours->ours_ms : -1);
  j["onednn_ncx_ms"] = number(r.onednn_ncx_ms);
  j["onednn_nxc_ms"] = number(r.onednn_nxc_ms);
  j["onednn_any_ms"] = number(r.onednn_any_ms);
  j["onednn_best"] = text_or_null(r.race_onednn);
  j["ratio"] = number(r.race_ratio);
  return j;
}

nlohmann::ordered_json onednn_json(const ProblemResult& r) {
  nlohmann::ordered_json j;
  if (!r.impl_any.empty()) {
    j["agrees"] = r.onednn_agrees;
    j["impl_ncx"] = r.impl_ncx;
    j["impl_nxc"] = r.impl_nxc;
    j["impl_any"] = r.impl_any;
    j["any_src_format"] = r.any_format;
  }
  if (!r.onednn_note.empty()) j["note"] = r.onednn_note;
  return j;
}

nlohmann::ordered_json layout_json(const ProblemResult& r, const LayoutResult& l) {
  nlohmann::ordered_json j;
  j["name"] = r.name;
  j["layout"] = to_string(l.layout);
  if (!l.error.empty()) {
    j["error"] = l.error;
    return j;
  }
  j["kernel"] = l.kernel;
  j["isa"] = to_string(l.isa);
  j["gflop"] = r.gflop;
  j["mbytes"] = r.mbytes;
  j["compile_ms"] = l.compile_ms;
  j["ours_ms"] = l.ours_ms;
  j["gflops"] = l.gflops;
  j["peak_pct"] = number(l.peak_pct);
  j["bound"] = l.memory_bound ? "memory" : "compute";
  j["gbps"] = l.gbps;
  j["bw_pct"] = number(l.bw_pct);
  if (!l.verify.empty()) j["verify"] = l.verify;
  if (r.onednn) {
    j["user_layout"] = user_layout_json(r, l);
    j["kernel_race"] = race_json(r);
    j["onednn"] = onednn_json(r);
  }
  return j;
}

Table make_table(const RunInfo& run) {
  Table t;
  t.add_column("name", Table::Align::Left);
  t.add_column("layout", Table::Align::Left);
  t.add_column("kernel", Table::Align::Left);
  for (const char* c : {"compile_ms", "ours_ms", "GFLOP/s", "%peak", "GB/s", "%bw"}) t.add_column(c);
  if (run.onednn) {
    for (const char* c : {"dnnl_ncx_ms", "dnnl_nxc_ms", "dnnl_any_ms", "dnnl_any+reord_ms", "user_ratio",
                          "race_ratio"}) {
      t.add_column(c);
    }
    t.add_column("race", Table::Align::Left);
  }
  if (run.verify) t.add_column("verify", Table::Align::Left);
  return t;
}

// Who raced, and why oneDNN ran fewer variants or none (e.g. "onednn: unsupported for f16").
std::string race_cell(const ProblemResult& r) {
  std::string cell = r.race_onednn.empty() ? "" : r.race_ours + " vs " + r.race_onednn;
  if (r.onednn_note.empty()) return cell;
  return cell.empty() ? r.onednn_note : cell + " (" + r.onednn_note + ")";
}

// The problem's own cells (oneDNN's kernels, the race) go on its first line with a kernel only.
void add_rows(const RunInfo& run, Table& t, const ProblemResult& r) {
  const LayoutResult* owner = nullptr;
  for (const LayoutResult& l : r.layouts) owner = owner || !l.error.empty() ? owner : &l;
  for (const LayoutResult& l : r.layouts) {
    const bool first = &l == owner;
    if (!l.error.empty()) {
      t.add_row({r.name, to_string(l.layout), "unsupported: " + l.error});
      continue;
    }
    // Bandwidth figures only where bandwidth is the limit; elsewhere they would invite a wrong reading.
    std::vector<std::string> cells{r.name, to_string(l.layout), l.kernel, fixed(l.compile_ms, 2),
                                   fixed(l.ours_ms, 3), fixed(l.gflops, 1), fixed(l.peak_pct, 1),
                                   l.memory_bound ? fixed(l.gbps, 1) : "-", l.memory_bound ? fixed(l.bw_pct, 1) : "-"};
    if (run.onednn) {
      for (double v : {r.onednn_ncx_ms, r.onednn_nxc_ms, r.onednn_any_ms}) cells.push_back(first ? fixed(v, 3) : "");
      cells.push_back(fixed(l.onednn_any_reordered_ms, 3));
      cells.push_back(fixed(l.user_ratio, 2));
      cells.push_back(first ? fixed(r.race_ratio, 2) : "");
      cells.push_back(first ? race_cell(r) : "");
    }
    if (run.verify) cells.push_back(l.verify);
    t.add_row(std::move(cells));
  }
}

std::string names_of(const std::vector<ProblemResult>& rows, const std::vector<size_t>& which) {
  std::string s;
  for (size_t i : which) s += (s.empty() ? "" : ", ") + rows[i].name;
  return s;
}

std::vector<DataFormat> layouts_seen(const std::vector<ProblemResult>& rows) {
  std::vector<DataFormat> seen;
  for (const auto& r : rows) {
    for (const auto& l : r.layouts) {
      if (std::find(seen.begin(), seen.end(), l.layout) == seen.end()) seen.push_back(l.layout);
    }
  }
  return seen;
}

// User-layout ratios of the rows in layout `f`, indexed like `rows` (-1 where there is none).
std::vector<double> user_ratios(const std::vector<ProblemResult>& rows, DataFormat f) {
  std::vector<double> v;
  for (const auto& r : rows) {
    double ratio = -1;
    for (const auto& l : r.layouts) ratio = l.layout == f ? l.user_ratio : ratio;
    v.push_back(ratio);
  }
  return v;
}

std::vector<double> race_ratios(const std::vector<ProblemResult>& rows) {
  std::vector<double> v;
  for (const auto& r : rows) v.push_back(r.race_ratio);
  return v;
}

nlohmann::ordered_json geomean_json(const std::vector<double>& ratios, const std::vector<ProblemResult>& rows) {
  int count = 0;
  std::vector<size_t> below;
  const double g = geomean(ratios, &count, &below);
  nlohmann::ordered_json j;
  j["geomean"] = count ? nlohmann::ordered_json(g) : nlohmann::ordered_json(nullptr);
  j["problems"] = count;
  j["below_1"] = nlohmann::ordered_json::array();
  for (size_t i : below) j["below_1"].push_back(rows[i].name);
  return j;
}

}  // namespace

const LayoutResult* ProblemResult::fastest() const {
  const LayoutResult* best = nullptr;
  for (const auto& l : layouts) {
    if (l.error.empty() && measured(l.ours_ms) && (!best || l.ours_ms < best->ours_ms)) best = &l;
  }
  return best;
}

void compare(ProblemResult& r) {
  if (!r.onednn) return;
  for (LayoutResult& l : r.layouts) {
    const double dnnl = best_of({r.onednn_plain_ms(l.layout), l.onednn_any_reordered_ms});
    l.user_ratio = measured(l.ours_ms) ? dnnl / l.ours_ms : -1;
  }
  const LayoutResult* ours = r.fastest();
  const double dnnl = best_of({r.onednn_ncx_ms, r.onednn_nxc_ms, r.onednn_any_ms});
  if (!ours || std::isnan(dnnl)) {
    r.race_ratio = ours ? kNaN : -1;
    return;
  }
  r.race_ours = to_string(ours->layout);
  r.race_onednn = dnnl == r.onednn_any_ms ? "any" : dnnl == r.onednn_nxc_ms ? "nxc" : "ncx";
  r.race_ratio = dnnl / ours->ours_ms;
}

double geomean(const std::vector<double>& ratios, int* count, std::vector<size_t>* below_one) {
  double log_sum = 0;
  *count = 0;
  for (size_t i = 0; i < ratios.size(); ++i) {
    if (!(ratios[i] > 0) || !std::isfinite(ratios[i])) continue;
    log_sum += std::log(ratios[i]);
    ++*count;
    if (below_one && ratios[i] < 1) below_one->push_back(i);
  }
  return *count ? std::exp(log_sum / *count) : kNaN;
}

std::vector<nlohmann::ordered_json> problem_json(const ProblemResult& r) {
  std::vector<nlohmann::ordered_json> v;
  for (const auto& l : r.layouts) v.push_back(layout_json(r, l));
  return v;
}

nlohmann::ordered_json summary_json(const RunInfo& run, const std::vector<ProblemResult>& rows) {
  nlohmann::ordered_json j;
  j["summary"] = true;
  j["rows"] = rows.size();
  j["threads"] = run.threads;
  j["isa"] = to_string(run.isa);
  j["peak_gflops"] = run.peak_gflops;
  j["bandwidth_gbps"] = run.bandwidth_gbps;
  j["verify_failures"] = run.verify_failures;
  j["unsupported"] = run.unsupported;
  j["onednn"] = run.onednn ? nlohmann::ordered_json(run.onednn_version) : nlohmann::ordered_json(nullptr);
  if (run.onednn) {
    nlohmann::ordered_json user;
    for (DataFormat f : layouts_seen(rows)) user[to_string(f)] = geomean_json(user_ratios(rows, f), rows);
    j["user_layout"] = user;
    j["kernel_race"] = geomean_json(race_ratios(rows), rows);
  }
  return j;
}

Table result_table(const RunInfo& run, const std::vector<ProblemResult>& rows) {
  Table t = make_table(run);
  for (const auto& r : rows) add_rows(run, t, r);
  return t;
}

void print_table(std::ostream& out, const RunInfo& run, const std::vector<ProblemResult>& rows) {
  result_table(run, rows).print(out);
  if (run.onednn) out << table_legend();
}

std::string table_legend() {
  return "dnnl_*_ms: oneDNN on plain NCX / plain NXC tensors, or on its preferred blocked formats (any) with the\n"
         "  data already there; dnnl_any+reord_ms: any with the reorders from and back to this row's layout timed\n"
         "user_ratio: oneDNN's best on this row's layout (plain, or any+reord) / ours; >1: deconvjit faster\n"
         "race_ratio: oneDNN's fastest kernel (ncx, nxc or any) / our fastest layout (race: ours vs theirs)\n";
}

void print_summary(std::ostream& out, const RunInfo& run, const std::vector<ProblemResult>& rows) {
  out << rows.size() << " problem(s), " << run.threads << " thread(s), " << to_string(run.isa)
      << "; measured peak " << fixed(run.peak_gflops, 1) << " GFLOP/s, bandwidth " << fixed(run.bandwidth_gbps, 1)
      << " GB/s\n";
  auto line = [&](const std::string& what, const std::vector<double>& ratios) {
    int count = 0;
    std::vector<size_t> below;
    const double g = geomean(ratios, &count, &below);
    if (!count) return;
    out << what << ": geomean " << fixed(g, 3) << " over " << count << " problem(s), " << below.size()
        << " below 1.0" << (below.empty() ? "" : " (" + names_of(rows, below) + ")") << "\n";
  };
  if (run.onednn) {
    for (DataFormat f : layouts_seen(rows)) {
      line(std::string("user layout ") + to_string(f) + " (oneDNN's best on " + to_string(f) + " tensors / ours)",
           user_ratios(rows, f));
    }
    line("kernel race (oneDNN's fastest kernel / our fastest layout)", race_ratios(rows));
  }
  if (run.verify) out << "verify: " << run.verify_failures << " failure(s)\n";
}

}  // namespace deconvjit::bench
