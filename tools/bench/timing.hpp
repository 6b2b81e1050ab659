// Plain steady_clock timing for `deconvjit bench` and `deconvjit peak`, plus the aligned, seeded buffers
// they time on. No benchmark framework: every number the tool prints comes from these few functions.
#pragma once

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <new>
#include <random>
#include <thread>
#include <vector>

namespace deconvjit::bench {

inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  if (v.size() % 2) return v[mid];
  return (v[mid] + *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid))) / 2;
}

// 64-byte alignment, so a zmm load never splits a cache line because of where the buffer starts.
struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};
using AlignedFloats = std::unique_ptr<float[], FreeDeleter>;

inline AlignedFloats aligned_floats(int64_t count) {
  const size_t bytes = (static_cast<size_t>(std::max<int64_t>(count, 1)) * sizeof(float) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, bytes);
  if (!p) throw std::bad_alloc();
  return AlignedFloats(static_cast<float*>(p));
}

// Uniform in [-1, 1], reproducible from the seed; the same distribution `deconvjit check` draws.
inline void fill_random(float* p, int64_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int64_t i = 0; i < count; ++i) p[i] = dist(rng);
}

inline double process_cpu_s() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Sleeps until no thread of this process burns CPU any more (at most `limit` seconds). Thread pools spin
// for a while after their work: OpenMP's (inside oneDNN) for milliseconds, and a pool still spinning steals
// cores from the next variant, which then looks up to twice as slow on a small machine. The process CPU
// clock counts threads running on other cores only at scheduler ticks (4 ms at HZ 250): a 1 ms window
// looked quiet 74% of the time next to a spinning thread here, and our first variant after oneDNN's ran
// with its pool spinning beside it (mbmelgan_up2 NCX at 65% of the peak, 90% alone). So each window spans
// more than a tick (10 ms, HZ 100 or more), and quiet means under a tenth of a core in it.
inline void wait_until_quiet(double limit = 0.5) {
  constexpr double kWindow = 0.010;
  const double end = now_s() + limit;
  while (now_s() < end) {
    const double cpu = process_cpu_s(), t0 = now_s();
    std::this_thread::sleep_for(std::chrono::duration<double>(kWindow));
    if (process_cpu_s() - cpu < 0.1 * (now_s() - t0)) return;
  }
}

// Median milliseconds per run of each variant. Variants run in alternating batches (a, b, c, a, b, c, ...)
// so that clock boosts, thermal drift and noisy neighbours hit all of them alike. Each variant gets at least
// `min_runs` runs and `min_time` seconds; every run is timed on its own so the median drops outliers.
// Before each batch of another variant the process waits until quiet (see above); a batch holds at least
// three runs so that the first, which wakes the sleeping pool, does not decide the median. `before_batch`,
// when given, is called with the variant's index before each of its batches (bench pins the caller there).
inline std::vector<double> interleaved_medians(const std::vector<std::function<void()>>& variants,
                                               double min_time, int min_runs = 5,
                                               const std::function<void(size_t)>& before_batch = {}) {
  const size_t n = variants.size();
  const bool alternate = n > 1;
  std::vector<std::vector<double>> samples(n);
  std::vector<double> spent(n, 0.0);
  std::vector<int> batch(n, 1);
  for (size_t v = 0; v < n; ++v) {
    // Two warm-up runs: the first touches fresh pages and lets lazy initialisation happen.
    if (alternate) wait_until_quiet();
    if (before_batch) before_batch(v);
    variants[v]();
    const double t0 = now_s();
    variants[v]();
    const double once = std::max(now_s() - t0, 1e-7);
    // About ten rounds in total; a batch is never so long that one variant runs far ahead of the others.
    batch[v] = static_cast<int>(std::clamp(min_time / 10 / once, alternate ? 3.0 : 1.0, 10000.0));
  }
  auto done = [&](size_t v) { return spent[v] >= min_time && static_cast<int>(samples[v].size()) >= min_runs; };
  while (!std::all_of(samples.begin(), samples.end(), [&](const auto& s) { return done(&s - &samples[0]); })) {
    for (size_t v = 0; v < n; ++v) {
      if (done(v)) continue;
      if (alternate) wait_until_quiet();
      if (before_batch) before_batch(v);
      for (int r = 0; r < batch[v]; ++r) {
        const double t0 = now_s();
        variants[v]();
        const double dt = now_s() - t0;
        samples[v].push_back(dt * 1e3);
        spent[v] += dt;
      }
    }
  }
  std::vector<double> out(n);
  for (size_t v = 0; v < n; ++v) out[v] = median(samples[v]);
  return out;
}

}  // namespace deconvjit::bench
