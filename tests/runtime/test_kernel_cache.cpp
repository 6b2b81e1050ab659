// The in-memory kernel cache: hit/miss counts, keys (canonical problem, ISA, hints), LRU eviction with a
// capacity (0 disables it), handles outliving their entries, use_cache=false, DECONVJIT_CACHE_CAPACITY, and
// single-flight compilation under contention (16 threads: one shared key compiles exactly once).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "deconvjit/deconvjit.hpp"
#include "runtime/plan.hpp"
#include "runtime/tolerance.hpp"
#include "support/deconv_tester.hpp"

namespace deconvjit {
namespace {

using testing::DeconvTester;

constexpr size_t kDefaultCapacity = 1024;

// A small distinct problem per `i`.
Descriptor small(int i) {
  return DeconvTester().channels(4, 8 + i).input({5, 6}).kernel({3, 3}).stride({2, 2}).descriptor();
}

// Slow enough to compile (a few ms: 256 phases) that concurrent requests overlap the compilation.
Descriptor slow_to_compile() {
  return DeconvTester().rank(1).channels(4, 8).input({16}).kernel({1024}).stride({256}).descriptor();
}

Options opts(Isa isa = Isa::best) {
  Options o;
  o.max_isa = isa;
  o.use_disk_cache = false;  // the in-memory cache only
  return o;
}

// Compiles and runs `k` on seeded data and checks it against the reference.
::testing::AssertionResult computes_correctly(const Kernel& k, uint64_t seed = 5) {
  const Problem& p = k.problem();
  const verify::Operands ops = verify::random_operands(p, seed);
  std::vector<float> got(static_cast<size_t>(p.dst_elements()), std::nanf(""));
  k.execute(ops.src, ops.weights, got);
  std::vector<double> want(got.size()), mag(got.size());
  reference_with_bound(p, ops.src, ops.weights, want.data(), mag.data());
  const verify::Comparison c = verify::compare(p, got, want.data(), mag.data(), p.dst_elements());
  if (c.ok) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << c.failures << " elements wrong, kernel " << k.name();
}

class KernelCache : public ::testing::Test {
 protected:
  void SetUp() override {
    cache_set_capacity(kDefaultCapacity);
    cache_clear();
  }
  void TearDown() override {
    cache_set_capacity(kDefaultCapacity);
    cache_clear();
  }
};

TEST_F(KernelCache, ClearResetsTheCounts) {
  compile(small(0), opts());
  compile(small(0), opts());
  ASSERT_NE(cache_stats().misses, 0u);
  cache_clear();
  const CacheStats s = cache_stats();
  EXPECT_EQ(s.hits, 0u);
  EXPECT_EQ(s.misses, 0u);
  EXPECT_EQ(s.size, 0u);
  EXPECT_EQ(s.capacity, kDefaultCapacity);
}

TEST_F(KernelCache, SecondCompileIsAHitOnTheSameCode) {
  const Kernel a = compile(small(0), opts());
  CacheStats s = cache_stats();
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.hits, 0u);
  EXPECT_EQ(s.size, 1u);
  const Kernel b = compile(small(0), opts());
  s = cache_stats();
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.size, 1u);
  EXPECT_EQ(a.code(), b.code());
  EXPECT_EQ(a.impl(), b.impl());
  EXPECT_TRUE(computes_correctly(b));
}

// The key is the canonical problem: another spelling of the same problem finds the entry.
TEST_F(KernelCache, SpellingsOfOneProblemShareAnEntry) {
  Descriptor a = small(0), b = small(0);
  b.strides = {2, 2};
  b.dilations = {1, 1};
  b.pads_begin = {0, 0};
  b.groups = 1;
  b.name = "another name";
  a.strides = {2, 2};
  const Kernel ka = compile(a, opts()), kb = compile(b, opts());
  EXPECT_EQ(ka.code(), kb.code());
  EXPECT_EQ(cache_stats().hits, 1u);
  EXPECT_EQ(cache_stats().misses, 1u);
}

