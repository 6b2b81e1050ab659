// Planning the register tile of the row families (direct, gemm, depthwise, dot): pixels x channel vectors
// within the register budget, the dot family's tile, and the accumulator sets that hide FMA latency.
#include <algorithm>
#include <string>

#include "runtime/cpu.hpp"
#include "runtime/int_math.hpp"
#include "runtime/plan.hpp"

namespace deconvjit::detail {
namespace {

// Register budget: accumulators ur_w*nv, the weight vectors kept in registers, broadcast registers.
int max_ur_w(Isa isa, int nv, int weight_regs) {
  const int bcast = isa == Isa::avx512_core ? 2 : 1;
  return (vector_registers(isa) - weight_regs - bcast) / nv;
}

// AVX2 f16: whether the kernel will read a source widened to f32 (widen_src_pays' bound, or the hint), so
// that its broadcasts are plain f32 loads. (Asked before choose_widen_src; f16 has no channel pairs and no
// reduction split, so the two agree.)
bool f16_source_widened(const Plan& pl, const TuningHints& h) {
  const int64_t taps = pl.axes[0].kernel * pl.axes[1].kernel * pl.axes[2].kernel;
  const bool by_default = h.widen_src < 0 && widening_repays_on_avx2(pl.oc_per_group, taps);
  return widen_src_possible(pl) && (h.widen_src == 1 || by_default);
}

// f16 on AVX2 with broadcasts from the source, each element converted (vpbroadcastw + vcvtph2ps, or the
// slot's widening store and reloads): a block of four vectors feeds each converted element to four FMAs
// instead of two, in 2 pixels (8 accumulators, 4 weights and a broadcast fill the 16 registers). Not where
// the source is widened once instead (f16_source_widened), nor past whole blocks of four. Zen 4, 2 threads,
// in one process, 2x4 against 6x2: 1.11-1.22x on all 10 such NXC suite and holdout layers (linknet_final
// and hifigan_up4 1.15x), 0.97 at 40 channels (5 vectors), 0.77-0.93 where the source is widened; over the
// 38 layer x layout rows the rule changes (NCX through the row buffer too) 1.07-1.38x on 37, 0.96 on one of
// 85 us (docs/data/f16_avx2_wide_block_zen4_2t.txt).
bool f16_avx2_wide_block(const Plan& pl, const TuningHints& h, int64_t n_vec) {
  return pl.isa == Isa::avx2 && pl.dtype == DType::f16 && pl.algorithm == Algorithm::direct && n_vec % 4 == 0 &&
         !f16_source_widened(pl, h);
}

// Products summed into each output element: the reduction's channels times the taps of a phase.
int64_t products_per_output(const Plan& pl) {
  int64_t taps = 1;
  for (const Axis& a : pl.axes) taps *= ceil_div(a.kernel, a.tap_k_step);  // (a phase's taps, as max_x_taps)
  return pl.ic_per_group * taps;
}

// AVX2 FMAs take no broadcast operand, so the 6 x 2 tile spends 6 broadcasts and 2 weight loads on 12
// FMAs per input channel: 20 instructions per 6 cycles of FMAs, which left the big layers at 75-90% of
// the FMA peak and sensitive to the host (Zen 4: 94% in one minute, 77% in another; the AVX-512 tiles,
// 10 instructions per 24 zmm FMAs, held 94-96%). The 3 x 4 tile with one weight vector read by the FMAs
// issues 3 broadcasts, 3 loads and 12 FMAs (18), and each broadcast feeds four FMAs. It reads twice the
// weight bytes per FMA, though: where a block's weights for a phase (products per output x 4 vectors)
// pass 512 KB they come from beyond L2 and it lost (sbl_r50_256_deconv1_b16, 1 MB: 0.92-0.94x); under
// 16 KB the reduction is short and the narrower block's overhead shows (NCX 0.77-0.97x); a tail block
// (vectors not a multiple of 4) and blocks across images lost too. Zen 4, 2 threads, f32, default vs
// the hybrid tile on all 631 suite and holdout rows (NXC and NCX) of the direct and gemm families with 32+
// output channels: the 316 this takes 1.028x (71 above 1.05, up to 1.2-1.5: stylegan2_up_r512 1.11-1.18,
// nnunet3d_up128_b2 1.13-1.20, maskrcnn_mask_b100 NXC 1.19; 7 below 0.95), the rest 0.997
// (docs/data/weight_regs_avx2_sweep_zen4_2t.jsonl). bf16 (each broadcast widened by a shift) on the first 80
// of those rows: 1.026x, 3 below 0.97 (docs/data/weight_regs_avx2_bf16_rule_rows_zen4_2t.jsonl). Not f16
// that converts each broadcast, whose blocks of four vectors already share it (f16_avx2_wide_block): 1.014x
// with 18 of 76 below 0.97 (docs/data/weight_regs_avx2_sweep_f16_partial_zen4_2t.jsonl); f16 with a widened
// source broadcasts f32 and takes f32's tiles (widen_src_pays has the figures of the two together).
bool hybrid_tile_pays(const Plan& pl, const TuningHints& h, int64_t n_vec) {
  const int64_t block_weight_bytes = products_per_output(pl) * 4 * pl.lanes * 4;
  const bool f32_broadcasts = pl.dtype != DType::f16 || f16_source_widened(pl, h);
  return n_vec % 4 == 0 && !pl.block_over_batch && f32_broadcasts && block_weight_bytes >= (16 << 10) &&
         block_weight_bytes < (512 << 10);
}

}  // namespace

int max_x_taps(const Plan& pl) {
  return static_cast<int>(ceil_div(pl.axes[2].kernel, pl.axes[2].tap_k_step));
}

// The dot family's fused x taps (jit/deconv_dot.cpp, emit_fused_x) load each source vector once for all
// the taps of its phase that meet it, where the tap loop loads it once per tap: on AVX-512 f16 that is
// one vcvtph2ps per FMA before. They need a register per tap and output channel, so the block narrows.
// Zen 4, 2 threads, against the tap loop on every suite layer the dot family takes (docs/data/
// dot_fused_x_zen4_2t.txt): with 1-2 output channels and 2+ taps in every x phase, AVX-512 f16 1.11-1.79x
// (fsrcnn_x2 NXC 5.88 -> 3.45 ms), f32 1.00-1.44x, AVX2 f32 0.99-1.30x. With 3 channels the block narrows
// to 7 pixels (AVX2: 2) and lost (0.93-1.01x; AVX2 0.65-0.92x); where a phase has one tap little is saved
// (gcnet_l37_crop, kernel 3 at stride 2, 0.91x f32 then; 1.01x in session 14); a block under 8
// accumulators waits on FMA latency (wavegan_up5_b16 on AVX2, 7 pixels: 0.91x f16). AVX2 f16 gained too
// little to take (0.93-1.18x, geomean 1.04; on the holdout sets 0.88-1.19x, 1.03).
// Where a phase has one tap (kernel 3 at stride 2) the fused pass still loads each source vector once for
// the phases with two, and pays where those loads cost: where the block keeps its width and the source it
// reads per tap passes 4 KB (an eighth of L1, whose lines the taps' other rows evict). 14 layers drawn for
// it (1-2 output channels, 16-512 input channels, 1-D to 3-D; docs/data/dot_fuse_mixed_grid_zen4_2t.txt):
// AVX-512 f32 1.08-1.20x from 4 KB with one output channel, 1.03x below (16-32 channels), 1.00-1.07x with
// two (the block narrows 14 -> 12); AVX2 1.06-1.15x from 4 KB with one, 0.95-1.01x with two (6 -> 4).
// Holdout s97 ho29 (320 -> 1, 3x3x3, 20 KB) 1.11-1.13x, f16 1.23x; gcnet_l37_crop (32 -> 1, 2 KB) 0.88-1.02x.
bool dot_fusion_pays(const Plan& pl, int ur) {
  const int64_t oc = pl.oc_per_group;
  const bool every_phase = pl.axes[2].kernel / pl.axes[2].tap_k_step >= 2;
  const bool loads_cost = ur >= dot_plain_ur(pl) && ur * pl.ic_per_group * pl.src_elem_bytes() >= 4096;
  return oc <= 2 && max_x_taps(pl) >= 2 && (every_phase || loads_cost) && ur * oc >= 8 &&
         !(pl.isa == Isa::avx2 && pl.dtype == DType::f16);
}

// The dot family's block without fused taps: as many pixels as registers allow next to C_OUT weight
// vectors and the source vector (16 on AVX-512, 12 on AVX2 at most), no more than a row's phase holds.
int dot_plain_ur(const Plan& pl) {
  const int oc = static_cast<int>(pl.oc_per_group);
  const int fit = (vector_registers(pl.isa) - oc - 1) / oc;
  const Axis& x = pl.axes[2];
  const int64_t extent = pl.block_over_batch ? pl.batch : ceil_div(x.out, x.stride);
  const int cap = std::min(fit, pl.isa == Isa::avx512_core ? 16 : 12);
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(cap, extent)));
}

