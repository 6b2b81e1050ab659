#include "bench/peak_probe.hpp"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "bench/timing.hpp"
#include "runtime/cpu.hpp"

#include <xbyak/xbyak.h>

#include <nlohmann/json.hpp>

namespace deconvjit::bench {
namespace {

// A runtime value the compiler cannot see through, so it cannot fold or hoist the FMA chains.
volatile float g_seed = 1.0f;

// Enough independent accumulators to cover FMA latency times the number of FMA pipes (4 cycles x 2 pipes
// on current AMD and Intel cores), so the loop measures throughput, not latency. 24 of the 32 zmm
// registers; 12 of the 16 ymm registers, leaving room for the two multiplicands.
constexpr int kZmmChains = 24;
constexpr int kYmmChains = 12;

__attribute__((target("avx512f"))) float fma_zmm(int64_t iters) {
  const __m512 x = _mm512_set1_ps(g_seed * 1e-7f), y = _mm512_set1_ps(g_seed * 0.5f);
  __m512 acc[kZmmChains];
  for (int c = 0; c < kZmmChains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
  for (int64_t i = 0; i < iters; ++i) {
    // Fully unrolled, or the accumulators live in memory instead of registers.
#pragma GCC unroll 32
    for (int c = 0; c < kZmmChains; ++c) acc[c] = _mm512_fmadd_ps(x, y, acc[c]);
  }
  __m512 sum = acc[0];
  for (int c = 1; c < kZmmChains; ++c) sum = _mm512_add_ps(sum, acc[c]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  float total = 0;
  for (float v : lanes) total += v;
  return total;
}

__attribute__((target("avx2,fma"))) float fma_ymm(int64_t iters) {
  const __m256 x = _mm256_set1_ps(g_seed * 1e-7f), y = _mm256_set1_ps(g_seed * 0.5f);
  __m256 acc[kYmmChains];
  for (int c = 0; c < kYmmChains; ++c) acc[c] = _mm256_set1_ps(static_cast<float>(c));
  for (int64_t i = 0; i < iters; ++i) {
    // Fully unrolled, or the accumulators live in memory instead of registers.
#pragma GCC unroll 32
    for (int c = 0; c < kYmmChains; ++c) acc[c] = _mm256_fmadd_ps(x, y, acc[c]);
  }
  __m256 sum = acc[0];
  for (int c = 1; c < kYmmChains; ++c) sum = _mm256_add_ps(sum, acc[c]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, sum);
  float total = 0;
  for (float v : lanes) total += v;
  return total;
}

// avx512_fp16: an FMA on 32 halves, 64 FLOP an instruction, twice the f32 rate per instruction. Generated
// with Xbyak rather than intrinsics: clang 14 (the sanitizer build) has no _Float16 on x86. The operands
// keep every accumulator a normal half that stops growing once the product is below half its ulp, so
// nothing overflows and no value is subnormal, however long the loop runs. Code W^X like the kernels'.
class PhFmaLoop : public Xbyak::CodeGenerator {
 public:
  PhFmaLoop() : Xbyak::CodeGenerator(4096, Xbyak::DontSetProtectRWE) {
    using namespace Xbyak;
    auto splat = [&](const Zmm& z, uint16_t half) {
      mov(eax, half);
      vpbroadcastw(z, ax);
    };
    splat(zmm30, 0x1419);  // x = 0.001
    splat(zmm31, 0x3800);  // y = 0.5
    for (int c = 0; c < kZmmChains; ++c) splat(Zmm(c), 0x3c00);  // 1.0
    Label loop, done;
    test(rdi, rdi);
    jle(done);
    L(loop);
    for (int c = 0; c < kZmmChains; ++c) vfmadd231ph(Zmm(c), zmm30, zmm31);
    dec(rdi);
    jnz(loop);
    L(done);
    vzeroupper();
    vxorps(xmm0, xmm0, xmm0);
    ret();
    setProtectModeRE();
  }
};

float fma_ph_zmm(int64_t iters) {
  static const PhFmaLoop loop;  // made on first use, which only a CPU with avx512_fp16 reaches
  return loop.getCode<float (*)(int64_t)>()(iters);
}

// avx512_bf16: vdpbf16ps adds the products of 16 pairs of bf16 into 16 floats, 64 FLOP an instruction
// (what the "29 FLOP per cycle per core" counts).
__attribute__((target("avx512bf16,avx512bw,avx512vl,avx512f"))) float dpbf16_zmm(int64_t iters) {
  const __m512 xf = _mm512_set1_ps(g_seed * 1e-7f), yf = _mm512_set1_ps(g_seed * 0.5f);
  const __m512bh x = _mm512_cvtne2ps_pbh(xf, xf), y = _mm512_cvtne2ps_pbh(yf, yf);
  __m512 acc[kZmmChains];
  for (int c = 0; c < kZmmChains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 32
    for (int c = 0; c < kZmmChains; ++c) acc[c] = _mm512_dpbf16_ps(acc[c], x, y);
  }
  __m512 sum = acc[0];
  for (int c = 1; c < kZmmChains; ++c) sum = _mm512_add_ps(sum, acc[c]);
  return _mm512_reduce_add_ps(sum);
}

std::atomic<float> g_sink{0};  // keeps the results alive

// Runs `work` on `threads` threads at once; returns the wall time in seconds.
double run_parallel(int threads, const std::function<void(int)>& work) {
  const double t0 = now_s();
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work, t);
  work(0);
  for (auto& th : pool) th.join();
  return now_s() - t0;
}

// GFLOP/s of `kernel` on `threads` threads: calibrates the iteration count to about a third of `min_time`,
// then keeps the best of three runs (peak means the best the machine can do).
double fma_gflops(float (*kernel)(int64_t), int flops_per_iter, int threads, double min_time) {
  auto time_once = [&](int64_t n) {
    const double t0 = now_s();
    g_sink = g_sink + kernel(n);
    return now_s() - t0;
  };
  int64_t iters = 1 << 14;
  double t = time_once(iters);
  for (; t < 0.01; t = time_once(iters)) iters *= 4;
  iters = static_cast<int64_t>(static_cast<double>(iters) * (min_time / 3) / t) + 1;
  double best = 0;
  for (int trial = 0; trial < 3; ++trial) {
    const double wall = run_parallel(threads, [&](int) { g_sink = g_sink + kernel(iters); });
    best = std::max(best, static_cast<double>(flops_per_iter) * static_cast<double>(iters) * threads / wall * 1e-9);
  }
  return best;
}

// The same on every thread, measured again (a little later, up to three times) while it stays below three
// quarters of `one` (the one-thread figure) per thread: on a shared VM the host may take a core away for a
// moment, and the threads then measure one core's rate. Two of ten bench runs of session 21 read 116-119
// GFLOP/s for two threads against 228-233 in the others, which doubled every "% of the peak" they printed.
double all_threads_gflops(float (*kernel)(int64_t), int flops_per_iter, int threads, double min_time, double one) {
  double best = fma_gflops(kernel, flops_per_iter, threads, min_time);
  for (int retry = 0; retry < 3 && best < 0.75 * one * threads; ++retry) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    best = std::max(best, fma_gflops(kernel, flops_per_iter, threads, min_time));
  }
  return best;
}

__attribute__((target("avx2"))) void triad(float* a, const float* b, const float* c, int64_t n, float s) {
  for (int64_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
}

// Arrays far larger than any last-level cache (32 MiB on this class of machine), so triad streams DRAM.
constexpr int64_t kStreamElements = int64_t{1} << 24;  // 64 MiB per array

struct StreamArrays {
  AlignedFloats a = aligned_floats(kStreamElements), b = aligned_floats(kStreamElements),
                c = aligned_floats(kStreamElements);
};

// GB/s of a triad over the arrays split among `threads` threads; best of three timed rounds.
double triad_gbps(StreamArrays& s, int threads, double min_time) {
  const int64_t chunk = (kStreamElements + threads - 1) / threads;
  auto pass = [&](int t) {
    const int64_t begin = std::min(kStreamElements, chunk * t);
    triad(s.a.get() + begin, s.b.get() + begin, s.c.get() + begin,
          std::min(kStreamElements, begin + chunk) - begin, 3.0f);
  };
  const double once = run_parallel(threads, pass);
  const int passes = std::max(1, static_cast<int>(min_time / 3 / std::max(once, 1e-6)));
  double best = 0;
  for (int trial = 0; trial < 3; ++trial) {
    const double t = run_parallel(threads, [&](int th) {
      for (int p = 0; p < passes; ++p) pass(th);
    });
    best = std::max(best, 3.0 * sizeof(float) * static_cast<double>(kStreamElements) * passes / t * 1e-9);
  }
  return best;
}

}  // namespace

PeakNumbers measure_peak(double min_time) {
  const double t0 = now_s();
  PeakNumbers p;
  p.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  p.has_avx512 = isa_available(Isa::avx512_core);
  if (p.has_avx512) {
    p.zmm_1t = fma_gflops(fma_zmm, kZmmChains * 16 * 2, 1, min_time);
    p.zmm_nt = all_threads_gflops(fma_zmm, kZmmChains * 16 * 2, p.threads, min_time, p.zmm_1t);
  }
  // Both need the OS's zmm state (XCR0), which has_avx512 (isa_available) includes.
  p.has_avx512_fp16 = p.has_avx512 && detail::cpu_has_avx512_fp16();
  if (p.has_avx512_fp16) {
    p.f16_fma_1t = fma_gflops(fma_ph_zmm, kZmmChains * 32 * 2, 1, min_time);
    p.f16_fma_nt = all_threads_gflops(fma_ph_zmm, kZmmChains * 32 * 2, p.threads, min_time, p.f16_fma_1t);
  }
  p.has_avx512_bf16 = p.has_avx512 && detail::cpu_has_avx512_bf16();
  if (p.has_avx512_bf16) {
    p.bf16_dot_1t = fma_gflops(dpbf16_zmm, kZmmChains * 16 * 2 * 2, 1, min_time);
    p.bf16_dot_nt = all_threads_gflops(dpbf16_zmm, kZmmChains * 16 * 2 * 2, p.threads, min_time, p.bf16_dot_1t);
  }
  if (isa_available(Isa::avx2)) {
    p.ymm_1t = fma_gflops(fma_ymm, kYmmChains * 8 * 2, 1, min_time);
    p.ymm_nt = all_threads_gflops(fma_ymm, kYmmChains * 8 * 2, p.threads, min_time, p.ymm_1t);
  }
  StreamArrays s;
  // First touch from the threads that will stream the data, and fault every page in before timing.
  const int64_t chunk = (kStreamElements + p.threads - 1) / p.threads;
  run_parallel(p.threads, [&](int t) {
    const int64_t begin = std::min(kStreamElements, chunk * t);
    const int64_t end = std::min(kStreamElements, begin + chunk);
    std::fill(s.a.get() + begin, s.a.get() + end, 0.0f);
    std::fill(s.b.get() + begin, s.b.get() + end, 1.0f);
    std::fill(s.c.get() + begin, s.c.get() + end, 2.0f);
  });
  p.bw_1t = triad_gbps(s, 1, min_time);
  p.bw_nt = triad_gbps(s, p.threads, min_time);
  p.seconds = now_s() - t0;
  return p;
}

const PeakNumbers& machine_peak(double min_time) {
  static std::once_flag once;
  static PeakNumbers peak;
  std::call_once(once, [&] { peak = measure_peak(min_time); });
  return peak;
}

namespace {
double scaled(double one, double all, int threads, int hw) {
  if (threads <= 1) return one;
  if (threads >= hw) return all;
  return std::min(all, one * threads);
}
}  // namespace

double peak_gflops(const PeakNumbers& peak, Isa isa, int threads, DType accumulation, bool bf16_pairs) {
  if (bf16_pairs && isa == Isa::avx512_core && peak.has_avx512_bf16)
    return scaled(peak.bf16_dot_1t, peak.bf16_dot_nt, threads, peak.threads);
  if (accumulation == DType::f16 && isa == Isa::avx512_core && peak.has_avx512_fp16)
    return scaled(peak.f16_fma_1t, peak.f16_fma_nt, threads, peak.threads);
  if (isa == Isa::avx512_core && peak.has_avx512) return scaled(peak.zmm_1t, peak.zmm_nt, threads, peak.threads);
  return scaled(peak.ymm_1t, peak.ymm_nt, threads, peak.threads);
}

double peak_bandwidth(const PeakNumbers& peak, int threads) {
  return scaled(peak.bw_1t, peak.bw_nt, threads, peak.threads);
}

std::string peak_json(const PeakNumbers& p) {
  nlohmann::ordered_json out;
  out["threads"] = p.threads;
  out["avx512"] = p.has_avx512;
  out["zmm_fma_gflops_1t"] = p.zmm_1t;
  out["zmm_fma_gflops_nt"] = p.zmm_nt;
  out["avx512_fp16"] = p.has_avx512_fp16;
  out["zmm_f16_fma_gflops_1t"] = p.f16_fma_1t;
  out["zmm_f16_fma_gflops_nt"] = p.f16_fma_nt;
  out["avx512_bf16"] = p.has_avx512_bf16;
  out["zmm_bf16_dot_gflops_1t"] = p.bf16_dot_1t;
  out["zmm_bf16_dot_gflops_nt"] = p.bf16_dot_nt;
  out["ymm_fma_gflops_1t"] = p.ymm_1t;
  out["ymm_fma_gflops_nt"] = p.ymm_nt;
  out["triad_gbps_1t"] = p.bw_1t;
  out["triad_gbps_nt"] = p.bw_nt;
  out["seconds"] = p.seconds;
  return out.dump();
}

}  // namespace deconvjit::bench