TEST_F(KernelCache, DifferentProblemsHintsAndIsasAreDifferentKeys) {
  const Kernel plain = compile(small(0), opts());
  compile(small(1), opts());
  Options hinted = opts();
  hinted.hints.ur_w = 2;
  const Kernel h1 = compile(small(0), hinted);
  EXPECT_NE(plain.code(), h1.code());
  Options layout = opts();
  layout.hints.layout = "scratch";
  compile(small(0), layout);
  EXPECT_EQ(cache_stats().misses, 4u);
  EXPECT_EQ(cache_stats().hits, 0u);
  const Kernel h2 = compile(small(0), hinted);  // the same hints again: a hit
  EXPECT_EQ(h1.code(), h2.code());
  EXPECT_EQ(cache_stats().hits, 1u);
  EXPECT_EQ(cache_stats().size, 4u);

  if (resolve_isa(Isa::avx512_core) != Isa::avx512_core)
    GTEST_SKIP() << "AVX-512 unavailable (or capped by DECONVJIT_MAX_ISA): cannot check the ISA key";
  const Kernel z = compile(small(0), opts(Isa::avx512_core));
  const Kernel y = compile(small(0), opts(Isa::avx2));
  // (under the AVX-512 cap the planner may choose AVX2 code on CPUs that run AVX-512 at the AVX2 rate)
  EXPECT_EQ(z.isa(), detail::make_plan(resolve(small(0)), Isa::avx512_core, {}).isa);
  EXPECT_EQ(y.isa(), Isa::avx2);
  EXPECT_NE(z.code(), y.code());
  // `best` resolved to one of the two, whose kernel was already cached under the resolved ISA.
  const bool best_is_z = resolve_isa(Isa::best) == Isa::avx512_core;
  EXPECT_EQ(best_is_z ? z.code() : y.code(), plain.code());
  EXPECT_EQ(cache_stats().size, 5u);
  EXPECT_EQ(cache_stats().misses, 5u);
}

TEST_F(KernelCache, LeastRecentlyUsedIsEvicted) {
  cache_set_capacity(2);
  const Kernel a = compile(small(0), opts());
  compile(small(1), opts());
  compile(small(0), opts());  // hit: now small(1) is the least recently used
  compile(small(2), opts());  // evicts small(1)
  CacheStats s = cache_stats();
  EXPECT_EQ(s.size, 2u);
  EXPECT_EQ(s.capacity, 2u);
  EXPECT_EQ(s.misses, 3u);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(compile(small(0), opts()).code(), a.code());  // kept: hit
  EXPECT_EQ(cache_stats().hits, 2u);
  compile(small(2), opts());  // kept: hit
  EXPECT_EQ(cache_stats().hits, 3u);
  compile(small(1), opts());  // evicted: a miss, which in turn evicts small(0)
  s = cache_stats();
  EXPECT_EQ(s.misses, 4u);
  EXPECT_EQ(s.size, 2u);
  compile(small(0), opts());
  EXPECT_EQ(cache_stats().misses, 5u);
}

TEST_F(KernelCache, ThreeDistinctWithCapacityTwo) {
  cache_set_capacity(2);
  for (int i = 0; i < 3; ++i) compile(small(i), opts());
  EXPECT_EQ(cache_stats().size, 2u);
  compile(small(0), opts());  // the first one was the least recently used
  EXPECT_EQ(cache_stats().misses, 4u);
  EXPECT_EQ(cache_stats().hits, 0u);
}

TEST_F(KernelCache, ShrinkingTheCapacityEvictsTheOldest) {
  for (int i = 0; i < 4; ++i) compile(small(i), opts());
  EXPECT_EQ(cache_stats().size, 4u);
  cache_set_capacity(1);
  EXPECT_EQ(cache_stats().size, 1u);
  compile(small(3), opts());  // the most recent one stays
  EXPECT_EQ(cache_stats().hits, 1u);
  compile(small(2), opts());
  EXPECT_EQ(cache_stats().misses, 5u);
}

TEST_F(KernelCache, CapacityZeroDisablesIt) {
  cache_set_capacity(0);
  const Kernel a = compile(small(0), opts());
  const Kernel b = compile(small(0), opts());
  const CacheStats s = cache_stats();
  EXPECT_EQ(s.misses, 2u);
  EXPECT_EQ(s.hits, 0u);
  EXPECT_EQ(s.size, 0u);
  EXPECT_EQ(s.capacity, 0u);
  EXPECT_NE(a.code(), b.code());  // compiled twice
  EXPECT_TRUE(computes_correctly(a));
  EXPECT_TRUE(computes_correctly(b));
}