// The block fused x taps would take (asked of fuse_x_possible): the plain one less a register per tap.
Plan dot_fused_block(const Plan& pl) {
  const int oc = static_cast<int>(pl.oc_per_group);
  Plan fused = pl;
  fused.oc_vectors = oc;
  fused.ur_w = std::min(dot_plain_ur(pl), (vector_registers(pl.isa) - oc - 1) / oc - max_x_taps(pl));
  return fused;
}

// Whether choose_dot_tile will fuse the row's x taps, asked before the plan blocks over images (which do
// not fuse): as a fuse_x_taps hint says, else as dot_fusion_pays says of the block (a ur_w hint's, or the
// fused one). bf16 is left out: the channel pairs (avx512_bf16) and even/odd halves (2+ vectors of channels)
// chosen after this do not fuse, and where neither applies the rule was not measured.
bool dot_row_fuses(const Plan& pl, const TuningHints& h) {
  Plan fused = dot_fused_block(pl);
  if (h.ur_w) fused.ur_w = h.ur_w;
  const bool possible = fused.ur_w >= 1 && fuse_x_possible(fused);
  if (h.fuse_x_taps >= 0) return possible && h.fuse_x_taps == 1;
  return pl.dtype != DType::bf16 && possible && dot_fusion_pays(pl, fused.ur_w);
}

