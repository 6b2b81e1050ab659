// Planning, first step: the route. Which kernel family computes a problem, and how NCX data reaches it
// (the NCX-native families, a row buffer, scratch copies). Every rule that moves a layer between families
// lives here; the tiles and loops of each family are planned after it (runtime/plan.cpp, plan_*.cpp).
#include <string>

#include "runtime/cpu.hpp"
#include "runtime/plan.hpp"

namespace deconvjit::detail {

// With dilation 1 and K a multiple of s, every x phase has the same K/s taps at the same input offsets:
// the s phases of an output chunk fold into the channel dimension (s*C_OUT contiguous floats in NXC), and
// x becomes a dense stride-1 correlation. K == s is a plain GEMM. Pads and output sizes off the stride
// leave the row's first and last folded pixels partly outside it (Plan::fold_shift, fold_tail).
bool gemm_applies(const Problem& p, const Axis& x) {
  return p.groups == 1 && x.dilation == 1 && x.kernel % x.stride == 0 && (x.stride > 1 || x.kernel == 1);
}

bool gemm_aligned(const Axis& x) { return x.pad_begin % x.stride == 0 && x.out % x.stride == 0; }

namespace {

// bf16 channel pairs (vdpbf16ps) fill the dot family's vectors 16 pairs at a time: with at most 12 input
// channels per group, 6 pairs or fewer, the direct family's pairs run ahead from 3 output channels per
// group on (Zen 4, 2 threads, bf16, direct against dot, per group: NXC 8 -> 3 1.79x, 8 -> 4 2.55x,
// 12 -> 3 1.20x, 12 -> 4 1.50x, holdout layers 8 -> 3 and 12 -> 3 1.03-1.70x; at 2 outputs 1.29x but
// 0.44x; 12 -> 1 0.68x, 16 -> 3 0.86x, 24 -> 3 0.75x; docs/data/dot_direct_bf16_zen4_2t.jsonl).
bool direct_pairs_pay(const Problem& p, Isa isa, const TuningHints& h) {
  const bool pairs = avx512_bf16_usable(p.dtype, isa) && h.ic_pairs != 0 && h.widen_src != 1;
  return pairs && p.c_in_per_group() <= 12 && p.c_out_per_group() >= 3;
}

}  // namespace

// A horizontal sum per output pays off when few output channels would leave vector lanes empty and
// the input channels fill them.
bool dot_applies(const Problem& p) {
  return p.c_out_per_group() <= kDotMaxOc && p.c_in_per_group() >= 8;
}

namespace {

// One channel in and out per group. G=1 with one channel each way (a 1->1 upsampler) is the same
// computation; the default takes it to depthwise_x where that runs (one_channel_native).
bool depthwise_applies(const Problem& p) {
  return p.c_in_per_group() == 1 && p.c_out_per_group() == 1;
}

// Scatter stores address a whole vector of channels with 32-bit lane offsets and displacements.
bool ncx_in_kernel_fits(const Problem& p, Isa isa) {
  int64_t out_sp = 1;
  for (int64_t o : p.out) out_sp *= o;
  return isa == Isa::avx512_core && out_sp * 16 * 4 * 8 < (int64_t{1} << 31);
}

// The kernel reaches up to 64 unrolled input channels of an NCX source by 32-bit displacements.
bool src_in_place_fits(const Problem& p) {
  int64_t in_sp = 1;
  for (int64_t i : p.in) in_sp *= i;
  return in_sp * 64 * 4 < (int64_t{1} << 31);
}

// gemm's folded channels (x stride x C_OUT) fill vectors at least a third again better than C_OUT does.
// (21 channels: 66% of two vectors, folded by stride 2 95%, by 8 100%: tuned at the default budget, gemm
// through copies gained 1.16-1.28x on fcn8s_upscore2/upscore8/voc_upscore_pool4, below the 1.5 first set.)
bool folding_fills_lanes(const Problem& p, int lanes) {
  const int64_t oc = p.c_out_per_group();
  return lane_use(p.stride.back() * oc, lanes) >= 1.3 * lane_use(oc, lanes);
}

// gemm where its folded pixels overhang the row (pads or output size off the stride: the k = 2s, p = s/2
// of most GAN and vocoder upsamplers), by default where folding fills lanes better over 32+ input channels
// per group, and not where batch blocking pays (the direct family blocks over images; gemm's clipped blocks
// cannot). Zen 4, 2 threads, f32, gemm against the direct family in one process on every suite and holdout
// layer with K a multiple of s and pads off it where the rule takes gemm (docs/data/gemm_overhang_*.jsonl):
// AVX2 NXC 1.21-1.40x on all 8 (holdout s197 ho42, 160 -> 12 channels, k16 s8 p4: 1.40x), NCX through
// whole-tensor copies 1.19-1.36x on all 7; AVX-512 NXC 1.13x over 16 (0.84 the one below 0.98, s89 ho00 at
// 48 -> 8, which NCX timed at 1.10), NCX 1.13x over 10 (1.03-1.24). Below 32 input channels it went both
// ways, 0.82-1.54x over 10 layers of 2-21 (direct also beat aligned gemm on some short reductions).
// Where C_OUT already fills lanes, gemm ran as fast as direct on the same layers made aligned by dropping
// the x pads (1.005 over 140 AVX-512, 1.023 over 166 AVX2; gemm_overhang_aligned_*): no reason to move.
// 16-bit data, NXC, the layers the rule takes (gemm_overhang_{bf16,f16}_*): bf16 AVX2 1.32x over 9
// (1.19-1.42), AVX-512 1.43x over 20 (1.16-2.19); f16 AVX2 1.53x over 9, AVX-512 1.45x over 20 (1.16-2.28).
bool gemm_overhang_pays(const Problem& p, Isa isa, const Axis& x) {
  return p.c_in_per_group() >= 32 && folding_fills_lanes(p, vector_lanes(isa)) &&
         !batch_blocking_pays(p.batch, x.out, x.stride, isa);
}

// The dot family's shape (at most 4 outputs per group) on 1-D NXC data with 2+ taps per phase (K >= 2s,
// s >= 2) runs faster as gemm, its s phases folded into s x C_OUT channels. Zen 4, 2 threads, NXC f32, gemm
// against dot in one process on all 11 such suite and holdout layers (docs/data/gemm_vs_dot_1d_*.jsonl):
// AVX-512 0.95-2.33x (geomean 1.35; convtasnet_decoder 1.16, sepformer_decoder 0.95, s97 ho07 2.33),
// AVX2 1.06-2.31x (1.33). With one tap per phase (K = s = 2) gemm lost (0.43-0.99, 3 layers), and on 2-D
// and 3-D layers (AVX-512 0.15-0.98 on 21 of the 22 such padded ones, one 3-D at 1.33;
// docs/data/gemm_forced_padded_avx512_core_NXC_zen4_2t.jsonl), where dot's y taps share its accumulators.
// NCX data keeps its routes (dot_x, or dot's source copy), and so do hints other than the family-neutral
// ones (dot honoured them before: fuse_x_taps, batch_block). 16-bit data (session 21, the same 14 layers,
// docs/data/gemm_vs_dot_1d_{bf16,f16}_*): up to 128 input channels per group gemm 1.55-7.54x in bf16
// (geomean 2.77 AVX-512, 2.17 AVX2) and 0.83-2.92x in f16 (1.75, 1.46) over 8 layers; from 256 up, where
// dot's long reductions run on channel pairs or widen once per vector, mixed (0.64-1.23: convtasnet_decoder,
// 512 -> 1, bf16 AVX-512 0.76, f16 0.67), so those keep dot. The rule against dot, a second pass over the 7
// layers it takes (gemm_vs_dot_1d_rule_*): bf16 1.98x (AVX2) and 2.76x (AVX-512), f16 1.28x and 1.63x, all
// at 1.06x or more but s23 ho19 in f16 on AVX2 (40 -> 2 channels, 0.83 in both passes).
bool folded_row_beats_dot(const Problem& p, const Axis& x) {
  constexpr int64_t kMaxHalfChannels = 128;
  const bool reduction = p.dtype == DType::f32 || p.c_in_per_group() <= kMaxHalfChannels;
  return p.data_format == DataFormat::NXC && reduction && p.spatial_rank == 1 && x.stride >= 2 &&
         x.kernel >= 2 * x.stride;
}

// The defaults that move a layer to another family than its NXC one (dot -> dot_x or gemm_x, a 1->1 layer
// -> depthwise_x) take only hints every family honours or refuses by name (parallel, nt_stores, pack_src,
// widen_src, band_rows, edge_blocks, prefetch_src, group_inner 0, oc_inner 0); any other hint keeps the NXC family,
// which honoured it before these defaults existed.
bool family_neutral(const TuningHints& h) {
  TuningHints rest = h;
  rest.parallel = -1;
  rest.nt_stores = -1;
  rest.pack_src = -1;
  rest.widen_src = -1;
  rest.band_rows = -1;
  rest.edge_blocks = -1;
  rest.prefetch_src = -1;
  if (rest.group_inner != 1) rest.group_inner = -1;  // (1: only the row families honour it)
  if (rest.oc_inner != 1) rest.oc_inner = -1;
  return rest.empty();
}

// dot_x, asked for or by default: NCX data the dot family would otherwise copy to NXC first.
bool dot_x_chosen(const Problem& p, Isa isa, const TuningHints& h) {
  if (h.algorithm == "dot_x") {
    check_hint(h.layout.empty(), "algorithm dot_x reads and writes NCX itself (no layout hint)");
    return dot_x_applies(p, isa);
  }
  return family_neutral(h) && dot_x_preferred(p, isa);
}

}  // namespace

// gemm needs an NXC-shaped output (or a row buffer of whole pixels), so the default takes it on NCX data only
// where it beats the row families by far. It does when the
// layer has too few channels to fill vectors and gemm's folded channels (stride x C_OUT) do: the row
// families would leave most lanes empty (tuned on the corpus, 2 threads: hed_dsn5_up C_OUT 1 s16
// 0.345 -> 0.140 ms, fcn16s_voc_upscore16 C_OUT 21 s16 6.42 -> 4.57 ms, hed_dsn2_up C_OUT 1 s2 1.37x).
// Likewise at strides of 32 and more, whatever the lanes: a row family's phase runs are then a few pixels
// each, while gemm gives each input pixel one run of s x C_OUT outputs (tuned at the default budget,
// gemm through copies: waveglow_upsample, stride 256, 2.25x; waveglow_upsample_b12 1.86x;
// fcn32s_nyud_upscore, stride 32, 1.87x).
// So too where gemm_x applies but its rows of one vector would leave an eighth or more of its lanes empty
// (gemm_x_lanes_wasted), bf16 pairs aside (gemm_x_preferred).
bool gemm_copies_wanted(const Problem& p, Isa isa) {
  const bool pairs = avx512_bf16_usable(p.dtype, isa);
  return folding_fills_lanes(p, vector_lanes(isa)) || p.stride.back() >= 32 ||
         (!pairs && gemm_x_by_default(p, isa) && gemm_x_lanes_wasted(p));
}

// Where gemm runs on NCX data (gemm_copies_wanted), it can compute into the row buffer instead of the
// whole-tensor copies (a buffer of whole pixels, Plan::row_buffer_whole_pixels; folded pixels within the
// row): the output then crosses memory once, not three times. Where the output outgrows the caches (4 MB),
// an output row of every channel holds at most 16K elements, and blocks do not run across images (whose
// rows the flush would scatter, as for the other row families). Zen 4, NCX, 2 threads, against the copies
// by the old default's choices, two passes (docs/data/gemm_row_buffer_rule_*, taken with a looser bound of
// 64 KB per row, so they also hold rows this one leaves): fcn32s_upscore (11K elements) f32 1.34-1.36x on
// AVX-512 (7.1-7.2 -> 5.3 ms) and 1.42x on AVX2, bf16 1.17-1.38x, f16 1.15-1.28x; fcn16s_voc_upscore16 (11K)
// 1.42-1.44x, bf16 1.15-1.28x, f16 1.21-1.23x; unet3d_up1 1.00-1.04x. Left out: s197 ho30 (16.5K, bf16 1.54x
// just past the bound; forced in f32 0.85-0.87x), rows of 24K elements (fcn32s_nyud_upscore: f32 0.98-1.08,
// f16 0.94-1.06, AVX2 bf16 0.66-0.68, AVX-512 bf16 1.20-1.26), blocks across images (s211 ho14 0.83-0.85,
// s97 ho11 f16 0.83), 1-D rows of MBs (waveglow_upsample 0.52), outputs the copies keep in cache (s71 ho37,
// 5 KB, 0.51).
bool gemm_row_buffer_pays(const Problem& p, Isa isa, const TuningHints& h) {
  // (a split reduction resumes from dst: the copies, which honour it)
  if (h.ic_block > 0 && h.ic_block != p.c_in_per_group()) return false;
  constexpr int64_t kMaxRowElements = int64_t{16} << 10, kMinDstBytes = int64_t{4} << 20;
  const int64_t x = p.out.back(), s = p.stride.back();
  const bool aligned = p.pads_begin.back() % s == 0 && x % s == 0;
  return aligned && x * p.c_out <= kMaxRowElements &&
         p.dst_elements() * static_cast<int64_t>(dtype_size(p.dtype)) >= kMinDstBytes &&
         !batch_blocking_pays(p.batch, x, s, isa);
}

// gemm writes runs of Kx*C_OUT floats per input pixel: only NXC-shaped destinations have them.
Algorithm choose_algorithm(const Problem& p, Isa isa, const Axis& x, LayoutPath layout, const TuningHints& h) {
  // (the row buffer: where no folded pixel overhangs the row, whose blocks would need scratch blocks too)
  const bool gemm_ok = gemm_applies(p, x) && (layout == LayoutPath::nxc || layout == LayoutPath::ncx_via_scratch ||
                                              (layout == LayoutPath::ncx_row_buffer && gemm_aligned(x)));
  // (on the row buffer only where choose_layout sent gemm there)
  const bool gemm_default =
      gemm_ok && (layout != LayoutPath::ncx_row_buffer ||
                  (h.layout.empty() && gemm_copies_wanted(p, isa) && gemm_row_buffer_pays(p, isa, h)));
  if (!h.algorithm.empty()) {
    check_hint(h.algorithm == "direct" || h.algorithm == "gemm" || h.algorithm == "depthwise" ||
                   h.algorithm == "dot" || h.algorithm == "depthwise_x" || h.algorithm == "gemm_x" ||
                   h.algorithm == "col" || h.algorithm == "dot_x" || h.algorithm == "col_x",
               "algorithm '" + h.algorithm + "' is not available (direct, gemm, depthwise, dot, "
               "depthwise_x, gemm_x, col, dot_x, col_x)");
    // The NCX-native families: choose_layout decides whether they apply.
    if (h.algorithm == "depthwise_x") return Algorithm::depthwise;
    if (h.algorithm == "gemm_x") return Algorithm::gemm;
    if (h.algorithm == "col_x") return Algorithm::direct;  // (choose_layout)
    check_hint((h.algorithm != "dot" && h.algorithm != "dot_x") || p.c_out_per_group() <= kDotMaxOc,
               "algorithm " + h.algorithm + " needs at most " + std::to_string(kDotMaxOc) +
                   " output channels per group");
    if (h.algorithm == "dot" || h.algorithm == "dot_x") return Algorithm::dot;  // (dot_x: choose_layout)
    check_hint(h.algorithm != "gemm" || gemm_ok,
               "algorithm gemm needs G=1, dilation 1 on x, a kernel x that is a multiple of the stride, and "
               "NXC-shaped output (or NCX through the row buffer with x pads and output size multiples of the "
               "stride)");
    check_hint(h.algorithm != "depthwise" || depthwise_applies(p),
               "algorithm depthwise needs one input and one output channel per group");
    return h.algorithm == "gemm" ? Algorithm::gemm
           : h.algorithm == "depthwise" ? Algorithm::depthwise : Algorithm::direct;
  }
  if (depthwise_applies(p) && p.groups > 1) return Algorithm::depthwise;
  if (dot_applies(p) && !direct_pairs_pay(p, isa, h))
    return gemm_default && family_neutral(h) && folded_row_beats_dot(p, x) ? Algorithm::gemm : Algorithm::dot;
  // (A batch_block hint keeps the direct family on overhanging rows: clipped blocks refuse it.)
  const bool overhang = h.batch_block != 1 && gemm_overhang_pays(p, isa, x);
  return gemm_default && (gemm_aligned(x) || overhang) ? Algorithm::gemm : Algorithm::direct;
}


// `family` is the algorithm as chosen for NXC data: the dot and depthwise families fix how NCX data flows.
// For ncx_native, `native` receives the family that reads and writes NCX itself (decided here, once).
LayoutPath choose_layout(const Problem& p, Isa isa, const TuningHints& h, Algorithm family, Algorithm& native) {
  const bool by_default = h.algorithm.empty() && h.layout.empty();
  // One channel in and out: NCX data is byte for byte NXC data. NXC data then takes depthwise_x as NCX
  // data does (one_channel_native); NCX data without it runs the NXC kernel on the caller's tensors, where
  // any other route copies or buffers them first (hed_dsn5_up, AVX2, where depthwise_x cannot take stride
  // 16: gemm through whole-tensor copies 0.37 ms, the NXC kernel 0.045).
  const bool one_to_one = p.c_in == 1 && p.c_out == 1;
  if (p.data_format == DataFormat::NXC) {
    check_hint(h.layout.empty(), "layout applies to NCX data only");
    if (one_to_one && family == Algorithm::depthwise && (by_default || h.algorithm == "depthwise_x") &&
        depthwise_x_applies(p, isa)) {
      native = Algorithm::depthwise_x;
      return LayoutPath::ncx_native;
    }
    check_hint(h.algorithm != "depthwise_x" && h.algorithm != "gemm_x" && h.algorithm != "dot_x" &&
                   h.algorithm != "col_x",
               "algorithms depthwise_x, gemm_x, dot_x and col_x are for NCX data (depthwise_x also for one "
               "channel each way, with x dilation 1 and an x stride up to the vector lanes)");
    return LayoutPath::nxc;
  }
  if (h.layout == "nxc") {
    check_hint(one_to_one, "layout nxc needs one input and one output channel (NCX data is then NXC data)");
    check_hint(h.algorithm != "depthwise_x" && h.algorithm != "gemm_x" && h.algorithm != "dot_x" &&
                   h.algorithm != "col_x",
               "layout nxc runs the NXC families, not depthwise_x, gemm_x, dot_x or col_x");
    return LayoutPath::nxc;
  }
  // one_channel_native declined depthwise_x: the NXC family, on the caller's tensors.
  if (by_default && one_to_one && family != Algorithm::depthwise) return LayoutPath::nxc;
  // gemm_x reads NCX in place where dot first copies the whole source to NXC (dbnet_head_up2, 64 -> 1
  // channels at 368x640, 2 threads: dot 6.4 ms, gemm_x 2.2).
  const bool native_gemm = by_default && gemm_x_preferred(p) && gemm_x_by_default(p, isa) &&
                           (family != Algorithm::dot || family_neutral(h));
  if (h.algorithm == "col_x" || (family != Algorithm::depthwise && family_neutral(h) && col_x_preferred(p, isa))) {
    check_hint(h.layout.empty(), "algorithm col_x reads and writes NCX itself (no layout hint)");
    check_hint(col_x_applies(p, isa), "algorithm col_x needs NCX data, x dilation 1, an x stride dividing "
                                      "the vector lanes (16 AVX-512, 8 AVX2), x pads_begin >= 0, a kernel x "
                                      "below lanes x stride and at most 28 (AVX2: 12), and output planes "
                                      "under 19 million elements (AVX2: 44 million)");
    native = Algorithm::col_x;
    return LayoutPath::ncx_native;
  }
  if (family != Algorithm::depthwise && dot_x_chosen(p, isa, h)) {
    native = Algorithm::dot_x;
    return LayoutPath::ncx_native;
  }
  check_hint(h.algorithm != "dot_x", "algorithm dot_x needs NCX data, G=1, at most 4 output channels, "
                                     "x dilation 1 and an x stride up to the vector lanes");
  if (family == Algorithm::dot && !native_gemm) {
    check_hint(h.layout.empty() || h.layout == "src_copy", "the dot family writes NCX directly "
                                                           "(layout src_copy)");
    return LayoutPath::ncx_src_copy;
  }
  check_hint(h.layout != "src_copy", "layout src_copy is for the dot family only");
  if (h.layout == "plane_tiles") {
    check_hint(family == Algorithm::depthwise && (h.algorithm.empty() || h.algorithm == "depthwise") &&
                   plane_tiles_applies(p, isa),
               kPlaneTilesNeeds);
    return LayoutPath::ncx_plane_tiles;
  }
  if (by_default && family == Algorithm::depthwise && family_neutral(h) && plane_tiles_preferred(p, isa))
    return LayoutPath::ncx_plane_tiles;
  if (family == Algorithm::depthwise && (by_default || h.algorithm == "depthwise_x") &&
      depthwise_x_applies(p, isa)) {
    check_hint(h.layout.empty(), "algorithm depthwise_x reads and writes NCX itself (no layout hint)");
    native = Algorithm::depthwise_x;
    return LayoutPath::ncx_native;
  }
  if (native_gemm || (h.algorithm == "gemm_x" && gemm_x_applies(p, isa))) {
    check_hint(h.layout.empty(), "algorithm gemm_x reads and writes NCX itself (no layout hint)");
    native = Algorithm::gemm_x;
    return LayoutPath::ncx_native;
  }
  check_hint(h.algorithm != "gemm_x", "algorithm gemm_x needs NCX data, kernel == stride "
                                      "on every axis with no pads, dilation or output padding, "
                                      "stride 1 or 2 on x, and at most 24 kernel positions (AVX2 12)");
  check_hint(h.algorithm != "depthwise_x", "algorithm depthwise_x needs NCX data, one channel per "
                                           "group, x dilation 1 and an x stride up to the vector "
                                           "lanes");
  // Depthwise does so little arithmetic per output that per-task flushes of small row buffers cost more
  // than one streaming transpose of the whole output (measured 0.129 vs 0.194 ms on dla_up_dw256) while
  // the output stays in cache between the kernel and the transpose; from 8 MB on the copies go through
  // memory twice more and the row buffer wins (Zen 4, 2 threads, depthwise layers depthwise_x cannot take:
  // stride 3 2D 4.5 MB of output 0.13 against 0.15 ms; 18 MB 1.60 against 0.67; 71 MB 10.1 against 3.4;
  // stride 5 1D 11 MB 0.72 against 0.40, 21 MB 2.39 against 1.13; docs/data/depthwise_ncx_route_zen4_2t.txt).
  constexpr int64_t kDepthwiseCopyMaxBytes = int64_t{8} << 20;
  if (h.layout.empty() && family == Algorithm::depthwise &&
      p.dst_elements() * static_cast<int64_t>(dtype_size(p.dtype)) < kDepthwiseCopyMaxBytes)
    return LayoutPath::ncx_via_scratch;
  // gemm where its folded channels fill lanes (gemm_copies_wanted): through whole-tensor copies, or the row
  // buffer where that pays (gemm_row_buffer_pays, which choose_algorithm asks again).
  if (by_default && family == Algorithm::gemm && gemm_copies_wanted(p, isa))
    return gemm_row_buffer_pays(p, isa, h) ? LayoutPath::ncx_row_buffer : LayoutPath::ncx_via_scratch;
  // Blocked over images, a row buffer holds one row of every image of the task, and its flush writes each
  // image's channel rows as runs of a few pixels: partial lines scattered over images. Whole-tensor copies
  // write planes whole (Zen 4, 2 threads, the 10 suite layers with batch blocking on NCX: f32 1.05-1.52x,
  // dcgan_g1 0.265 -> 0.175 ms, tfdcgan_mnist_l2_b256 1.30x; bf16 1.01-1.36x; f16 0.99-1.21x; AVX2 f32
  // 1.01-1.90x; docs/data/nblk_scratch_zen4_2t.txt).
  if (by_default && (family == Algorithm::direct || family == Algorithm::gemm) &&
      batch_blocking_pays(p.batch, p.out.back(), p.stride.back(), isa))
    return LayoutPath::ncx_via_scratch;
  if (h.layout.empty() || h.layout == "row_buffer") return LayoutPath::ncx_row_buffer;
  if (h.layout == "scratch") return LayoutPath::ncx_via_scratch;
  if (h.layout == "src_in_place") {
    check_hint(family != Algorithm::depthwise && src_in_place_fits(p),
               "layout src_in_place needs a family other than depthwise and input planes under 2^23 elements");
    return LayoutPath::ncx_src_in_place;
  }
  check_hint(h.layout == "in_kernel", "layout '" + h.layout + "' is not available (row_buffer, "
                                      "in_kernel, scratch, src_in_place, nxc, plane_tiles)");
  check_hint(p.dtype == DType::f32, "layout in_kernel stores with f32 scatters: f32 data only");
  check_hint(ncx_in_kernel_fits(p, isa) && family != Algorithm::depthwise,
             "layout in_kernel needs AVX-512, no depthwise, and output planes under 2^20 floats");
  return LayoutPath::ncx_in_kernel;
}

// A 1->1 layer without groups (HED's side outputs, LapSRN's image branch), in either layout (the same
// bytes): depthwise_x fills vectors along x where the channel-vector families leave 15 of 16 lanes empty
// (2 threads, ms: hed_dsn2_up NCX through copies 0.266 -> 0.027, hed_dsn5_up 0.154 -> 0.028; NXC data,
// Zen 4: hed_dsn2_up 0.36 -> 0.033, lapsrn_img_l1 0.16 -> 0.009). Not where gemm applies and its folded
// phases (x stride x 1 channel) fill whole vectors (hed_dsn5_up, stride 16, AVX-512: the NXC kernel
// 0.031 ms, depthwise_x 0.036), nor without depthwise_x (AVX2 at stride 16).
bool one_channel_native(const Problem& p, Isa isa, const Axis& x, const TuningHints& h) {
  const bool gemm_fills = gemm_applies(p, x) && gemm_aligned(x) && x.stride % vector_lanes(isa) == 0;
  return p.groups == 1 && depthwise_applies(p) && family_neutral(h) && depthwise_x_applies(p, isa) &&
         x_vectors_whole(p, isa) && !gemm_fills;
}

}  // namespace deconvjit::detail
