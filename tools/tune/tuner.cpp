#include "tune/tuner.hpp"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include <oneapi/tbb/task_arena.h>

#include "bench/pinning.hpp"
#include "bench/timing.hpp"
#include "bench/typed_buffer.hpp"
#include "runtime/reference.hpp"
#include "runtime/tolerance.hpp"

namespace deconvjit::tune {
namespace {

constexpr size_t kDistinctKernels = 10;      // stage 1: the model's best distinct kernels
constexpr size_t kPerStructure = 4;          // stage 1: plus the best of up to 4 families/routes not yet in
constexpr size_t kVariants = 5;              // stage 2: threading/blocking variants of each of the best two
constexpr double kEnumerationShare = 0.25;   // of the budget, about, for enumerating the plan space
constexpr int64_t kSampleRows = 24;          // output rows the oracle computes to verify a candidate
constexpr int64_t kSampleX = 512;            // output x per row beyond which rows are sampled too

// The oracle on a sample of output rows: the first and last two (borders in y and z, every x border)
// and rows spread between them. Whole layers can take minutes in the scalar reference.
struct Oracle {
  std::vector<double> want, mag;
  std::vector<int64_t> at;  // the checked elements
  Oracle(const Problem& p, const void* src, const void* w) : want(p.dst_elements()), mag(p.dst_elements()) {
    int64_t rows = p.batch;
    for (size_t i = 0; i + 1 < p.out.size(); ++i) rows *= p.out[i];
    std::set<int64_t> pick;
    for (int64_t r : {int64_t{0}, int64_t{1}, rows - 2, rows - 1})
      if (r >= 0 && r < rows) pick.insert(r);
    for (int64_t i = 0; i < kSampleRows; ++i) pick.insert(i * rows / kSampleRows);
    // Long rows (1-D layers: a row is a whole image) are sampled too: both ends, where the borders are,
    // and windows spread between them.
    std::set<int64_t> xs;
    const int64_t width = p.out.back();
    if (width > kSampleX) {
      for (int64_t x = 0; x < kSampleX / 4; ++x) xs.insert({x, width - 1 - x});
      for (int64_t w0 = 0; w0 < kSampleX / 2; w0 += 8)
        for (int64_t x = 0; x < 8; ++x) xs.insert(std::min(width - 1, w0 * width / (kSampleX / 2) + x));
    }
    at = detail::reference_rows(p, src, w, {pick.begin(), pick.end()}, {xs.begin(), xs.end()}, want.data(),
                                mag.data());
  }
  // The rule `deconvjit check` applies (NaN where the sum is finite fails).
  bool accepts(const Problem& p, const bench::TypedBuffer& got) const {
    const verify::Rule rule(p);
    for (int64_t e : at)
      if (!rule.accepts(got.at(e), want[e], mag[e])) return false;
    return true;
  }
};

struct Timed {
  PlanCandidate plan;
  Kernel kernel;
  PackedWeights packed;
  double ms = std::numeric_limits<double>::infinity();
};

struct Search {
  const Descriptor& d;
  const Problem p;
  Options options;
  const ProgressFn& progress;
  bench::TypedBuffer src, weights, dst;  // in the problem's type
  std::optional<Oracle> oracle;
  TuneResult result;

  Search(const Descriptor& desc, const Options& o, const ProgressFn& pr)
      : d(desc), p(resolve(desc)), options(o), progress(pr), src(p.dtype, p.src_elements()),
        weights(p.dtype, p.weights_elements()), dst(p.dtype, p.dst_elements()) {
    bench::fill_random(src, 1);
    bench::fill_random(weights, 2);
    oracle.emplace(p, src.data(), weights.data());
  }

  Buffer out() { return dst.view(); }
  ConstBuffer in() const { return src.view(); }