// dot: accumulators ur_w * C_OUT, C_OUT weight vectors, one input vector (fused x taps: and the taps'
// weights).
void choose_dot_tile(Plan& pl, const TuningHints& h) {
  const int oc = static_cast<int>(pl.oc_per_group);
  check_hint(!h.oc_vectors || h.oc_vectors == oc, "the dot family holds all output channels");
  const int fit = (vector_registers(pl.isa) - oc - 1) / oc;
  int ur = dot_plain_ur(pl);
  const Plan fused = dot_fused_block(pl);
  const bool wanted = h.fuse_x_taps == 1 || (h.fuse_x_taps < 0 && dot_fusion_pays(pl, fused.ur_w));
  if (!h.ur_w && fused.ur_w >= 1 && fuse_x_possible(fused) && wanted) ur = fused.ur_w;
  if (h.ur_w) {
    check_hint(h.ur_w >= 1 && h.ur_w <= fit, "ur_w " + std::to_string(h.ur_w) +
                                                 " does not fit the register file");
    ur = h.ur_w;
  }
  check_hint(h.ic_unroll <= 1, "the dot family has no input-channel unroll (it steps whole vectors)");
  pl.ur_w = ur;
  pl.oc_vectors = oc;
  pl.ic_unroll = 1;
  // Pairs: a vector holds 2 * lanes bf16 channels (vdpbf16ps), and the tail counts channels.
  const int per_vector = pl.lanes * (pl.ic_pairs ? 2 : 1);
  pl.ic_vectors = ceil_div(pl.ic_per_group, per_vector);
  pl.ic_tail_lanes = static_cast<int>(pl.ic_per_group % per_vector);
}

