// deconvjit peak: this machine's measured FMA throughput and memory bandwidth, the yardsticks of `bench`.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "bench/peak_probe.hpp"
#include "bench/table.hpp"
#include "cli.hpp"

namespace deconvjit::cli {
namespace {

struct PeakArgs {
  bool json = false;
  double min_time = 0.25;
};

void print_json(const bench::PeakNumbers& p) { std::cout << bench::peak_json(p) << std::endl; }

void print_table(const bench::PeakNumbers& p) {
  using bench::fixed;
  bench::Table t;
  t.add_column("measure", bench::Table::Align::Left);
  t.add_column("unit", bench::Table::Align::Left);
  t.add_column("1 thread");
  t.add_column(std::to_string(p.threads) + " threads");
  const double absent = -1;  // printed as "-"
  t.add_row({"fma zmm (avx512)", "GFLOP/s", fixed(p.has_avx512 ? p.zmm_1t : absent, 1),
             fixed(p.has_avx512 ? p.zmm_nt : absent, 1)});
  t.add_row({"fma ymm (avx2)", "GFLOP/s", fixed(p.ymm_1t, 1), fixed(p.ymm_nt, 1)});
  t.add_row({"triad (stream)", "GB/s", fixed(p.bw_1t, 1), fixed(p.bw_nt, 1)});
  t.print(std::cout);
  std::cout << "measured in " << fixed(p.seconds, 2) << " s\n";
}

Action setup_peak(CLI::App& app) {
  auto* sub = app.add_subcommand("peak", "Measure this machine's FMA peak (GFLOP/s) and memory bandwidth (GB/s)");
  auto a = std::make_shared<PeakArgs>();
  sub->add_flag("--json", a->json, "print one JSON object instead of a table");
  sub->add_option("--min-time", a->min_time, "seconds spent on each of the six measurements")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 60.0));
  return [a] {
    const bench::PeakNumbers& p = bench::machine_peak(a->min_time);
    if (a->json) {
      print_json(p);
    } else {
      print_table(p);
    }
    return kOk;
  };
}

}  // namespace
}  // namespace deconvjit::cli

DECONVJIT_COMMAND(peak, deconvjit::cli::setup_peak);
