// deconvjit bench DESC... | --suite FILE: cold compile time, execute time, GFLOP/s against this machine's
// measured peak, and (--vs onednn) oneDNN's deconvolution on the same problem in the same process, compared
// two ways (bench/results.hpp): on the user's layout, and kernel against kernel (the race).
#include <tbb/task_arena.h>
#include <unistd.h>

#include <cmath>
#include <sstream>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "bench/peak_probe.hpp"
#include "bench/pinning.hpp"
#include "bench/report.hpp"
#include "bench/results.hpp"
#include "bench/suite.hpp"
#include "bench/table.hpp"
#include "bench/timing.hpp"
#include "bench/typed_buffer.hpp"
#include "cli.hpp"
#include "runtime/tolerance.hpp"
#if DECONVJIT_HAVE_ONEDNN
#include "bench/onednn_deconv.hpp"
#endif

namespace deconvjit::cli {
namespace {

using bench::fixed;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct BenchArgs {
  std::vector<std::string> descs;
  std::string suite, isa = "best", layout, vs, filter, report, hints, dtypes;
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

// The operands of one problem in its dtype: 64-byte aligned, seeded, in the descriptor's layouts.
struct Buffers {
  bench::TypedBuffer src, weights, dst, other;
  Buffers(const Problem& p, uint64_t seed)
      : src(p.dtype, p.src_elements()), weights(p.dtype, p.weights_elements()), dst(p.dtype, p.dst_elements()),
        other(p.dtype, p.dst_elements()) {
    bench::fill_random(src, seed);
    bench::fill_random(weights, ~seed);
  }
};

// Our kernel for the problem in one layout, ready to time; `result` is where its figures go.
struct Prepared {
  Problem p;
  Kernel kernel;
  std::unique_ptr<Buffers> b;
  PackedWeights packed;
  bench::LayoutResult* result = nullptr;
  void run() const { kernel.execute(b->src.view(), packed, b->dst.view()); }
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
  b.dst.fill_nan();  // unwritten = fail
  kernel.execute(b.src.view(), packed, b.dst.view());
  std::vector<double> want(static_cast<size_t>(n)), mag(static_cast<size_t>(n));
  reference_with_bound(p, b.src.view(), b.weights.view(), want.data(), mag.data());
  const verify::Comparison c = verify::compare(p, b.dst.view(), want.data(), mag.data(), n);
  if (c.ok) return "ok";
  std::cerr << "warning: " << row << " (" << kernel.name() << "): " << c.failures << " of " << n
            << " elements outside tolerance (first at dst index " << c.first.front().index << ")\n";
  return "FAIL";
}

#if DECONVJIT_HAVE_ONEDNN
double relative_difference(const bench::TypedBuffer& got, const bench::TypedBuffer& want) {
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < static_cast<int64_t>(got.elements()); ++i) {
    const double d = std::fabs(got.at(i) - want.at(i));
    diff = std::isnan(d) || d > diff ? d : diff;
    scale = std::max(scale, std::fabs(want.at(i)));
  }
  return diff / std::max(scale, 1e-30);
}

// How far oneDNN may be from us, relative to max |dst|: loose, it only catches mapping bugs. Both results
// are rounded into the output type, so a 16-bit type allows a few of its ulps (bf16 has 8 significand bits).
double agreement(DType t) {
  if (t == DType::bf16) return 4 * std::ldexp(1.0, -8);
  if (t == DType::f16) return 4 * std::ldexp(1.0, -11);
  return 1e-3;
}

// Runs `r` once into a poisoned buffer and warns if oneDNN's answer differs from ours: with the reference
// already checked, that means this adapter described the problem to oneDNN wrongly.
bool cross_check(const std::string& row, bench::OnednnDeconv& dnnl, bench::OnednnRun r, const Prepared& ours) {
  ours.b->other.fill_nan();
  dnnl.run(r);
  dnnl.result_to_user(r);
  const double rel = relative_difference(ours.b->other, ours.b->dst);
  if (!(rel < agreement(ours.p.dtype))) {
    std::cerr << "warning: " << row << ": oneDNN (" << bench::to_string(r) << ") disagrees with deconvjit: max "
              << "|diff| / max |dst| = " << rel << " (a mapping bug in the oneDNN adapter?)\n";
    return false;
  }
  return true;
}

// oneDNN's runs of the problem, on `user`'s buffers (the first of our layouts), each with where its time
// goes. The plain and `any` kernels feed the race; `any` from each of our layouts the user-layout comparison.
void add_onednn(bench::ProblemResult& row, const Prepared& user, const std::vector<Prepared>& ours,
                std::unique_ptr<bench::OnednnDeconv>& dnnl, std::vector<std::function<void()>>& variants,
                std::vector<double*>& slots) {
  using bench::OnednnRun;
  dnnl = bench::OnednnDeconv::create(user.p, user.b->src.data(), user.b->weights.data(), user.b->other.data(),
                                     &row.onednn_note);
  if (!dnnl) {
    std::cerr << "note: " << row.name << ": oneDNN cannot run this problem: " << row.onednn_note << "\n";
    row.onednn_ncx_ms = row.onednn_nxc_ms = row.onednn_any_ms = kNaN;
    for (auto& l : row.layouts) l.onednn_any_reordered_ms = kNaN;
    return;
  }
  std::vector<std::pair<OnednnRun, double*>> runs{{OnednnRun::plain_ncx, &row.onednn_ncx_ms},
                                                  {OnednnRun::plain_nxc, &row.onednn_nxc_ms},
                                                  {OnednnRun::any_kernel, &row.onednn_any_ms}};
  for (const Prepared& o : ours) {
    const bool ncx = o.result->layout == DataFormat::NCX;
    runs.emplace_back(ncx ? OnednnRun::any_from_ncx : OnednnRun::any_from_nxc, &o.result->onednn_any_reordered_ms);
  }
  if (!row.onednn_note.empty()) std::cerr << "note: " << row.name << ": " << row.onednn_note << "\n";
  for (const auto& [r, slot] : runs) {
    if (!dnnl->has(r)) {  // a variant this oneDNN lacks for the type: "n/a", the note says why
      *slot = kNaN;
      continue;
    }
    row.onednn_agrees = cross_check(row.name, *dnnl, r, user) && row.onednn_agrees;
    variants.push_back([&d = *dnnl, r = r] { d.run(r); });
    slots.push_back(slot);
  }
  row.impl_ncx = dnnl->impl(OnednnRun::plain_ncx);
  row.impl_nxc = dnnl->impl(OnednnRun::plain_nxc);
  row.impl_any = dnnl->impl(OnednnRun::any_kernel);
  row.any_format = dnnl->any_src_format();
}
#endif

// Ours in each layout, then oneDNN's runs when asked for, timed in interleaved batches.
void time_problem(const Context& ctx, bench::ProblemResult& row, const std::vector<Prepared>& ours) {
  std::vector<std::function<void()>> variants;
  std::vector<double*> slots;
  for (const Prepared& o : ours) {
    o.run();  // the cross-check compares oneDNN with this result
    variants.push_back([&o] { o.run(); });
    slots.push_back(&o.result->ours_ms);
  }
#if DECONVJIT_HAVE_ONEDNN
  std::unique_ptr<bench::OnednnDeconv> dnnl;
  if (ctx.onednn) add_onednn(row, ours.front(), ours, dnnl, variants, slots);
#else
  (void)row;
#endif
  const size_t n_ours = ours.size();
  const bench::CallerUnpin unpin;
  const std::vector<double> ms = bench::interleaved_medians(variants, ctx.args.min_time, 5,
                                                            [n_ours](size_t v) { bench::pin_caller(v < n_ours); });
  for (size_t i = 0; i < ms.size(); ++i) *slots[i] = ms[i];
}

// Roofline: a row is memory-bound when it does fewer flops per byte than the machine's balance point.
void add_rates(const Context& ctx, const Problem& p, const bench::ProblemResult& row, bench::LayoutResult& l) {
  // (kernel names mark channel pairs with _icp: plan.cpp make_name)
  const bool pairs = l.kernel.find("_icp_") != std::string::npos;
  const double peak = bench::peak_gflops(ctx.peak, l.isa, ctx.threads, p.accumulation, pairs);
  const double bandwidth = bench::peak_bandwidth(ctx.peak, ctx.threads);
  l.gflops = row.gflop / (l.ours_ms * 1e-3);
  l.peak_pct = peak > 0 ? 100 * l.gflops / peak : -1;
  l.gbps = row.mbytes * 1e-3 / (l.ours_ms * 1e-3);
  l.bw_pct = bandwidth > 0 ? 100 * l.gbps / bandwidth : -1;
  l.memory_bound = bandwidth > 0 && row.gflop / (row.mbytes * 1e-3) < peak / bandwidth;
}

// Compiles (cold) and verifies our kernel for `d`; false (with `l.error`) when no kernel handles it.
bool prepare(const Context& ctx, const std::string& name, const Descriptor& d, bench::LayoutResult& l,
             Prepared& out) {
  out.p = resolve(d);
  try {
    out.kernel = cold_compile(d, ctx.options, &l.compile_ms);
  } catch (const Error& e) {
    if (e.kind() != Error::Kind::Unsupported) throw;
    l.error = e.what();
    return false;
  }
  l.kernel = out.kernel.name();
  l.isa = out.kernel.isa();
  out.b = std::make_unique<Buffers>(out.p, ctx.args.seed);
  out.packed = out.kernel.pack_weights(out.b->weights.view());
  out.result = &l;
  if (ctx.args.verify) l.verify = verify_kernel(name + " " + to_string(l.layout), out.p, out.kernel, out.packed, *out.b);
  return true;
}

std::vector<DataFormat> layouts_of(const BenchArgs& a, const Descriptor& d) {
  if (a.layout == "both") return {DataFormat::NCX, DataFormat::NXC};
  return {d.data_format};  // select_cases applied --layout ncx|nxc already
}

bench::ProblemResult bench_case(const Context& ctx, const bench::BenchCase& c) {
  bench::ProblemResult row;
  row.name = c.name;
  row.onednn = ctx.onednn;
  const Problem p = resolve(c.desc);
  row.gflop = p.flops() * 1e-9;
  row.mbytes = 1e-6 * static_cast<double>(dtype_size(p.dtype)) *
               static_cast<double>(p.src_elements() + p.weights_elements() + p.dst_elements());
  const std::vector<DataFormat> layouts = layouts_of(ctx.args, c.desc);
  row.layouts.resize(layouts.size());  // never resized again: Prepared points into it
  std::vector<Prepared> ours;
  for (size_t i = 0; i < layouts.size(); ++i) {
    row.layouts[i].layout = layouts[i];
    Prepared prepared;
    if (prepare(ctx, c.name, bench::with_data_format(c.desc, layouts[i]), row.layouts[i], prepared)) {
      ours.push_back(std::move(prepared));
    }
  }
  if (ours.empty()) return row;
  time_problem(ctx, row, ours);
  for (const Prepared& o : ours) add_rates(ctx, o.p, row, *o.result);
  bench::compare(row);
  return row;
}

// --dtype: "bf16", or a list such as "f32,bf16,f16" (each problem runs in each type, one after another).
std::vector<DType> dtypes_of(const BenchArgs& a) {
  std::vector<DType> out;
  std::stringstream in(a.dtypes);
  for (std::string t; std::getline(in, t, ',');) {
    if (t == "f32" || t == "bf16" || t == "f16")
      out.push_back(t == "f32" ? DType::f32 : t == "bf16" ? DType::bf16 : DType::f16);
    else
      throw Error(Error::Kind::InvalidArgument, "--dtype: unknown type '" + t + "' (f32, bf16 or f16)");
  }
  return out;
}

// Each case once per --dtype type, "@type" added to its name when there are several.
std::vector<bench::BenchCase> with_dtypes(std::vector<bench::BenchCase> cases, const std::vector<DType>& types) {
  if (types.empty()) return cases;
  std::vector<bench::BenchCase> out;
  for (const auto& c : cases)
    for (DType t : types) {
      bench::BenchCase x = c;
      x.desc.dtype = x.desc.weights_dtype = t;
      if (types.size() > 1) x.name += std::string("@") + to_string(t);
      out.push_back(std::move(x));
    }
  return out;
}

// With f32 among several --dtype types: our fastest layout in f32 over the same in each other type, per
// problem (neighbours in time), and the geomean.
void print_dtype_ratios(std::ostream& os, const std::vector<DType>& types, const std::vector<bench::ProblemResult>& rows,
                        bool json) {
  if (types.size() < 2 || types.front() != DType::f32) return;
  for (size_t k = 1; k < types.size(); ++k) {
    double log_sum = 0;
    int n = 0;
    std::vector<std::string> below;
    for (size_t i = 0; i + types.size() <= rows.size(); i += types.size()) {
      const bench::LayoutResult *f = rows[i].fastest(), *t = rows[i + k].fastest();
      if (!f || !t) continue;
      const double r = f->ours_ms / t->ours_ms;
      log_sum += std::log(r), ++n;
      if (r < 1.0) below.push_back(rows[i].name.substr(0, rows[i].name.rfind('@')) + " " + bench::fixed(r, 2));
    }
    const double geo = n ? std::exp(log_sum / n) : 0;
    if (json) {
      nlohmann::ordered_json j;
      j["dtype_speed_vs_f32"] = to_string(types[k]);
      j["geomean"] = geo;
      j["problems"] = n;
      j["below_1"] = below;
      os << j.dump() << std::endl;
      continue;
    }
    os << to_string(types[k]) << " vs f32 (our fastest layout in f32 / in " << to_string(types[k])
       << "): geomean " << bench::fixed(geo, 3) << " over " << n << " problem(s), " << below.size() << " below 1.0";
    for (size_t i = 0; i < below.size(); ++i) os << (i ? ", " : " (") << below[i] << (i + 1 == below.size() ? ")" : "");
    os << "\n";
  }
}

std::vector<bench::BenchCase> select_cases(const BenchArgs& a) {
  if (a.descs.empty() && a.suite.empty()) {
    throw Error(Error::Kind::InvalidArgument, "bench needs a DESC or --suite FILE");
  }
  std::vector<bench::BenchCase> cases =
      with_dtypes(bench::filter_cases(bench::load_cases(a.descs, a.suite), a.filter), dtypes_of(a));
  std::vector<bench::BenchCase> kept;
  for (auto& c : cases) {
    if (a.layout == "ncx" || a.layout == "nxc") {
      c.desc = bench::with_data_format(c.desc, a.layout == "nxc" ? DataFormat::NXC : DataFormat::NCX);
    }
    try {
      // Every problem is judged (and its memory counted, with verify's reference) before any is timed.
      for (DataFormat f : layouts_of(a, c.desc))
        require_tensor_memory(resolve(bench::with_data_format(c.desc, f)), "bench", 2 * sizeof(double));
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

// Judged before anything is timed: a report that cannot be written would waste the whole run.
void check_report_path(const std::string& path) {
  if (path.empty()) return;
  bench::report_kind(path);
  const std::filesystem::path dir = std::filesystem::absolute(path).parent_path();
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    throw Error(Error::Kind::InvalidArgument, "--report '" + path + "': directory '" + dir.string() + "' does not exist");
  }
}

void write_report(const std::string& path, const bench::RunInfo& run, const std::vector<bench::ProblemResult>& rows) {
  const std::string text = bench::report_kind(path) == bench::ReportKind::Svg ? bench::report_svg(run, rows)
                                                                               : bench::report_html(run, rows);
  write_file_atomically(path, text.data(), text.size());
}

int bench_all(const BenchArgs& a) {
  check_report_path(a.report);
  const std::vector<bench::BenchCase> cases = select_cases(a);
  Context ctx{a, {}, {}, false, {}, 1};
  const Isa requested = isa_from_string(a.isa);
  ctx.options.max_isa = resolve_isa(requested);
  ctx.options.hints = load_hints(a.hints);
  ctx.options.use_cache = false;  // every compile is cold: neither cache serves it, none is written
  ctx.options.use_disk_cache = false;
  ctx.onednn = setup_onednn(a, requested, ctx.options.max_isa, &ctx.onednn_version);
  // A short probe when the user asked for quick timings (tests); 0.1 s per figure otherwise.
  ctx.peak = bench::machine_peak(std::clamp(a.min_time, 0.02, 0.1));

  warn_if_busy();
  std::vector<bench::ProblemResult> rows;
  bench::RunInfo run;
  run.isa = ctx.options.max_isa;
  run.onednn = ctx.onednn;
  run.onednn_version = ctx.onednn_version;
  run.verify = a.verify;
  const bool progress = !a.json && ::isatty(2);
  run_timed(a.threads, [&] {
    ctx.threads = tbb::this_task_arena::max_concurrency();
    for (const auto& c : cases) {
      if (progress) std::cerr << "\r\033[K[" << rows.size() + 1 << "/" << cases.size() << "] " << c.name << std::flush;
      rows.push_back(bench_case(ctx, c));
      for (const auto& l : rows.back().layouts) {
        run.verify_failures += l.verify == "FAIL";
        run.unsupported += !l.error.empty();
      }
      if (a.json) {
        for (const auto& j : bench::problem_json(rows.back())) std::cout << j.dump() << std::endl;
      }
    }
  });
  if (progress) std::cerr << "\r\033[K" << std::flush;
  run.threads = ctx.threads;
  run.peak_gflops = bench::peak_gflops(ctx.peak, run.isa, ctx.threads);
  run.bandwidth_gbps = bench::peak_bandwidth(ctx.peak, ctx.threads);
  if (a.json) {
    std::cout << bench::summary_json(run, rows).dump() << std::endl;
  } else {
    bench::print_table(std::cout, run, rows);
    bench::print_summary(std::cout, run, rows);
  }
  print_dtype_ratios(std::cout, dtypes_of(a), rows, a.json);
  if (!a.report.empty()) write_report(a.report, run, rows);
  if (run.verify_failures) return kMismatch;
  return run.unsupported ? kUnsupported : kOk;
}

Action setup_bench(CLI::App& app) {
  auto* sub = app.add_subcommand("bench", "Time compile and execute (GFLOP/s, % of measured peak), optionally vs oneDNN");
  auto a = std::make_shared<BenchArgs>();
  sub->add_option("DESC", a->descs, "problem descriptors: JSON objects, or @path to files holding one");
  sub->add_option("--suite", a->suite, "JSON Lines file, one descriptor per line (with \"name\")");
  sub->add_option("--threads", a->threads, "threads (0 = all hardware threads)")->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  add_isa_option(*sub, a->isa);
  add_hints_option(*sub, a->hints);
  sub->add_option("--layout", a->layout,
                  "re-express every problem's data in this layout (weights unchanged); both: time our NCX and NXC "
                  "kernels, the kernel race takes the faster")
      ->check(CLI::IsMember({"ncx", "nxc", "both"}));
  sub->add_option("--dtype", a->dtypes,
                  "re-express every problem in this element type (f32, bf16, f16), or in each of a list such as "
                  "f32,bf16,f16: then each type's speed against f32 is summarised");
  sub->add_option("--min-time", a->min_time, "seconds of timed runs per problem and variant (at least 5 runs)")
      ->capture_default_str()->check(CLI::Range(0.0, 3600.0));
  sub->add_option("--vs", a->vs, "also time this library on the same problems")->check(CLI::IsMember({"onednn"}));
  sub->add_option("--report", a->report,
                  "also draw the run: FILE.svg (bars per problem, roofline) or FILE.html (the SVG and the table)");
  sub->add_flag("--json", a->json, "one JSON object per problem and layout, then a summary object");
  sub->add_flag("--verify", a->verify, "check each kernel once against the reference first (exit 1 on FAIL)");
  sub->add_option("--filter", a->filter, "only problems whose name matches this regex");
  sub->add_option("--seed", a->seed, "seed of the random operands")->capture_default_str();
  return [a] { return bench_all(*a); };
}

}  // namespace
}  // namespace deconvjit::cli

DECONVJIT_COMMAND(bench, deconvjit::cli::setup_bench);
