// This machine's measured limits: FMA throughput (zmm and ymm; the f16 FMA and bf16 dot product on zmm
// where the CPU has them) and memory bandwidth, on 1 thread and on all hardware threads. `bench` divides by these to print %peak and %bw, so the percentages describe this
// machine as it runs now (clock, SMT, VM), not a datasheet.
#pragma once

#include <string>

#include "deconvjit/deconvjit.hpp"

namespace deconvjit::bench {

struct PeakNumbers {
  int threads = 1;           // hardware threads used for the "n" numbers
  bool has_avx512 = false;   // zmm numbers are 0 when false
  double zmm_1t = 0, zmm_nt = 0;  // GFLOP/s (an FMA counts 2)
  // The 16-bit types' arithmetic, measured only where the CPU has it (0 otherwise): vfmadd231ph on 32
  // halves (avx512_fp16) and vdpbf16ps on 16 pairs of bf16 (avx512_bf16), both on zmm.
  bool has_avx512_fp16 = false, has_avx512_bf16 = false;
  double f16_fma_1t = 0, f16_fma_nt = 0;
  double bf16_dot_1t = 0, bf16_dot_nt = 0;
  double ymm_1t = 0, ymm_nt = 0;
  double bw_1t = 0, bw_nt = 0;    // GB/s, STREAM triad convention (24 bytes per element)
  double seconds = 0;             // how long measuring took
};

// Measures now; each number (six, up to ten with the 16-bit types) gets about `min_time` seconds.
PeakNumbers measure_peak(double min_time);
// The fields `deconvjit peak --json` prints (and the Python module's peak() returns), as one JSON object.
std::string peak_json(const PeakNumbers& p);

// Measured once per process (the first caller's `min_time` wins), then reused.
const PeakNumbers& machine_peak(double min_time = 0.1);

// Peak GFLOP/s for kernels of `isa` running on `threads` threads: the 1-thread figure scaled by the thread
// count, never above the all-threads figure. The f32 FMA's, also for bf16 and f16 data (their kernels
// widen to f32 and use it); the f16 FMA's for f16 accumulation, which runs on it.
// The peak a kernel's arithmetic can reach: f32 FMA (zmm or ymm), f16 FMA for sums in f16, and for bf16
// kernels that reduce channel pairs (vdpbf16ps, the plan's ic_pairs) the bf16 dot product's.
double peak_gflops(const PeakNumbers& peak, Isa isa, int threads, DType accumulation = DType::f32,
                   bool bf16_pairs = false);
double peak_bandwidth(const PeakNumbers& peak, int threads);

}  // namespace deconvjit::bench
