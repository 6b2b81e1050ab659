// deconvjit peak: this machine's measured FMA throughput (f32, and the 16-bit types' arithmetic where the CPU
// has it) and memory bandwidth, the yardsticks of `bench`.
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

// A row for an instruction the CPU may lack: its figures, or a plain statement that it cannot be measured.
void add_optional_row(bench::Table& t, const std::string& what, bool available, double one, double all) {
  if (available) {
    t.add_row({what, "GFLOP/s", bench::fixed(one, 1), bench::fixed(all, 1)});
  } else {
    t.add_row({what, "GFLOP/s", "not available on this CPU", ""});
  }
}

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
  add_optional_row(t, "f16 fma zmm (avx512_fp16)", p.has_avx512_fp16, p.f16_fma_1t, p.f16_fma_nt);
  add_optional_row(t, "bf16 dot zmm (avx512_bf16)", p.has_avx512_bf16, p.bf16_dot_1t, p.bf16_dot_nt);
  t.add_row({"fma ymm (avx2)", "GFLOP/s", fixed(p.ymm_1t, 1), fixed(p.ymm_nt, 1)});
  t.add_row({"triad (stream)", "GB/s", fixed(p.bw_1t, 1), fixed(p.bw_nt, 1)});
  t.print(std::cout);
  std::cout << "measured in " << fixed(p.seconds, 2) << " s\n";
}

Action setup_peak(CLI::App& app) {
  auto* sub = app.add_subcommand("peak", "Measure this machine's FMA peak (GFLOP/s; f16 FMA and bf16 dot product where the CPU has them) and memory bandwidth (GB/s)");
  auto a = std::make_shared<PeakArgs>();
  sub->add_flag("--json", a->json, "print one JSON object instead of a table");
  sub->add_option("--min-time", a->min_time, "seconds spent on each measurement (6, up to 10 with the f16 and bf16 ones)")
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
