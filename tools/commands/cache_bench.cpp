// deconvjit cache bench INPUT...: for every distinct descriptor, the time compile() takes when it runs the
// JIT against the time it takes to load the same kernel from the disk cache, and the first-call latency
// (compile + pack + first execute) from a cold cache against a warm one.
#include <tbb/parallel_for.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <set>
#include <tuple>
#include <unistd.h>

#include "bench/typed_buffer.hpp"
#include "commands/cache_bench.hpp"
#include "import/inputs.hpp"

namespace deconvjit::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct BenchArgs {
  std::vector<std::string> inputs;
  std::string cache;
  int reps = 7;
  std::string pass;  // internal: run one fresh-process pass ("jit" or "disk") and print its totals
};

struct Row {
  std::string name;
  size_t code_bytes = 0;
  double compile_ms = 0, load_ms = 0, first_cold_ms = 0, first_warm_ms = 0;
};

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double median(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

double time_ms(const std::function<void()>& body) {
  const auto t0 = Clock::now();
  body();
  return ms_since(t0);
}

// Medians of `reps` timings of each body, taken in alternation so that load from other processes on
// the machine, which drifts, weighs on both alike.
std::pair<double, double> paired_medians_ms(int reps, const std::function<void()>& a,
                                            const std::function<void()>& b) {
  std::vector<double> ta, tb;
  for (int i = 0; i < reps; ++i) {
    ta.push_back(time_ms(a));
    tb.push_back(time_ms(b));
  }
  return {median(ta), median(tb)};
}

// Operands in the problem's dtype. Constant values: only the time matters here.
struct Operands {
  bench::TypedBuffer src, weights, dst;
  explicit Operands(const Problem& p)
      : src(p.dtype, p.src_elements()), weights(p.dtype, p.weights_elements()), dst(p.dtype, p.dst_elements()) {
    for (size_t i = 0; i < src.elements(); ++i) src.set(static_cast<int64_t>(i), 0.5);
    for (size_t i = 0; i < weights.elements(); ++i) weights.set(static_cast<int64_t>(i), 0.25);
  }
};

// compile + pack + one execute: what the first inference of a layer waits for.
double first_call_ms(const Descriptor& d, const Options& o, Operands& ops) {
  const auto t0 = Clock::now();
  const Kernel k = compile(d, o);
  k.execute(ops.src.view(), k.pack_weights(ops.weights.view()), ops.dst.view());
  return ms_since(t0);
}

Row measure(const Descriptor& d, const std::string& dir, int reps) {
  Options jit, disk;
  jit.use_cache = disk.use_cache = false;
  jit.use_disk_cache = false;
  disk.cache_dir = dir;
  Operands ops(resolve(d));
  Row r;
  r.name = d.name.empty() ? canonical_json(d) : d.name;
  const DiskCacheLookup before = disk_cache_lookup(d, disk);
  // Cold means: no entry yet, so this call compiles and stores (an existing entry would make it warm).
  r.first_cold_ms = before.usable ? NAN : first_call_ms(d, disk, ops);
  r.first_warm_ms = first_call_ms(d, disk, ops);
  r.code_bytes = compile(d, jit).code_size();
  // A rejected entry would be compiled and rewritten on every call, and timed as a "load".
  if (compile(d, disk).compile_ms() != 0)
    throw Error(Error::Kind::Internal, r.name + ": the warmed entry was not loaded: " +
                                           disk_cache_lookup(d, disk).reason);
  // Both timings include destroying the kernel (unmapping its code), as both paths pay it.
  std::tie(r.compile_ms, r.load_ms) =
      paired_medians_ms(reps, [&] { compile(d, jit); }, [&] { compile(d, disk); });
  return r;
}

// One pass over the suite as a freshly started program sees it: nothing of the JIT or the loader is in
// the CPU caches or even paged in yet. Prints "compile_ms first_call_ms" summed over all kernels.
int run_pass(const std::vector<Descriptor>& ds, const std::string& dir, const std::string& pass) {
  Options o;
  o.use_cache = false;
  if (pass == "jit") o.use_disk_cache = false;
  o.cache_dir = dir;
  double compile_total = 0, first_total = 0;
  for (const Descriptor& d : ds) {
    Operands ops(resolve(d));
    const auto t0 = Clock::now();
    const Kernel k = compile(d, o);
    compile_total += ms_since(t0);
    k.execute(ops.src.view(), k.pack_weights(ops.weights.view()), ops.dst.view());
    first_total += ms_since(t0);
  }
  std::printf("%.3f %.3f\n", compile_total, first_total);
  return kOk;
}

std::string quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs this program again for one pass, so each pass starts as cold as a real first run.
std::pair<double, double> fresh_process_pass(const BenchArgs& a, const std::string& dir, const char* pass) {
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) throw Error(Error::Kind::Internal, "cannot find this program's path");
  self[n] = '\0';
  std::string cmd = quoted(self) + " cache bench --pass " + pass + " --cache " + quoted(dir);
  for (const std::string& in : a.inputs) cmd += " " + quoted(in);
  FILE* f = ::popen(cmd.c_str(), "r");
  double compile_ms = NAN, first_ms = NAN;
  if (!f || std::fscanf(f, "%lf %lf", &compile_ms, &first_ms) != 2)
    throw Error(Error::Kind::Internal, "the fresh-process pass '" + std::string(pass) + "' failed");
  ::pclose(f);
  return {compile_ms, first_ms};
}