  // Compiles and verifies; false (and counted) when the kernel disagrees with the oracle.
  bool prepare(Timed& t) {
    Options o = options;
    o.hints = t.plan.hints;
    t.kernel = compile(d, o);
    t.packed = t.kernel.pack_weights(weights.view());
    dst.fill_nan();
    t.kernel.execute(in(), t.packed, out());
    if (oracle->accepts(p, dst)) return true;
    ++result.rejected;
    std::cerr << "warning: " << result.name << ": plan " << to_json(t.plan.hints) << " (" << t.kernel.name()
              << ") disagrees with the reference; left out\n";
    return false;
  }

  // One interleaved run of every candidate; each gets `min_time` seconds.
  void time(std::vector<Timed*>& set, double min_time) {
    std::vector<std::function<void()>> runs;
    for (Timed* t : set) runs.push_back([this, t] { t->kernel.execute(in(), t->packed, out()); });
    // every candidate is ours: the caller keeps slot 0's CPU throughout (bench/pinning.hpp)
    const bench::CallerUnpin unpin;
    bench::pin_caller(true);
    const std::vector<double> ms = bench::interleaved_medians(runs, min_time, 3);
    for (size_t i = 0; i < set.size(); ++i) set[i]->ms = ms[i];
    result.candidates += static_cast<int>(set.size());
  }
};

// How many candidates a stage can time in `seconds` when one run takes `once` seconds, and for how long.
size_t affordable(size_t wanted, double seconds, double once, double* min_time) {
  const double per = std::max(once * 4, 0.01);  // warm-up and three runs at the least
  const double fit = std::clamp(std::max(seconds, 0.0) / (per * 1.5), 0.0, 1e6);  // spent budget: none
  const size_t n = std::clamp<size_t>(static_cast<size_t>(fit), 2, wanted);
  // At least three runs' worth, however little is left; at most 0.3 s.
  *min_time = std::max(per, std::min(std::max(seconds, 0.0) / (static_cast<double>(n) * 1.6), 0.3));
  return n;
}

}  // namespace

TuneResult tune_problem(const std::string& name, const Descriptor& d, const Options& options, double budget_s,
                        const ProgressFn& progress) {
  const double t0 = bench::now_s();
  Options o = options;
  o.use_cache = false;
  o.use_disk_cache = false;
  o.tuning_db = "";
  o.hints = {};
  progress("reference");
  Search s(d, o, progress);
  s.result.name = name;
  const int threads = tbb::this_task_arena::max_concurrency();
  progress("plan space");
  // About a quarter of the budget for the enumeration (the tiles the model ranks first are expanded first).
  const std::vector<PlanCandidate> space =
      enumerate_plans(s.p, o.max_isa, threads, budget_s * kEnumerationShare, &s.result.space_complete);
  s.result.space = static_cast<int>(space.size());

  // The heuristic's plan, timed in every stage: the gain is measured against it in the same run.
  std::vector<Timed> pool;
  pool.reserve(kDistinctKernels + kPerStructure + 2 * kVariants + 1);
  Timed dflt;
  dflt.kernel = compile(d, o);
  dflt.plan = {dflt.kernel.name(), dflt.kernel.choices(), 0};
  if (!s.prepare(dflt)) throw Error(Error::Kind::Internal, name + ": the default plan disagrees with the reference");
  const double t_once = bench::now_s();
  dflt.kernel.execute(s.in(), dflt.packed, s.out());
  const double once = bench::now_s() - t_once;
  pool.push_back(std::move(dflt));

  // Stage 1: the model's best distinct kernels, and the best of each family and route it ranks lower.
  double min_time = 0;
  const double left1 = std::max(0.0, budget_s * 0.6 - (bench::now_s() - t0));
  const size_t n1 = affordable(kDistinctKernels + kPerStructure + 1, left1, once, &min_time);
  std::set<std::string> kernels{pool[0].plan.kernel}, routes;
  auto route = [](const TuningHints& h) { return h.isa + '/' + h.algorithm + '/' + h.layout; };  // (ISA too: code apart)
  routes.insert(route(pool[0].plan.hints));
  // Pass 0 takes the model's best distinct kernels until kPerStructure places are left, then only kernels
  // of families or routes not yet in (the model's ranking across families is the least trustworthy part);
  // pass 1 fills any places still free with the next distinct kernels.
  for (size_t pass = 0; pass < 2 && pool.size() < n1; ++pass)
    for (const PlanCandidate& c : space) {
      // Compiling and verifying count against the budget too: stop adding when half of it is gone.
      if (pool.size() >= n1 || (pool.size() > 1 && bench::now_s() - t0 > budget_s * 0.5)) break;
      const bool fresh_route = !routes.count(route(c.hints));
      if (kernels.count(c.kernel) || (pass == 0 && !fresh_route && pool.size() >= kDistinctKernels + 1 - kPerStructure))
        continue;
      kernels.insert(c.kernel);
      routes.insert(route(c.hints));
      Timed t;
      t.plan = c;
      progress("stage 1: verify " + std::to_string(pool.size()) + "/" + std::to_string(n1));
      if (s.prepare(t)) pool.push_back(std::move(t));
    }
  std::vector<Timed*> stage;
  for (Timed& t : pool) stage.push_back(&t);
  progress("stage 1: time " + std::to_string(stage.size()) + " kernels");
  s.time(stage, min_time);

  // Stage 2: threading and blocking variants of the best two kernels, against them and the default.
  std::sort(stage.begin(), stage.end(), [](const Timed* a, const Timed* b) { return a->ms < b->ms; });
  std::vector<Timed*> finals{&pool[0]};
  for (size_t i = 0; i < std::min<size_t>(2, stage.size()); ++i)
    if (stage[i] != &pool[0]) finals.push_back(stage[i]);
  const double left2 = budget_s - (bench::now_s() - t0);
  const size_t n2 = affordable(finals.size() + 2 * kVariants, left2, std::max(once, stage[0]->ms * 1e-3), &min_time);
  std::set<std::string> timed;
  for (const Timed& t : pool) timed.insert(to_json(t.plan.hints));
  const size_t base = pool.size();
  for (size_t f = 1; f < finals.size() && f <= 2; ++f) {
    const std::string k = finals[f]->plan.kernel;
    size_t added = 0;
    // (a space cut short may not hold this kernel's variants: its tile's are enumerated now)
    std::vector<PlanCandidate> variants;
    if (!s.result.space_complete) variants = enumerate_variants(s.p, o.max_isa, threads, finals[f]->plan.hints);
    for (const PlanCandidate& c : s.result.space_complete ? space : variants) {
      if (finals.size() + (pool.size() - base) >= n2 || added >= kVariants || bench::now_s() - t0 > budget_s * 0.75)
        break;
      if (c.kernel != k || timed.count(to_json(c.hints))) continue;
      Timed t;
      t.plan = c;
      progress("stage 2: verify " + std::to_string(pool.size() - base + 1));
      if (s.prepare(t)) {
        pool.push_back(std::move(t));
        ++added;
      }
    }
  }
  for (size_t i = base; i < pool.size(); ++i) finals.push_back(&pool[i]);
  // Verifying the variants spent part of left2: the last timing gets what is left now (at least three
  // runs each, so every final is timed), with a margin for its final round (nnunet2d_up512_b12 ran 40 ms
  // past 20 s without it).
  const double left3 = budget_s * 0.97 - (bench::now_s() - t0);
  if (finals.size() > 1 && left2 > 0) {
    affordable(finals.size(), std::max(0.0, left3), std::max(once, stage[0]->ms * 1e-3), &min_time);
    progress("stage 2: time " + std::to_string(finals.size()) + " plans");
    s.time(finals, min_time);
  }
  const Timed* best = *std::min_element(finals.begin(), finals.end(),
                                        [](const Timed* a, const Timed* b) { return a->ms < b->ms; });
  TuneResult r = s.result;
  r.hints = best->plan.hints;
  r.kernel = best->kernel.name();
  r.default_kernel = pool[0].kernel.name();
  r.default_ms = pool[0].ms;
  r.tuned_ms = best->ms;
  r.seconds = bench::now_s() - t0;
  return r;
}

}  // namespace deconvjit::tune
