// Planning, the zero columns around the source (Plan::halo_left/right, TuningHints::x_halo): where a row's
// border pixels, which see fewer taps than the rest of their phase, are better run as whole blocks over
// zeros than in narrow blocks of their own.
#include <algorithm>
#include <array>

#include "runtime/int_math.hpp"
#include "runtime/plan.hpp"
#include "runtime/schedule.hpp"

namespace deconvjit::detail {
namespace {

// The inputs [lo, hi] that output o's phase taps reach before any clipping to the input row; false when
// the phase has no taps. (The phase's first tap is axis_taps's: phase_first_tap.)
bool full_tap_range(const Axis& x, int64_t o, int64_t& lo, int64_t& hi) {
  const int64_t shifted = o + x.pad_begin;
  const int64_t r = shifted - floor_div(shifted, x.stride) * x.stride;
  const int64_t k = phase_first_tap(x, r);
  if (k < 0) return false;
  hi = (shifted - k * x.dilation) / x.stride;  // exact: k is in o's phase
  lo = hi - (x.kernel - 1 - k) / x.tap_k_step * x.tap_i_step;
  return true;
}

// Without a halo, a row's border pixels with a tap pattern of their own run in blocks of their own, a few
// pixels wide: each weight vector they load serves one to three pixels (rnd08 of docs/PERFORMANCE.md, a
// 7x7 input under a 7x7 kernel at stride 1: every pixel a border pixel, 0.088 ms; with the halo one block
// of 7, 0.047). Counts, over a row: the FMAs of its pixels (useful), those in border runs of fewer than 4
// pixels with more than one tap each (narrow), the FMAs every pixel would do with the halo (full), and the
// runs of fewer than 4 pixels short of their whole phase, whatever their taps (short_runs).
struct BorderRuns {
  int64_t useful = 0, narrow = 0, full = 0, short_runs = 0;
};

BorderRuns count_border_runs(const Axis& x, int64_t left, int64_t right) {
  Axis padded = x;
  padded.in += left + right;
  padded.pad_begin += left * x.stride;
  BorderRuns b;
  for (int64_t r = 0; r < std::min(x.stride, x.out); ++r) {
    int64_t run = 0, run_fmas = 0, prev_count = -1, prev_i0 = 0, prev_k0 = 0;
    const int64_t phase = (x.out - r + x.stride - 1) / x.stride;
    auto close = [&] {  // (runs of one tap per pixel cost little: fcn16s_siftflow_sem_upscore2 NCX 0.8x)
      if (run > 0 && run < 4 && run_fmas > run) b.narrow += run_fmas;
      if (run > 0 && run < 4 && run < phase) ++b.short_runs;
    };
    for (int64_t o = r; o < x.out; o += x.stride) {
      const AxisTaps t = axis_taps(x, o);
      b.useful += t.count;
      b.full += axis_taps(padded, o).count;
      const bool same = t.count == prev_count && t.k0 == prev_k0 && (t.count == 0 || t.i0 == prev_i0 + 1);
      if (!same) {
        close();
        run = run_fmas = 0;
      }
      ++run;
      run_fmas += t.count;
      prev_count = t.count;
      prev_i0 = t.i0;
      prev_k0 = t.k0;
    }
    close();
  }
  return b;
}

// count_border_runs walks every output of the row (19150 in holdout s229 ho04, about 1.4 ms), which the
// tuner's enumeration of one problem's plans (hundreds of thousands) paid for each: 10 minutes for ho04. A
// pure function of the row, so the last answer of each thread is kept.
BorderRuns border_runs(const Axis& x, int64_t left, int64_t right) {
  using Key = std::array<int64_t, 10>;
  const Key key{x.in, x.kernel, x.stride, x.dilation, x.pad_begin, x.out, x.tap_k_step, x.tap_i_step, left, right};
  thread_local Key last{};
  thread_local BorderRuns runs;
  thread_local bool known = false;
  if (!known || key != last) runs = count_border_runs(x, left, right), last = key, known = true;
  return runs;
}

// The halo pays where runs of fewer than 4 pixels hold at least 8% of the row's FMAs and its zero columns
// add no more FMAs than the row has: a narrow run's weight vectors each serve one to three pixels (and are
// read again for every run, which a large weight tensor pays from memory). Measured: 3 input columns under
// 4 taps, 60% more, 1.2-2.0x; 4 columns under a 7-wide kernel, 75% more, 1.02-1.62x in all three types on
// both ISAs but the memory-bound ho13's AVX2 f32/f16 rows (0.92-1.08; holdout s71 ho22 and ho13, 24 and 768
// output channels; docs/data/halo_wider_zen4_2t.txt); 3 columns under 7 taps, 133% more, 0.71-0.96x (s37
// ho45 and ho25); one column under 4 taps, 300% more, 0.85x (dcgan64_g1_b1). Before the bound moved from
// two thirds to one: every layer of the suites and of 88 random ones whose default it changed, 27, all
// faster (1.04-2.13x).
bool halo_widens_blocks(const Axis& x, int64_t left, int64_t right) {
  const BorderRuns b = border_runs(x, left, right);
  return b.useful > 0 && b.narrow * 100 >= 8 * b.useful && b.full - b.useful <= b.useful;
}

}  // namespace

// Zero columns that make every output pixel of a phase see all of the phase's taps: the first output of
// each phase reaches furthest left, the last furthest right. (K == s without pads or output padding
// needs none.)
void choose_halo(Plan& pl, const TuningHints& h) {
  Axis& x = pl.axes[2];
  int64_t left = 0, right = 0, lo = 0, hi = 0;
  for (int64_t o = 0; o < std::min(x.stride, x.out); ++o)
    if (full_tap_range(x, o, lo, hi)) left = std::max(left, -lo);
  for (int64_t o = std::max<int64_t>(0, x.out - x.stride); o < x.out; ++o)
    if (full_tap_range(x, o, lo, hi)) right = std::max(right, hi - (x.in - 1));
  const bool possible = pl.algorithm != Algorithm::depthwise && pl.layout != LayoutPath::ncx_in_kernel &&
                        pl.layout != LayoutPath::ncx_src_in_place && left + right > 0;
  check_hint(h.x_halo != 1 || possible, "x_halo needs a family other than depthwise, a source that "
                                        "is copied, and an x border");
  // The halo costs a copy of the source and FMAs on zeros; it pays only when the arithmetic per source
  // element dwarfs the copy and the halo is small next to the row (measured: +1.4% on pix2pix_up, -6%
  // on fsrcnn_x2, -11% on ov_spec_ex1, one core).
  const double flops_per_src = 2.0 * pl.oc_per_group * x.kernel * pl.axes[0].kernel * pl.axes[1].kernel;
  // Nor on rows so short that the zero columns outnumber half the real ones (pix2pix_innermost_up, a 1x1
  // input: 2 of 3 columns zero; direct without the halo 0.03 ms, with it 0.09).
  // Nor when blocks run across images: a block then holds one pixel of several images, whose taps are the
  // same whatever the border, so the zero columns would only add FMAs (dcgan_g2, 4 columns and 2 of halo:
  // tuned without it 1.2x faster, as dcgan32_g2_b64 1.23x, dcgan64_g3_b16 1.15x, lsgan_d1_b16 1.13x).
  // And only where it merges some border run of fewer than 4 pixels: with runs of 4+ (a dilation of 4 or
  // more) it adds FMAs on zeros and merges nothing (drn_c26_bwd_d4_b4 NXC, runs of 4, 10.5% of its FMAs
  // on zeros: 1.12x without it on Zen 4, 2 threads; docs/data/halo_off_nxc_zen4_2t.jsonl).
  const bool small = flops_per_src >= 2048 && 4 * (left + right) <= x.in + 8 && 2 * (left + right) <= x.in &&
                     border_runs(x, left, right).short_runs > 0;
  // Or where it merges narrow border runs (halo_widens_blocks), on 768+ FLOPs per source element (a 5x5
  // input, 3x3 kernel, 16 channels: 288 FLOPs, 0.78x). Not in gemm, whose folded x has K/s taps (2, mostly):
  // its border runs are a pixel of one tap, cheap without the halo (fcn8s_upscore2 0.71x, 0.73-0.79x on
  // fcn16s_siftflow_sem_upscore2).
  const bool merges = flops_per_src >= 768 && pl.algorithm != Algorithm::gemm && halo_widens_blocks(x, left, right);
  const bool by_default = !pl.block_over_batch && (small || merges);
  const bool wanted = h.x_halo == 1 || (h.x_halo == -1 && by_default);
  if (!possible || !wanted) return;
  pl.halo_left = left;
  pl.halo_right = right;
  x.in += left + right;
  x.pad_begin += left * x.stride;
}

// The halo lets a row run in whole blocks, but its border blocks then do FMAs on zeros: a 8x8 input under
// a 7x7 kernel, 21% of all of them. Edge blocks skip those, each border block compiled with its taps
// unrolled. The direct and gemm families (whose tap loop runs one reduction per tap; fused x taps would
// need their own), with blocks along x.
bool edge_blocks_possible(const Plan& pl) {
  return (pl.algorithm == Algorithm::direct || pl.algorithm == Algorithm::gemm) && pl.has_halo() &&
         !pl.block_over_batch && pl.fused_x_taps == 0;
}

void choose_edge_blocks(Plan& pl, const TuningHints& h) {
  if (!edge_blocks_possible(pl) || h.edge_blocks == 0) return;  // a refused hint: check_family_hints
  pl.edges = find_edge_blocks(pl);
}

}  // namespace deconvjit::detail