TEST_F(KernelCache, UseCacheFalseBypassesIt) {
  const Kernel cached = compile(small(0), opts());
  const CacheStats before = cache_stats();
  Options o = opts();
  o.use_cache = false;
  const Kernel a = compile(small(0), o);
  const Kernel b = compile(small(1), o);
  const CacheStats after = cache_stats();
  EXPECT_EQ(after.hits, before.hits);
  EXPECT_EQ(after.misses, before.misses);
  EXPECT_EQ(after.size, before.size);
  EXPECT_NE(a.code(), cached.code());
  EXPECT_GT(a.compile_ms(), 0.0);
  EXPECT_TRUE(computes_correctly(a));
  EXPECT_TRUE(computes_correctly(b));
}

TEST_F(KernelCache, HandlesOutliveTheirEntries) {
  const Kernel a = compile(small(0), opts());
  const Kernel b = compile(small(1), opts());
  cache_clear();
  EXPECT_EQ(cache_stats().size, 0u);
  EXPECT_TRUE(computes_correctly(a));
  cache_set_capacity(1);
  compile(small(2), opts());
  compile(small(3), opts());  // evicts small(2)'s entry
  EXPECT_TRUE(computes_correctly(b));
  const Kernel again = compile(small(0), opts());  // a new compilation; the old handle still works
  EXPECT_NE(again.code(), a.code());
  EXPECT_TRUE(computes_correctly(a, 9));
}

// A rejected compilation leaves nothing behind: the next request tries again (and fails again).
TEST_F(KernelCache, FailedCompilationsAreNotCached) {
  Options bad = opts();
  bad.hints.oc_vectors = 64;  // no register file holds that
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      compile(small(0), bad);
      ADD_FAILURE() << "oc_vectors 64 was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), Error::Kind::InvalidArgument) << e.what();
    }
  }
  EXPECT_EQ(cache_stats().size, 0u);
  EXPECT_EQ(cache_stats().hits, 0u);
  EXPECT_TRUE(computes_correctly(compile(small(0), opts())));  // the same problem without the bad hint
}

// 16 threads, each asking many times for one shared (slow) problem and for its own: the shared one is
// compiled exactly once (the others wait for it), every handle of a key is the same object, all correct.
TEST_F(KernelCache, ConcurrentRequestsCompileEachKeyOnce) {
  constexpr int kThreads = 16, kRounds = 12;
  const Descriptor shared = slow_to_compile();
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::vector<const uint8_t*>> shared_code(kThreads), own_code(kThreads);
  std::vector<Kernel> last_shared(kThreads), last_own(kThreads);
  std::atomic<int> errors{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t)
    pool.emplace_back([&, t] {
      const Descriptor own = small(t);
      ++ready;
      while (!go.load()) std::this_thread::yield();
      try {
        for (int r = 0; r < kRounds; ++r) {
          // Alternate the order so that shared and own requests interleave differently per thread.
          if ((r + t) % 2 == 0) {
            last_shared[t] = compile(shared, opts());
            last_own[t] = compile(own, opts());
          } else {
            last_own[t] = compile(own, opts());
            last_shared[t] = compile(shared, opts());
          }
          shared_code[t].push_back(last_shared[t].code());
          own_code[t].push_back(last_own[t].code());
        }
      } catch (...) {
        ++errors;
      }
    });
  while (ready.load() < kThreads) std::this_thread::yield();
  go = true;
  for (std::thread& th : pool) th.join();
  ASSERT_EQ(errors.load(), 0);

  const CacheStats s = cache_stats();
  EXPECT_EQ(s.misses, 1u + kThreads) << "the shared key once, each thread's own key once";
  EXPECT_EQ(s.hits, 2u * kThreads * kRounds - (1u + kThreads));
  EXPECT_EQ(s.size, 1u + kThreads);
  std::set<const uint8_t*> shared_ptrs, own_ptrs;
  for (int t = 0; t < kThreads; ++t) {
    shared_ptrs.insert(shared_code[t].begin(), shared_code[t].end());
    std::set<const uint8_t*> mine(own_code[t].begin(), own_code[t].end());
    EXPECT_EQ(mine.size(), 1u) << "thread " << t << " got different kernels for its own key";
    own_ptrs.insert(mine.begin(), mine.end());
    EXPECT_EQ(last_shared[t].impl(), last_shared[0].impl());
  }
  EXPECT_EQ(shared_ptrs.size(), 1u) << "the shared key was compiled more than once";
  EXPECT_EQ(own_ptrs.size(), static_cast<size_t>(kThreads));
  EXPECT_EQ(own_ptrs.count(*shared_ptrs.begin()), 0u);

  // Every thread's kernels compute correctly, executed concurrently too.
  std::atomic<int> wrong{0};
  pool.clear();
  for (int t = 0; t < kThreads; ++t)
    pool.emplace_back([&, t] {
      if (!computes_correctly(last_shared[t], t)) ++wrong;
      if (!computes_correctly(last_own[t], t)) ++wrong;
    });
  for (std::thread& th : pool) th.join();
  EXPECT_EQ(wrong.load(), 0);
}