std::string make_temp_dir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string path = std::string(tmp && *tmp ? tmp : "/tmp") + "/deconvjit-bench-XXXXXX";
  if (!::mkdtemp(path.data())) throw Error(Error::Kind::Io, "cannot create a temporary cache directory");
  return path;
}

void print(const std::vector<Row>& rows, const std::string& dir) {
  std::printf("%-18s %9s %11s %9s %8s %14s %14s\n", "kernel", "code B", "compile ms", "load ms", "speedup",
              "1st call cold", "1st call warm");
  double sum_c = 0, sum_l = 0, sum_cold = 0, sum_warm = 0, log_sum = 0;
  std::vector<double> speedups;
  for (const Row& r : rows) {
    const double s = r.compile_ms / r.load_ms;
    speedups.push_back(s);
    log_sum += std::log(s);
    sum_c += r.compile_ms;
    sum_l += r.load_ms;
    sum_cold += r.first_cold_ms;
    sum_warm += r.first_warm_ms;
    std::printf("%-18s %9zu %11.3f %9.3f %7.1fx %14.3f %14.3f\n", r.name.substr(0, 18).c_str(), r.code_bytes,
                r.compile_ms, r.load_ms, s, r.first_cold_ms, r.first_warm_ms);
  }
  if (rows.empty()) return;
  std::sort(speedups.begin(), speedups.end());
  std::printf("total: compile %.3f ms, load %.3f ms (%.1fx); per kernel speedup geomean %.1fx, median %.1fx, "
              "min %.1fx, max %.1fx\n",
              sum_c, sum_l, sum_c / sum_l, std::exp(log_sum / rows.size()), speedups[speedups.size() / 2],
              speedups.front(), speedups.back());
  std::printf("first call of all %zu kernels: cold cache %.3f ms, warm cache %.3f ms (cache: %s)\n", rows.size(),
              sum_cold, sum_warm, dir.c_str());
}

std::vector<Descriptor> distinct_descriptors(const std::vector<std::string>& inputs) {
  std::vector<Descriptor> out;
  std::set<std::string> seen;
  for (const import::ImportedLayer& item : import::read_inputs(inputs)) {
    if (!item.descriptor) throw Error(Error::Kind::InvalidDescriptor, item.label + ": " + item.error);
    if (seen.insert(canonical_json(*item.descriptor)).second) out.push_back(*item.descriptor);
  }
  return out;
}

int bench(const BenchArgs& a) {
  const std::vector<Descriptor> ds = distinct_descriptors(a.inputs);
  if (!a.pass.empty()) return run_pass(ds, a.cache, a.pass);
  const std::string dir = a.cache.empty() ? make_temp_dir() : a.cache;
  // Fresh processes first, on an empty cache: jit (no disk cache), cold (compiles and stores), warm.
  disk_cache_clear(dir);
  const auto jit = fresh_process_pass(a, dir, "jit");
  const auto cold = fresh_process_pass(a, dir, "disk");
  const auto warm = fresh_process_pass(a, dir, "disk");
  disk_cache_clear(dir);
  std::vector<Row> rows;
  tbb::parallel_for(0, 64, [](int) {});  // start the worker threads outside any measurement
  for (const Descriptor& d : ds) rows.push_back(measure(d, dir, a.reps));
  print(rows, dir);
  std::printf("fresh process, whole suite: compile() total: no disk cache %.3f ms, cold cache %.3f ms, "
              "warm cache %.3f ms (%.1fx); first call (compile + pack + execute) total: %.3f / %.3f / %.3f ms\n",
              jit.first, cold.first, warm.first, jit.first / warm.first, jit.second, cold.second, warm.second);
  if (a.cache.empty()) {
    disk_cache_clear(dir);
    ::rmdir(dir.c_str());
  }
  return kOk;
}

}  // namespace

Action add_cache_bench(CLI::App& cache) {
  auto* sub = cache.add_subcommand("bench", "Time loading kernels from the disk cache against compiling them");
  auto a = std::make_shared<BenchArgs>();
  sub->add_option("INPUT", a->inputs, "JSON Lines descriptor files (.jsonl) or OpenVINO IR models (.xml)")
      ->required();
  sub->add_option("--cache", a->cache, "cache directory to use (default: a temporary one, removed after)");
  sub->add_option("--reps", a->reps, "repetitions per timing (the median is reported)")->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub->add_option("--pass", a->pass, "internal: one fresh-process pass (jit or disk)")
      ->check(CLI::IsMember({"jit", "disk"}))->group("");
  return [a] { return bench(*a); };
}

}  // namespace deconvjit::cli