const char* const kWeightRegsNeeds = "weight_regs needs the direct or gemm family on AVX2";

bool weight_regs_possible(const Plan& pl) {
  return pl.isa == Isa::avx2 && (pl.algorithm == Algorithm::direct || pl.algorithm == Algorithm::gemm);
}

void choose_tile(Plan& pl, const TuningHints& h, int64_t n_vec) {
  const bool z = pl.isa == Isa::avx512_core;
  int nv = z ? 4 : 2;
  if (n_vec < nv) nv = static_cast<int>(n_vec);
  // Channel vectors that are a multiple of 3 but not of the usual block (4 on AVX-512, 2 on AVX2) take blocks
  // of 3, which leave no tail block. On AVX2 the tail was one vector broadcasting each source element for a
  // single FMA (24 channels per group in a G=4 3D layer, 2 threads: 2.08 -> 1.26 ms).
  if (n_vec % nv != 0 && n_vec % 3 == 0) nv = 3;
  // AVX2 gemm: 4 pixels x 3 vectors load 7 registers per 12 FMAs instead of 8 (6 x 2), and gemm's channel
  // runs are long. One core, ms: unet_up1 26.7 -> 23.5, nnunet3d_tconv 19.5 -> 17.8, maskrcnn_mask
  // 15.4 -> 14.3, fcn8s_upscore2 0.040 -> 0.038. (The direct and depthwise families measured mixed to
  // worse: hifigan_up4 2.2 -> 2.7, dla_up_dw256 0.028 -> 0.043.)
  if (!z && pl.algorithm == Algorithm::gemm && n_vec >= 3) nv = 3;
  // But in f32 where each output sums at most 64 products the stores set the pace, and a block of 3 ymm
  // vectors (1.5 lines) leaves lines half written for the next block: 2 pixels x 4 vectors write whole
  // lines. Zen 4, 2 threads: 76 gemm layers drawn for it (8-64 input channels, 16-80 MB of output)
  // 0.96-2.36x (docs/data/gemm_tile2x4_avx2_sweep_zen4_2t.jsonl); the 39 suite and holdout rows it moves
  // 1.10x geomean, 0.78-1.89 (enet_fullconv 1.78x). The three losses (0.78-0.93: 19 output channels over
  // 32 inputs, 24 over 24 at stride 3) end in a block of one vector, but so do two large gains (20 channels
  // over 16-20 inputs, 1.22-1.78x): left as they are. 64 is the top of the range measured, not a measured
  // crossover. bf16 and f16, whose vectors are half as many bytes, lost (0.96x, 1.07x with 9 of 39 below
  // 0.95), so keep 3 (docs/data/gemm_tile2x4_avx2_changed_zen4_2t.txt).
  if (!z && pl.algorithm == Algorithm::gemm && pl.dtype == DType::f32 && n_vec >= 4 && products_per_output(pl) <= 64)
    nv = 4;
  if (f16_avx2_wide_block(pl, h, n_vec)) nv = 4;
  // (not where a tile hint fixes the block: the hints keep the meaning they had without this tile)
  const bool hybrid = !h.oc_vectors && !h.ur_w && weight_regs_possible(pl) && hybrid_tile_pays(pl, h, n_vec);
  if (hybrid) nv = 4;
  if (h.oc_vectors) nv = h.oc_vectors;
  int wr = hybrid && nv == 4 ? 3 : nv;
  if (h.weight_regs) {
    check_hint(weight_regs_possible(pl), kWeightRegsNeeds);
    check_hint(h.weight_regs >= 1 && h.weight_regs <= nv, "weight_regs " + std::to_string(h.weight_regs) +
                                                              " must be in [1, oc_vectors " + std::to_string(nv) + "]");
    wr = h.weight_regs;
  }
  check_hint(nv >= 1 && max_ur_w(pl.isa, nv, wr) >= 1, "oc_vectors " + std::to_string(nv) +
                                                            " does not fit the register file");
  int ur = std::min(max_ur_w(pl.isa, nv, wr), z ? 28 : 12);
  if (nv == 4 && z) ur = 6;  // 24 accumulators leave room for weights and two broadcasts
  // Two vectors: 8 pixels beat the 14 that fit (one core, ms): linknet_final 6.02 vs 6.64, hifigan_up4
  // 1.23 vs 1.34, fcn32s_upscore (NCX) 11.8 vs 12.5.
  if (nv == 2 && z) ur = 8;
  const Axis& x = pl.axes[2];
  const int64_t extent = pl.block_over_batch ? pl.batch : ceil_div(x.out, x.stride);
  ur = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(ur, extent)));
  if (h.ur_w) {
    check_hint(h.ur_w >= 1 && h.ur_w <= max_ur_w(pl.isa, nv, wr),
               "ur_w " + std::to_string(h.ur_w) + " with " + std::to_string(nv) +
                   " vectors does not fit the register file");
    ur = h.ur_w;
  }
  pl.oc_vectors = nv;
  pl.weight_regs = wr;
  pl.ur_w = ur;
  // f16 on AVX-512 widens a pixel's unrolled channels with one instruction into a stack slot
  // (jit/deconv_direct.cpp): at two vectors and 4 channels that is 2 uops per 8 FMAs, halved at 8
  // channels. Measured 1.06-1.18x on all such suite layers, NXC and NCX (2 threads, linknet_final 1.15,
  // densepose_index_uv_b8 1.18; docs/data/f16_unroll8_sweep_*_2t.jsonl); worse at one vector
  // (ov_spec_ex1 0.91) and four (sbl_deconv1 0.97); f32 gains nothing (0.97-1.00).
  const bool unroll8 = pl.dtype == DType::f16 && z && nv == 2 && pl.algorithm != Algorithm::depthwise &&
                       pl.layout != LayoutPath::ncx_src_in_place && pl.ic_per_group >= 8;
  pl.ic_unroll = h.ic_unroll ? h.ic_unroll : static_cast<int>(std::min<int64_t>(unroll8 ? 8 : 4, pl.ic_per_group));
  check_hint(pl.ic_unroll >= 1 && pl.ic_unroll <= 64, "ic_unroll must be in [1, 64]");
}

