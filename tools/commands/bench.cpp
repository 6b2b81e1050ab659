// deconvjit bench DESC... | --suite FILE: cold compile time, execute time, GFLOP/s against this machine's
// measured peak, and (--vs onednn) oneDNN's deconvolution on the same problem in the same process.
#include <tbb/task_arena.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "bench/peak_probe.hpp"
#include "bench/suite.hpp"
#include "bench/table.hpp"
#include "bench/timing.hpp"
#include "cli.hpp"
#include "runtime/tolerance.hpp"
#if DECONVJIT_HAVE_ONEDNN
#include "bench/onednn_deconv.hpp"
#endif

namespace deconvjit::cli {
namespace {

using bench::fixed;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kAgreement = 1e-3;  // oneDNN vs us: max |diff| / max |dst|; loose, it only catches mapping bugs

struct BenchArgs {
  std::vector<std::string> descs;
  std::string suite, isa = "best", layout, vs, filter;
  int threads = 0;
  double min_time = 0.2;
  bool json = false, verify = false;
  uint64_t seed = 1;
};

struct Context {
  const BenchArgs& args;
  Options options;
  bench::PeakNumbers peak;
  bool onednn = false;
  std::string onednn_version;
  int threads = 1;  // the arena's, known once inside it
};

// Times in ms. Negative means "not measured" (printed "-"), NaN "not possible" (printed "n/a").
struct Row {
  std::string name, kernel, layout, error, verify, onednn_note, impl_a, impl_b;
  Isa isa = Isa::best;
  double gflop = 0, mbytes = 0;
  double compile_ms = -1, ours_ms = -1, gflops = -1, peak_pct = -1, gbps = -1, bw_pct = -1;
  bool memory_bound = false;
  double onednn_a_ms = -1, onednn_b_ms = -1, ratio = -1;
  bool onednn_agrees = true;  // oneDNN's output matched ours (checked once, when oneDNN ran)
};

// The operands of one problem: 64-byte aligned, seeded, in the descriptor's layouts.
struct Buffers {
  bench::AlignedFloats src, weights, dst, other;
  Buffers(const Problem& p, uint64_t seed)
      : src(bench::aligned_floats(p.src_elements())), weights(bench::aligned_floats(p.weights_elements())),
        dst(bench::aligned_floats(p.dst_elements())), other(bench::aligned_floats(p.dst_elements())) {
    bench::fill_random(src.get(), p.src_elements(), seed);
    bench::fill_random(weights.get(), p.weights_elements(), ~seed);
  }
};

// Wall time of compile() with the cache off, median of three: what a first use of a problem costs.
Kernel cold_compile(const Descriptor& d, const Options& options, double* median_ms) {
  Kernel kernel;
  std::vector<double> ms;
  for (int i = 0; i < 3; ++i) {
    const double t0 = bench::now_s();
    kernel = compile(d, options);
    ms.push_back((bench::now_s() - t0) * 1e3);
  }
  *median_ms = bench::median(ms);
  return kernel;
}

// One run against the double-precision oracle with the tolerance `deconvjit check` uses.
std::string verify_kernel(const std::string& row, const Problem& p, const Kernel& kernel,
                          const PackedWeights& packed, Buffers& b) {
  const int64_t n = p.dst_elements();
  std::fill(b.dst.get(), b.dst.get() + n, std::numeric_limits<float>::quiet_NaN());  // unwritten = fail
  kernel.execute(b.src.get(), packed, b.dst.get());
  std::vector<double> want(static_cast<size_t>(n)), mag(static_cast<size_t>(n));
  reference_with_bound(p, b.src.get(), b.weights.get(), want.data(), mag.data());
  const verify::Comparison c = verify::compare(p, b.dst.get(), want.data(), mag.data(), n);
  if (c.ok) return "ok";
  std::cerr << "warning: " << row << " (" << kernel.name() << "): " << c.failures << " of " << n
            << " elements outside tolerance (first at dst index " << c.first.front().index << ")\n";
  return "FAIL";
}

#if DECONVJIT_HAVE_ONEDNN
double relative_difference(const float* got, const float* want, int64_t n) {
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = std::fabs(static_cast<double>(got[i]) - want[i]);
    diff = std::isnan(d) || d > diff ? d : diff;
    scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
  }
  return diff / std::max(scale, 1e-30);
}

// Runs `run` once into a poisoned buffer and warns if oneDNN's answer differs from ours: with the
// reference already checked, that means this adapter described the problem to oneDNN wrongly.
bool cross_check(const std::string& row, const char* variant, const std::function<void()>& run,
                 const Problem& p, Buffers& b) {
  std::fill(b.other.get(), b.other.get() + p.dst_elements(), std::numeric_limits<float>::quiet_NaN());
  run();
  const double rel = relative_difference(b.other.get(), b.dst.get(), p.dst_elements());
  if (!(rel < kAgreement)) {
    std::cerr << "warning: " << row << ": oneDNN (" << variant << ") disagrees with deconvjit: max |diff| / "
              << "max |dst| = " << rel << " (a mapping bug in the oneDNN adapter?)\n";
    return false;
  }
  return true;
}
#endif

// Ours, then oneDNN's variants when possible, timed in interleaved batches.
void time_row(const Context& ctx, const Problem& p, const Kernel& kernel, const PackedWeights& packed,
              Buffers& b, Row& row) {
  std::vector<std::function<void()>> variants{[&] { kernel.execute(b.src.get(), packed, b.dst.get()); }};
  variants[0]();  // the cross-check below compares with this result
#if !DECONVJIT_HAVE_ONEDNN
  (void)p;
#else
  std::unique_ptr<bench::OnednnDeconv> dnnl;
  if (ctx.onednn) {
    dnnl = bench::OnednnDeconv::create(p, b.src.get(), b.weights.get(), b.other.get(), &row.onednn_note);
    if (dnnl) {
      variants.push_back([&] { dnnl->run_user_layout(); });
      variants.push_back([&] { dnnl->run_any_layout(); });
      row.onednn_agrees = cross_check(row.name, "a", variants[1], p, b);
      row.onednn_agrees = cross_check(row.name, "b", variants[2], p, b) && row.onednn_agrees;
      row.impl_a = dnnl->impl_user_layout();
      row.impl_b = dnnl->impl_any_layout();
    } else {
      std::cerr << "note: " << row.name << ": oneDNN cannot run this problem: " << row.onednn_note << "\n";
      row.onednn_a_ms = row.onednn_b_ms = row.ratio = kNaN;
    }
  }
#endif
  const std::vector<double> ms = bench::interleaved_medians(variants, ctx.args.min_time);
  row.ours_ms = ms[0];
  if (ms.size() == 3) {
    row.onednn_a_ms = ms[1];
    row.onednn_b_ms = ms[2];
    row.ratio = std::min(ms[1], ms[2]) / ms[0];
  }
}

// Roofline: a row is memory-bound when it does fewer flops per byte than the machine's balance point.
void add_rates(const Context& ctx, Row& row) {
  const double peak = bench::peak_gflops(ctx.peak, row.isa, ctx.threads);
  const double bandwidth = bench::peak_bandwidth(ctx.peak, ctx.threads);
  row.gflops = row.gflop / (row.ours_ms * 1e-3);
  row.peak_pct = peak > 0 ? 100 * row.gflops / peak : -1;
  row.gbps = row.mbytes * 1e-3 / (row.ours_ms * 1e-3);
  row.bw_pct = bandwidth > 0 ? 100 * row.gbps / bandwidth : -1;
  row.memory_bound = bandwidth > 0 && row.gflop / (row.mbytes * 1e-3) < peak / bandwidth;
}

Row bench_case(const Context& ctx, const bench::BenchCase& c) {
  const Problem p = resolve(c.desc);
  Row row;
  row.name = c.name;
  row.layout = to_string(p.data_format);
  row.gflop = p.flops() * 1e-9;
  row.mbytes = 4e-6 * static_cast<double>(p.src_elements() + p.weights_elements() + p.dst_elements());
  Kernel kernel;
  try {
    kernel = cold_compile(c.desc, ctx.options, &row.compile_ms);
  } catch (const Error& e) {
    if (e.kind() != Error::Kind::Unsupported) throw;
    row.error = e.what();
    return row;
  }
  row.kernel = kernel.name();
  row.isa = kernel.isa();
  Buffers b(p, ctx.args.seed);
  const PackedWeights packed = kernel.pack_weights(b.weights.get());
  if (ctx.args.verify) row.verify = verify_kernel(row.name, p, kernel, packed, b);
  time_row(ctx, p, kernel, packed, b, row);
  add_rates(ctx, row);
  return row;
}

nlohmann::ordered_json number(double v) {
  if (v < 0 || std::isnan(v)) return nullptr;
  return v;
}

nlohmann::ordered_json row_json(const Row& r) {
  nlohmann::ordered_json j;
  j["name"] = r.name;
  if (!r.error.empty()) {
    j["error"] = r.error;
    return j;
  }
  j["kernel"] = r.kernel;
  j["isa"] = to_string(r.isa);
  j["layout"] = r.layout;
  j["gflop"] = r.gflop;
  j["mbytes"] = r.mbytes;
  j["compile_ms"] = r.compile_ms;
  j["ours_ms"] = r.ours_ms;
  j["gflops"] = r.gflops;
  j["peak_pct"] = number(r.peak_pct);
  j["bound"] = r.memory_bound ? "memory" : "compute";
  j["gbps"] = r.gbps;
  j["bw_pct"] = number(r.bw_pct);
  if (!r.verify.empty()) j["verify"] = r.verify;
  if (r.onednn_a_ms >= 0 || std::isnan(r.onednn_a_ms)) {
    j["onednn_a_ms"] = number(r.onednn_a_ms);
    j["onednn_b_ms"] = number(r.onednn_b_ms);
    j["ratio"] = number(r.ratio);
    if (!r.impl_a.empty()) {
      j["onednn_agrees"] = r.onednn_agrees;
      j["onednn_impl_a"] = r.impl_a;
      j["onednn_impl_b"] = r.impl_b;
    }
    if (!r.onednn_note.empty()) j["onednn_note"] = r.onednn_note;
  }
  return j;
}

bench::Table make_table(const Context& ctx) {
  bench::Table t;
  t.add_column("name", bench::Table::Align::Left);
  t.add_column("kernel", bench::Table::Align::Left);
  for (const char* c : {"compile_ms", "ours_ms", "GFLOP/s", "%peak", "GB/s", "%bw"}) t.add_column(c);
  if (ctx.onednn) {
    for (const char* c : {"onednn_a_ms", "onednn_b_ms", "ratio"}) t.add_column(c);
  }
  if (ctx.args.verify) t.add_column("verify", bench::Table::Align::Left);
  return t;
}

void add_table_row(const Context& ctx, bench::Table& t, const Row& r) {
  if (!r.error.empty()) {
    t.add_row({r.name, "unsupported: " + r.error});
    return;
  }
  // Bandwidth figures only where bandwidth is the limit; elsewhere they would invite a wrong reading.
  std::vector<std::string> cells{r.name, r.kernel, fixed(r.compile_ms, 2), fixed(r.ours_ms, 3),
                                 fixed(r.gflops, 1), fixed(r.peak_pct, 1),
                                 r.memory_bound ? fixed(r.gbps, 1) : "-", r.memory_bound ? fixed(r.bw_pct, 1) : "-"};
  if (ctx.onednn) {
    for (double v : {r.onednn_a_ms, r.onednn_b_ms}) cells.push_back(fixed(v, 3));
    cells.push_back(fixed(r.ratio, 2));
  }
  if (ctx.args.verify) cells.push_back(r.verify);
  t.add_row(std::move(cells));
}

double geomean_ratio(const std::vector<Row>& rows, int* count) {
  double log_sum = 0;
  *count = 0;
  for (const Row& r : rows) {
    if (r.ratio > 0 && std::isfinite(r.ratio)) {
      log_sum += std::log(r.ratio);
      ++*count;
    }
  }
  return *count ? std::exp(log_sum / *count) : kNaN;
}

void print_summary(const Context& ctx, const std::vector<Row>& rows, int verify_failures, int unsupported) {
  int compared = 0;
  const double geomean = geomean_ratio(rows, &compared);
  const Isa isa = ctx.options.max_isa;
  const double peak = bench::peak_gflops(ctx.peak, isa, ctx.threads);
  const double bandwidth = bench::peak_bandwidth(ctx.peak, ctx.threads);
  if (ctx.args.json) {
    nlohmann::ordered_json j;
    j["summary"] = true;
    j["rows"] = rows.size();
    j["threads"] = ctx.threads;
    j["isa"] = to_string(isa);
    j["peak_gflops"] = peak;
    j["bandwidth_gbps"] = bandwidth;
    j["geomean_ratio"] = compared ? nlohmann::ordered_json(geomean) : nlohmann::ordered_json(nullptr);
    j["verify_failures"] = verify_failures;
    j["unsupported"] = unsupported;
    j["onednn"] = ctx.onednn ? nlohmann::ordered_json(ctx.onednn_version) : nlohmann::ordered_json(nullptr);
    std::cout << j.dump() << std::endl;
    return;
  }
  std::cout << rows.size() << " problem(s), " << ctx.threads << " thread(s), " << to_string(isa)
            << "; measured peak " << fixed(peak, 1) << " GFLOP/s, bandwidth " << fixed(bandwidth, 1) << " GB/s\n";
  if (compared) {
    std::cout << "geomean ratio oneDNN_best/ours over " << compared << " problem(s): " << fixed(geomean, 3)
              << " (>1: deconvjit faster)\n";
  }
  if (ctx.args.verify) std::cout << "verify: " << verify_failures << " failure(s)\n";
}

std::vector<bench::BenchCase> select_cases(const BenchArgs& a) {
  if (a.descs.empty() && a.suite.empty()) {
    throw Error(Error::Kind::InvalidArgument, "bench needs a DESC or --suite FILE");
  }
  std::vector<bench::BenchCase> cases = bench::load_cases(a.descs, a.suite);
  std::regex filter;
  try {
    filter = std::regex(a.filter);
  } catch (const std::regex_error& e) {
    throw Error(Error::Kind::InvalidArgument, "--filter '" + a.filter + "' is not a valid regex: " + e.what());
  }
  std::vector<bench::BenchCase> kept;
  for (auto& c : cases) {
    if (!std::regex_search(c.name, filter)) continue;
    if (!a.layout.empty()) {
      c.desc = bench::with_data_format(c.desc, a.layout == "nxc" ? DataFormat::NXC : DataFormat::NCX);
    }
    try {
      // Every problem is judged (and its memory counted, with verify's reference) before any is timed.
      require_tensor_memory(resolve(c.desc), "bench", 2 * sizeof(double));
    } catch (const Error& e) {
      const std::string where = c.name == c.origin ? c.origin : c.origin + " (" + c.name + ")";
      throw Error(e.kind(), where + ": " + e.what());
    }
    kept.push_back(std::move(c));
  }
  if (kept.empty()) throw Error(Error::Kind::InvalidArgument, "no problem matches --filter '" + a.filter + "'");
  return kept;
}

// oneDNN's ISA and thread count are process-wide and must be set before its first primitive.
bool setup_onednn(const BenchArgs& a, Isa requested, Isa resolved, std::string* version) {
  if (a.vs.empty()) return false;
#if DECONVJIT_HAVE_ONEDNN
  const Isa cap = requested != Isa::best ? requested : resolved == Isa::avx2 ? Isa::avx2 : Isa::best;
  bench::onednn_configure(cap, a.threads);
  *version = bench::onednn_version();
  if (!a.json) std::cout << "oneDNN " << *version << "\n";
  return true;
#else
  (void)version;
  (void)requested, (void)resolved;
  std::cerr << "warning: this deconvjit was built without oneDNN (libdnnl-dev, -DDECONVJIT_WITH_ONEDNN=ON); "
               "--vs onednn ignored\n";
  return false;
#endif
}

// Other processes on the cores skew every figure, OpenMP's spinning barriers in oneDNN most of all.
void warn_if_busy() {
  double load = 0;
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  if (::getloadavg(&load, 1) == 1 && load > 0.5 * hw) {
    std::cerr << "warning: load average " << fixed(load, 2) << " on " << hw
              << " hardware threads: other processes are running, timings will be noisy\n";
  }
}

int bench_all(const BenchArgs& a) {
  const std::vector<bench::BenchCase> cases = select_cases(a);
  Context ctx{a, {}, {}, false, {}, 1};
  const Isa requested = isa_from_string(a.isa);
  ctx.options.max_isa = resolve_isa(requested);
  ctx.options.use_cache = false;  // every compile is cold: neither cache serves it, none is written
  ctx.options.use_disk_cache = false;
  ctx.onednn = setup_onednn(a, requested, ctx.options.max_isa, &ctx.onednn_version);
  // A short probe when the user asked for quick timings (tests); 0.1 s per figure otherwise.
  ctx.peak = bench::machine_peak(std::clamp(a.min_time, 0.02, 0.1));

  warn_if_busy();
  std::vector<Row> rows;
  int verify_failures = 0, unsupported = 0;
  const bool progress = !a.json && ::isatty(2);
  run_with_threads(a.threads, [&] {
    ctx.threads = tbb::this_task_arena::max_concurrency();
    for (const auto& c : cases) {
      if (progress) std::cerr << "\r\033[K[" << rows.size() + 1 << "/" << cases.size() << "] " << c.name << std::flush;
      rows.push_back(bench_case(ctx, c));
      verify_failures += rows.back().verify == "FAIL";
      unsupported += !rows.back().error.empty();
      if (a.json) std::cout << row_json(rows.back()).dump() << std::endl;
    }
  });
  if (progress) std::cerr << "\r\033[K" << std::flush;
  if (!a.json) {
    bench::Table t = make_table(ctx);
    for (const Row& r : rows) add_table_row(ctx, t, r);
    t.print(std::cout);
  }
  print_summary(ctx, rows, verify_failures, unsupported);
  if (verify_failures) return kMismatch;
  return unsupported ? kUnsupported : kOk;
}

Action setup_bench(CLI::App& app) {
  auto* sub = app.add_subcommand("bench", "Time compile and execute (GFLOP/s, % of measured peak), optionally vs oneDNN");
  auto a = std::make_shared<BenchArgs>();
  sub->add_option("DESC", a->descs, "problem descriptors: JSON objects, or @path to files holding one");
  sub->add_option("--suite", a->suite, "JSON Lines file, one descriptor per line (with \"name\")");
  sub->add_option("--threads", a->threads, "threads (0 = all hardware threads)")->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  add_isa_option(*sub, a->isa);
  sub->add_option("--layout", a->layout, "re-express every problem's data in this layout (weights unchanged)")
      ->check(CLI::IsMember({"ncx", "nxc"}));
  sub->add_option("--min-time", a->min_time, "seconds of timed runs per problem and variant (at least 5 runs)")
      ->capture_default_str()->check(CLI::Range(0.0, 3600.0));
  sub->add_option("--vs", a->vs, "also time this library on the same problems")->check(CLI::IsMember({"onednn"}));
  sub->add_flag("--json", a->json, "one JSON object per problem, then a summary object");
  sub->add_flag("--verify", a->verify, "check each kernel once against the reference first (exit 1 on FAIL)");
  sub->add_option("--filter", a->filter, "only problems whose name matches this regex");
  sub->add_option("--seed", a->seed, "seed of the random operands")->capture_default_str();
  return [a] { return bench_all(*a); };
}

}  // namespace
}  // namespace deconvjit::cli

DECONVJIT_COMMAND(bench, deconvjit::cli::setup_bench);