// Concurrent requests while another thread shrinks, clears and resizes the cache: no crash, no deadlock,
// every kernel returned is usable, and the cache counts correctly afterwards.
TEST_F(KernelCache, ConcurrentRequestsWhileResizingAndClearing) {
  constexpr int kThreads = 8, kRounds = 40;
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t)
    pool.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        const Kernel k = compile(small((t + r) % 5), opts());
        if (!k || k.code_size() == 0) ++wrong;
        if (r % 10 == 0 && !computes_correctly(k, r)) ++wrong;
      }
    });
  std::thread churn([&] {
    for (int i = 0; !stop.load(); ++i) {
      cache_set_capacity(static_cast<size_t>(i % 3));
      if (i % 5 == 0) cache_clear();
      std::this_thread::yield();
    }
  });
  for (std::thread& th : pool) th.join();
  stop = true;
  churn.join();
  EXPECT_EQ(wrong.load(), 0);
  cache_set_capacity(kDefaultCapacity);
  cache_clear();
  for (int i = 0; i < 3; ++i) compile(small(i), opts());
  EXPECT_EQ(cache_stats().misses + cache_stats().hits, 3u);
}

// ---- DECONVJIT_CACHE_CAPACITY (read once, when the cache is first used: checked in a fresh process) ----

// Runs in the child process only (skipped otherwise): the capacity the environment asked for.
TEST(KernelCacheEnvironment, ChildReportsCapacity) {
  const char* want = std::getenv("DECONVJIT_TEST_EXPECT_CAPACITY");
  if (!want) GTEST_SKIP() << "runs only as the child of KernelCacheEnvironment.CapacityFromEnvironment";
  const CacheStats s = cache_stats();
  EXPECT_EQ(s.capacity, std::strtoull(want, nullptr, 10));
  Options o;
  o.use_disk_cache = false;
  compile(small(0), o);
  compile(small(0), o);
  EXPECT_EQ(cache_stats().size, s.capacity == 0 ? 0u : 1u);
  EXPECT_EQ(cache_stats().hits, s.capacity == 0 ? 0u : 1u);
}

std::string self_exe() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

TEST(KernelCacheEnvironment, CapacityFromEnvironment) {
  if (std::getenv("DECONVJIT_TEST_EXPECT_CAPACITY")) GTEST_SKIP() << "this is the child";
  const std::string exe = self_exe();
  ASSERT_FALSE(exe.empty());
  struct Run {
    const char* env;  // DECONVJIT_CACHE_CAPACITY, or nullptr for unset
    const char* expect;
  };
  for (const Run& r : {Run{nullptr, "1024"}, Run{"7", "7"}, Run{"0", "0"}}) {
    std::string cmd = "env -u DECONVJIT_CACHE_CAPACITY ";
    if (r.env) cmd += std::string("DECONVJIT_CACHE_CAPACITY=") + r.env + " ";
    cmd += std::string("DECONVJIT_TEST_EXPECT_CAPACITY=") + r.expect + " '" + exe +
           "' --gtest_filter=KernelCacheEnvironment.ChildReportsCapacity > /dev/null 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << "child failed: " << cmd;
  }
}

}  // namespace
}  // namespace deconvjit