int accumulator_sets(const Plan& pl, int w, int nv) {
  const int bcast = pl.isa == Isa::avx512_core ? 2 : 1;
  int sets = std::min(pl.ic_unroll, static_cast<int>(ceil_div(pl.acc_chains, w * nv)));
  const int weights = weights_in_registers(pl, nv);
  while (sets > 1 && sets * w * nv + weights + bcast > vector_registers(pl.isa)) --sets;
  return std::max(sets, 1);
}

// A block of w pixels x nv vectors chains each accumulator's FMAs: with fewer than 8 accumulators (FMA
// latency 4 x 2 pipes on every CPU we target) it waits on them. Narrow blocks (a border pixel, a row's
// last pixels; a tile of one vector of few pixels) cycle the unrolled input channels over several
// accumulator sets instead: densepose_ann_index_b8 NXC (borders of one pixel, 15 channels) 4.9 -> 4.6 ms.
// The depthwise step reduces one channel per tap, dot its own way: one set there.
void choose_acc_chains(Plan& pl) {
  const bool direct = pl.algorithm == Algorithm::direct || pl.algorithm == Algorithm::gemm;
  pl.acc_chains = direct ? 8 : 1;
}

// A block of w pixels reads, step by step, a few channels of each: w lines a pixel apart side by side, then
// the next line of each. From the caches that costs nothing; streamed from DRAM the hardware prefetchers
// keep up with a few such streams only. Zen 4, one thread, dot 1x1 96 -> 1 over 2.3-92 MB: 55-63 GB/s with
// 12 pixels in L3 against 45-55 with one, but from 23 MB 10-12 GB/s against 25-32 (software prefetch of the
// next blocks into L1 or L2, 1-8 blocks ahead, won back half of it at best). So where the kernel streams its
// source (16 MiB or more, half the L3), each axis has one tap per phase (kernel <= stride; dot: kernel 1)
// and the block's source spans 1 KB or more (under that it is near enough to address order), the block of
// a row (not one across images, whose pixels lie an image apart) narrows:
// - dot (a vector of each pixel per step): one pixel, in address order. Against the widest block, 2 threads,
//   NXC (docs/data/dot_stream_ur1_zen4_2t.txt; identical kernels there differ by up to 0.82-1.27x): 1-4
//   outputs of 32-256 channels, f32 from 22 MB 1.10-2.66x (holdout s229 ho47, 96 -> 1 over 88 MiB: AVX2 4.8
//   -> 1.8 ms, oneDNN 3.2; s151 ho33 1.65-1.76x), bf16 and f16 from 39 MiB 1.40-3.57x. A 16-bit pixel on
//   AVX2 converts each vector in its one accumulation chain, and at 16.5 MiB lost (0.73-0.80x; AVX-512
//   1.31-1.64x): there from 32 MiB. With more taps per phase one pixel lost (2x2 stride 2 0.76-0.95x).
// - direct and gemm in f32 (4 channels of each pixel per step): at most 6 pixels (docs/data/
//   gemm_stream_ur6_zen4_2t.txt). Drawn 1x1 and 2x2 stride 2 layers of 22-117 MB: blocks of 12 and 28
//   pixels of one vector 1.14-1.70x at 6, 8 of two 1.05-1.07x; AVX2's 6 x 2 stays (at 4: 0.84-1.21x). The
//   9 f32 suite and holdout rows it moves 1.02-2.34x (s131 ho09 2.34x, where the narrower block also takes
//   prefetch_src; s97 ho02 1.54-2.20x), and col's inner GEMM on 2 more 1.09-1.23x. 16-bit rows measured
//   0.88-1.02x and keep their blocks, as does s151 ho41 (a block of 912 bytes, 0.94x).
int streamed_block_cap(const Plan& pl) {
  constexpr int64_t kMinSrcBytes = int64_t{16} << 20, kMinSpanBytes = 1024;
  const auto& a = pl.axes;
  const int64_t src_bytes = pl.batch * a[0].in * a[1].in * a[2].in * pl.src_channels * pl.src_elem_bytes();
  if (src_bytes < kMinSrcBytes || pl.widen_src || pl.band_rows > 0 || pl.block_over_batch) return 0;
  const int64_t span = pl.ur_w * pl.src_pix_stride * pl.src_elem_bytes();  // the block's source, first to last
  if (span < kMinSpanBytes) return 0;
  if (pl.algorithm == Algorithm::dot) {
    const bool one_tap = a[0].kernel == 1 && a[1].kernel == 1 && a[2].kernel == 1;
    const bool converts = pl.isa == Isa::avx2 && pl.dtype != DType::f32;
    return one_tap && (!converts || src_bytes >= 2 * kMinSrcBytes) ? 1 : 0;
  }
  const bool one_per_phase = a[0].kernel <= a[0].stride && a[1].kernel <= a[1].stride && a[2].kernel <= a[2].stride;
  const bool rows = pl.algorithm == Algorithm::direct || pl.algorithm == Algorithm::gemm;
  return rows && one_per_phase && pl.dtype == DType::f32 ? 6 : 0;
}

// Narrows the block to streamed_block_cap, balanced along the row (as fit_block_to_l1_sets does).
void fit_block_to_streams(Plan& pl, const TuningHints& h) {
  if (h.ur_w || pl.src_ic_stride != 1) return;  // NCX read in place: a block's pixels share lines
  const int cap = streamed_block_cap(pl);
  if (cap > 0 && pl.ur_w > cap) narrow_block(pl, cap);
}

// At most `fit` pixels a block, balanced along the row (or the images a block spans): a row of 20 takes
// blocks of 5 under a fit of 6, not 6 + 6 + 6 + 2.
void narrow_block(Plan& pl, int fit) {
  const Axis& x = pl.axes[2];
  const int64_t extent = pl.block_over_batch ? pl.batch : ceil_div(x.out, x.stride);
  pl.ur_w = static_cast<int>(ceil_div(extent, ceil_div(extent, fit)));
}

}  // namespace deconvjit::detail
