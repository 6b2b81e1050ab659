// Threads: results are bitwise identical whatever the thread count, a caller's tbb::task_arena limits the
// threads, and one Kernel may be executed concurrently (from std::threads, or from inside TBB tasks).
//
// Every problem here is above the executor's serial threshold (2 MFLOP), so the work really is split into
// TBB tasks; each test checks the plan says so before relying on it.
#include <gtest/gtest.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>
#include <tbb/task_scheduler_observer.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "deconvjit/deconvjit.hpp"
#include "runtime/tolerance.hpp"
#include "support/no_disk_cache.hpp"
#include "support/deconv_tester.hpp"

namespace deconvjit {
namespace {

using testing::DeconvTester;

using testing::NoDiskCache;

// A problem big enough to run in parallel, and the route it is meant to take.
struct Case {
  const char* name;
  std::function<DeconvTester()> make;
  const char* algorithm;  // expected Plan algorithm ("" = any)
  const char* layout;     // expected Plan layout ("" = any)
};

std::vector<Case> cases() {
  const auto base = [] { return DeconvTester().batch(2).channels(32, 48).input({16, 16}).kernel({3, 3}).stride({2, 2}); };
  const auto hinted = [base](const char* layout, int x_split) {
    TuningHints h;
    h.layout = layout;
    h.x_split = x_split;
    return base().pads({1, 0}, {0, 1}).hints(h);
  };
  return {
      {"nxc_direct", [base] { return base().layout(DataFormat::NXC).pads({1, 1}, {1, 1}); }, "direct", "nxc"},
      {"ncx_row_buffer", [hinted] { return hinted("row_buffer", 0); }, "direct", "ncx_row_buffer"},
      {"ncx_row_buffer_split", [hinted] { return hinted("row_buffer", 5); }, "direct", "ncx_row_buffer"},
      {"ncx_scratch", [hinted] { return hinted("scratch", 0); }, "direct", "ncx_via_scratch"},
      {"ncx_in_kernel", [hinted] { return hinted("in_kernel", 3); }, "direct", "ncx_in_kernel"},
      {"ncx_src_in_place", [hinted] { return hinted("src_in_place", 3); }, "direct", "ncx_src_in_place"},
      {"gemm", [] { return DeconvTester().batch(2).channels(48, 40).input({20, 20}).kernel({2, 2}).stride({2, 2})
                        .layout(DataFormat::NXC); }, "gemm", "nxc"},
      {"depthwise", [] { return DeconvTester().batch(2).groups(64).channels(64, 64).input({48, 40}).kernel({3, 3})
                             .stride({2, 2}).layout(DataFormat::NXC); }, "depthwise", ""},
      {"group_inner", [] {
         TuningHints h;  // row parts of four groups, the group innermost
         h.group_inner = 1, h.x_split = 3;
         return DeconvTester().rank(1).batch(2).groups(4).channels(64, 8).input({300}).kernel({4}).stride({2})
             .layout(DataFormat::NXC).hints(h); }, "", "nxc"},
      {"ncx_plane_tiles", [] {
         TuningHints h;  // tiles of 32 channels: 2-4 blocks of one vector, one call each
         h.layout = "plane_tiles", h.channels_per_call = 32, h.oc_vectors = 1, h.oc_loop = 1;
         return DeconvTester().batch(3).groups(64).channels(64, 64).input({9, 7}).kernel({3, 3}).stride({2, 2})
             .hints(h); }, "depthwise", "ncx_plane_tiles"},
      {"batch_blocks", [] { return DeconvTester().batch(8).channels(64, 72).input({4, 4}).kernel({3, 3})
                                .layout(DataFormat::NXC); }, "", ""},
      {"three_d_ncx", [] { return DeconvTester().rank(3).channels(16, 24).input({6, 8, 8}).kernel({3, 3, 3})
                               .stride({2, 2, 2}).dilation({1, 2, 1}); }, "", ""},
      {"few_out_channels", [] { return DeconvTester().batch(2).channels(64, 2).input({32, 32}).kernel({4, 4})
                                    .stride({2, 2}); }, "", ""},
  };
}

struct Param {
  Isa isa;
  size_t index;
};

std::vector<Param> params() {
  std::vector<Param> v;
  for (Isa isa : {Isa::avx512_core, Isa::avx2})
    for (size_t i = 0; i < cases().size(); ++i) v.push_back({isa, i});
  return v;
}

void PrintTo(const Param& p, std::ostream* os) { *os << cases()[p.index].name << " on " << to_string(p.isa); }

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  return std::string(cases()[info.param.index].name) + "_" + to_string(info.param.isa);
}

// Operands, one compiled kernel and its packed weights.
struct Prepared {
  Problem p;
  verify::Operands ops;
  Kernel k;
  PackedWeights w;
  nlohmann::json plan;
};

Prepared prepare(const DeconvTester& t, uint64_t seed = 11) {
  Prepared r;
  r.p = resolve(t.descriptor());
  r.ops = verify::random_operands(r.p, seed);
  r.k = compile(t.descriptor(), t.options());
  r.w = r.k.pack_weights(r.ops.weights);
  r.plan = nlohmann::json::parse(r.k.plan_text());
  return r;
}

std::vector<float> run_in_arena(const Prepared& r, int threads, const float* src = nullptr) {
  std::vector<float> dst(static_cast<size_t>(r.p.dst_elements()), std::nanf(""));
  tbb::task_arena arena(threads);
  arena.execute([&] { r.k.execute(src ? ConstBuffer(src, r.ops.src.size()) : ConstBuffer(r.ops.src), r.w, dst); });
  return dst;
}

void expect_matches_reference(const Prepared& r, const std::vector<float>& got) {
  std::vector<double> want(got.size()), mag(got.size());
  reference_with_bound(r.p, r.ops.src, r.ops.weights, want.data(), mag.data());
  const verify::Comparison c = verify::compare(r.p, got, want.data(), mag.data(), r.p.dst_elements());
  EXPECT_TRUE(c.ok) << c.failures << " elements outside tolerance, " << r.k.name();
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class Threads : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    if (!isa_available(GetParam().isa)) GTEST_SKIP() << to_string(GetParam().isa) << " is not available";
    if (std::string(cases()[GetParam().index].layout) == "ncx_in_kernel" && GetParam().isa != Isa::avx512_core)
      GTEST_SKIP() << "the in_kernel layout needs AVX-512";
  }
  NoDiskCache no_disk_cache_;
};

TEST_P(Threads, BitwiseIdenticalForAnyThreadCount) {
  const std::vector<Case> all = cases();
  const Case& c = all[GetParam().index];
  const Prepared r = prepare(c.make().isa(GetParam().isa));
  ASSERT_TRUE(r.plan.at("parallel").get<bool>()) << "too small to test threading: " << r.k.plan_text();
  if (*c.algorithm) EXPECT_EQ(r.plan.at("algorithm"), c.algorithm) << r.k.plan_text();
  if (*c.layout) EXPECT_EQ(r.plan.at("layout"), c.layout) << r.k.plan_text();

  const std::vector<float> one = run_in_arena(r, 1);
  expect_matches_reference(r, one);
  for (int threads : {2, 3, 8}) {
    EXPECT_TRUE(same_bits(one, run_in_arena(r, threads))) << threads << " threads differ from 1, " << r.k.name();
  }
  // Repeated runs in the default arena, too.
  std::vector<float> dflt(one.size(), std::nanf(""));
  for (int rep = 0; rep < 3; ++rep) {
    r.k.execute(r.ops.src, r.w, dflt);
    EXPECT_TRUE(same_bits(one, dflt)) << "default arena, run " << rep;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, Threads, ::testing::ValuesIn(params()), param_name);

// ---- a caller's arena limits the threads ----------------------------------------------------------------

// Counts TBB worker threads joining the arena this observer watches (the default arena of the thread that
// activates it). Workers already in it at activation are counted too.
class WorkerCounter : public tbb::task_scheduler_observer {
 public:
  WorkerCounter() { observe(true); }
  ~WorkerCounter() override { observe(false); }
  void on_scheduler_entry(bool is_worker) override {
    if (is_worker) ++workers;
  }
  std::atomic<int> workers{0};
};

TEST(ThreadLimits, ArenaOfOneKeepsTheWorkOnTheCallingThread) {
  NoDiskCache no_disk_cache;
  const Prepared r = prepare(DeconvTester().batch(2).channels(32, 48).input({24, 24}).kernel({3, 3}).stride({2, 2}));
  ASSERT_TRUE(r.plan.at("parallel").get<bool>());
  std::vector<float> want(static_cast<size_t>(r.p.dst_elements()));
  r.k.execute(r.ops.src, r.w, want);  // warms up the workers in the default arena
  expect_matches_reference(r, want);

  // Control: without a limit, workers join the default arena (or the machine has a single core).
  int control = 0;
  {
    WorkerCounter counter;
    std::vector<float> got(want.size());
    for (int rep = 0; rep < 50 && counter.workers.load() == 0; ++rep)
      r.k.execute(r.ops.src, r.w, got);
    control = counter.workers.load();
  }

  tbb::task_arena single(1);
  std::vector<float> got(want.size(), std::nanf(""));
  int concurrency = 0;
  int entered = 0;
  {
    WorkerCounter counter;  // watches the default arena: work escaping the caller's arena would show here
    single.execute([&] {
      concurrency = tbb::this_task_arena::max_concurrency();
      const int before = counter.workers.load();
      for (int rep = 0; rep < 5; ++rep) r.k.execute(r.ops.src, r.w, got);
      entered = counter.workers.load() - before;
    });
  }
  EXPECT_EQ(concurrency, 1);
  EXPECT_TRUE(same_bits(want, got));
  if (control == 0 && std::thread::hardware_concurrency() > 1)
    GTEST_SKIP() << "no TBB worker joined even without a limit: this check cannot observe escapes here";
  EXPECT_EQ(entered, 0) << "TBB workers joined the default arena while the caller's arena(1) ran the kernel";
}

// ---- concurrent execution of one Kernel -----------------------------------------------------------------

class ConcurrentExecute : public ::testing::TestWithParam<const char*> {
 protected:
  NoDiskCache no_disk_cache_;
};

// Several std::threads run one Kernel on their own buffers; each result equals the serial one bit for bit.
TEST_P(ConcurrentExecute, FromStdThreads) {
  const std::string layout = GetParam();
  TuningHints h;
  if (layout != "nxc") h.layout = layout;
  DeconvTester t = DeconvTester().batch(2).channels(24, 40).input({20, 18}).kernel({3, 3}).stride({2, 2}).hints(h)
                       .layout(layout == "nxc" ? DataFormat::NXC : DataFormat::NCX);
  if (layout == "plane_tiles") t.groups(32).channels(32, 32);  // depthwise
  if (layout == "in_kernel" && !isa_available(Isa::avx512_core)) GTEST_SKIP() << "needs AVX-512";
  const Prepared r = prepare(t);
  ASSERT_TRUE(r.plan.at("parallel").get<bool>());
  constexpr int kThreads = 6, kReps = 4;
  std::vector<std::vector<float>> srcs, want;
  for (int i = 0; i < kThreads; ++i) {
    srcs.push_back(verify::uniform_data(r.p.src_elements(), 100 + i));
    want.push_back(run_in_arena(r, 1, srcs.back().data()));
  }
  std::atomic<int> mismatches{0};
  std::vector<std::thread> pool;
  for (int i = 0; i < kThreads; ++i)
    pool.emplace_back([&, i] {
      std::vector<float> dst(want[i].size());
      for (int rep = 0; rep < kReps; ++rep) {
        std::fill(dst.begin(), dst.end(), std::nanf(""));
        r.k.execute(srcs[i], r.w, dst);
        if (!same_bits(dst, want[i])) ++mismatches;
      }
    });
  for (std::thread& th : pool) th.join();
  EXPECT_EQ(mismatches.load(), 0) << "of " << kThreads * kReps << " concurrent executions of " << r.k.name();
  expect_matches_reference(r, run_in_arena(r, 2));
}

// execute() called from inside TBB tasks (a caller's parallel loop over requests, as inference runtimes do):
// while one call waits for its own tasks, its thread may pick up another whole call (TBB does not isolate
// nested parallelism unless asked to), so per-thread scratch must not be shared by the two calls.
// (Regression test: with thread_local NXC copies of src/dst held across the executor's own parallel_for,
// the row_buffer and scratch layouts failed here in most runs.)
TEST_P(ConcurrentExecute, FromInsideTbbTasks) {
  const std::string layout = GetParam();
  TuningHints h;
  if (layout != "nxc") h.layout = layout;
  DeconvTester t = DeconvTester().channels(64, 64).input({32, 32}).kernel({3, 3}).stride({2, 2}).hints(h)
                       .layout(layout == "nxc" ? DataFormat::NXC : DataFormat::NCX);
  if (layout == "plane_tiles") t.groups(64).input({16, 16});  // depthwise, planes small enough for tiles
  if (layout == "in_kernel" && !isa_available(Isa::avx512_core)) GTEST_SKIP() << "needs AVX-512";
  const Prepared r = prepare(t);
  ASSERT_TRUE(r.plan.at("parallel").get<bool>());
  constexpr int kCalls = 48;
  std::vector<std::vector<float>> srcs, want, got(kCalls);
  for (int i = 0; i < kCalls; ++i) {
    srcs.push_back(verify::uniform_data(r.p.src_elements(), 200 + i));
    want.push_back(run_in_arena(r, 1, srcs.back().data()));
    got[i].assign(want[i].size(), std::nanf(""));
  }
  // More threads than cores make nesting likely; rounds repeat until some calls did nest (bounded).
  tbb::global_control oversubscribe(tbb::global_control::max_allowed_parallelism, 8);
  tbb::task_arena arena(8);
  std::atomic<int> nested{0};
  int wrong = 0, rounds = 0;
  for (; rounds < 15 && nested.load() < 4; ++rounds) {
    arena.execute([&] {
      tbb::parallel_for(0, kCalls, [&](int i) {
        thread_local int depth = 0;
        if (depth > 0) ++nested;  // this call runs inside another one's wait
        ++depth;
        r.k.execute(srcs[i], r.w, got[i]);
        --depth;
      });
    });
    for (int i = 0; i < kCalls; ++i) wrong += !same_bits(got[i], want[i]);
  }
  EXPECT_EQ(wrong, 0) << "calls with a wrong result, of " << rounds * kCalls << " (" << nested.load()
                      << " ran nested inside another call), kernel " << r.k.name();
}

INSTANTIATE_TEST_SUITE_P(Layouts, ConcurrentExecute,
                         ::testing::Values("nxc", "row_buffer", "scratch", "in_kernel", "src_in_place", "plane_tiles"),
                         [](const ::testing::TestParamInfo<const char*>& i) { return std::string(i.param); });

}  // namespace
}  // namespace deconvjit
