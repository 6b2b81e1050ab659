// Planning for the col_x family: NCX data, AVX-512 or AVX2, few output channels (per group) x x taps. Per
// output row it is a GEMM with the vector along input x, contiguous in NCX: for each input channel and
// valid (z, y) tap, one input vector times a broadcast weight per (output channel, kernel x) adds into an
// accumulator, so every lane of every FMA is a real product and nothing is permuted in the reduction.
// After it, kernel x = px + s*d of input lane i belongs to output q = s*(i + d) + px (q = x + pad): the
// kernel sums the taps' accumulators shifted by d lanes, interleaves the s phases (permutes of this vector
// and the one before) and stores contiguous output rows. col2im in registers, hence the name.
//
// Against dot_x, which keeps the vector along output x, this needs no permute per FMA at x stride > 1
// (dot_x's one output channel at stride 8 runs at a third of the FMA peak), and the x taps of a kernel
// wider than the stride share one input load.
#include <algorithm>

#include "runtime/int_math.hpp"
#include "runtime/plan.hpp"

namespace deconvjit::detail {
namespace {

// AVX-512 accumulators: registers 0-27. The input vectors of a tile take 28-31, and after the reduction
// the same four serve the phase interleave and the typed store as temporaries. AVX2 (16 registers):
// accumulators 0-11, two input vectors, the broadcast weight (AVX2 FMAs take no broadcast operand) and
// the load mask; after the reduction 12-15 are the temporaries.
int accumulators(Isa isa) { return isa == Isa::avx512_core ? 28 : 12; }
int max_vectors(Isa isa) { return isa == Isa::avx512_core ? 4 : 2; }

int64_t x_taps(const Problem& p) { return p.kernel.back(); }

// Output channels per block by default, balanced over the blocks. AVX2 FMAs take no broadcast operand:
// each weight is a broadcast of its own, which two input vectors share, so its tile holds two vectors
// before channels (ov_spec_ex1, 20 -> 10 channels, 3x3 stride 2, 2 threads: 2 vectors x 2 channels 1.02
// ms, 1 x 4 1.28 ms, 1 x 3 1.45 ms).
int64_t default_channels(int64_t oc, int64_t kx, int64_t row_vectors, Isa isa, int max_u) {
  const int acc_n = accumulators(isa);
  const int64_t vectors_first =
      isa == Isa::avx2 ? std::clamp<int64_t>(acc_n / kx, 1, std::min<int64_t>(max_u, row_vectors)) : 1;
  const int64_t cb = std::min<int64_t>(oc, std::max<int64_t>(1, acc_n / (kx * vectors_first)));
  return ceil_div(oc, ceil_div(oc, cb));
}

}  // namespace

bool col_x_applies(const Problem& p, Isa isa) {
  if ((isa != Isa::avx512_core && isa != Isa::avx2) || p.data_format != DataFormat::NCX) return false;
  const int64_t lanes = isa == Isa::avx512_core ? 16 : 8;
  int64_t out_sp = 1;
  for (int64_t v : p.out) out_sp *= v;
  const int64_t s = p.stride.back();
  // The phases interleave within a vector (s divides the lanes), a tap's shift stays within the vector
  // before (kernel x < lanes x s), and one channel's taps fit the accumulators. Output planes of a block
  // are addressed with 32-bit displacements.
  return p.dilation.back() == 1 && lanes % s == 0 && p.pads_begin.back() >= 0 && x_taps(p) <= accumulators(isa) &&
         x_taps(p) < lanes * s && out_sp * accumulators(isa) * 4 < (int64_t{1} << 31);
}

// Each channel row's piece two tiles ahead is asked for in software where a row spans several tiles:
// hundreds of channel rows outrun the hardware prefetchers (lsgan_d7_b16, 64 channels x 3 rows of 7
// tiles: 6.4 -> 2.4 ms; convtasnet_decoder 0.51 -> 0.48). A row of one tile walks each channel plane
// row after row, which they follow, and a prefetch takes a load slot beside the one load and few FMAs of
// a tap (without: cdcgan_mnist_h2_b64 0.53 -> 0.45 ms; infogan_mnist_up2_b64 and tfdcgan_mnist_l3_b256,
// also rows of one tile, lose 1-2%). Measured on 2 threads, f32; bf16 pairs (heavier taps) within 1%.
bool col_x_prefetch_pays(const Plan& pl) {
  int64_t first = 0, end = 0;
  col_x_tiles(pl, first, end);
  return end - first > 1;
}

// Output-row tiles of `vectors` input vectors: the ones a row's outputs need, [first, end).
void col_x_tiles(const Plan& pl, int64_t& first, int64_t& end) {
  const Axis& x = pl.axes[2];
  const int64_t span = int64_t{pl.lanes} * col_x_tile_vectors(pl) * x.stride;  // output q per tile
  first = x.pad_begin / span;
  end = ceil_div(x.pad_begin + x.out, span);
}

// The tile: output channels first (they share each input load), then input vectors (they share each
// broadcast weight), then accumulator sets for enough independent FMA chains.
void plan_col_x(Plan& pl, const Problem& p, const TuningHints& h) {
  check_hint(h.ic_block <= 0 || h.ic_block == p.c_in_per_group(), "col_x reduces over all input channels in one pass");
  check_hint(h.x_halo != 1, "col_x masks its loads at the borders instead of a halo");
  check_hint(h.oc_loop <= 1, "col_x walks rows (oc_loop 1)");
  pl.algorithm = Algorithm::col_x;
  pl.layout = LayoutPath::ncx_native;
  // bf16 pairs: vdpbf16ps at twice the FMA rate. A pair's two channel rows are loaded into the two
  // halves of one register and interleaved by vpermw through an index in register 31, so a tile holds
  // at most 3 input vectors.
  choose_ic_pairs(pl, h);
  const int acc_n = accumulators(pl.isa), max_u = pl.ic_pairs ? max_vectors(pl.isa) - 1 : max_vectors(pl.isa);
  const Axis &az = pl.axes[0], &ay = pl.axes[1], &ax = pl.axes[2];
  const int64_t kx = ax.kernel, row_vectors = ceil_div(ax.in, int64_t{pl.lanes});
  const int64_t oc = p.c_out_per_group();
  int cb = static_cast<int>(default_channels(oc, kx, row_vectors, pl.isa, max_u));
  if (h.oc_vectors) cb = h.oc_vectors;
  // Rows of one vector (16 pixels or fewer; AVX2 8) hold one vector per tile, each broadcast weight serving one
  // FMA. batch_block makes the tile that row of several images instead (same taps, same masks), as many
  // as divide the batch. A choice for the tuner, off by default: it measured mixed (2 threads, ms, off /
  // on with 4 images: cdcgan_mnist_h2_b64 0.437 / 0.400, dcgan32_g4_b64 0.300 / 0.284, but
  // infogan_mnist_up2_b64 0.129 / 0.160, tfdcgan_mnist_l3_b256 0.723 / 0.794).
  int u = static_cast<int>(std::clamp<int64_t>(acc_n / (cb * kx), 1, max_u));
  const int64_t image_bytes = std::max(p.src_elements(), p.dst_elements()) / p.batch * pl.elem_bytes();
  const bool can_block = row_vectors == 1 && p.batch > 1 && image_bytes * max_u < (int64_t{1} << 31);
  int images = static_cast<int>(std::min<int64_t>(u, p.batch));
  while (images > 1 && p.batch % images != 0) --images;
  pl.block_over_batch = h.batch_block == 1;
  check_hint(!pl.block_over_batch || can_block, "col_x: batch_block needs rows of one vector (" +
                                                    std::to_string(pl.lanes) + " pixels or fewer) and several images");
  if (!pl.block_over_batch) u = static_cast<int>(std::min<int64_t>(u, row_vectors));
  else u = images;
  if (h.ur_w) u = h.ur_w;
  check_hint(!pl.block_over_batch || p.batch % u == 0,
             "col_x: with batch_block, ur_w (images per tile) must divide the batch (" + std::to_string(p.batch) + ")");
  int sets = static_cast<int>(std::clamp<int64_t>(ceil_div(int64_t{12}, cb * kx * u), 1, 8));
  while (sets > 1 && sets * cb * kx * u > acc_n) --sets;
  if (h.ic_unroll) sets = h.ic_unroll;
  check_hint(cb >= 1 && cb <= oc, "col_x: oc_vectors counts output channels (per group): 1 to " + std::to_string(oc));
  check_hint(u >= 1 && u <= max_u, "col_x: ur_w counts input vectors per tile: 1 to " + std::to_string(max_u) +
                                       (pl.ic_pairs ? " (bf16 pairs)" : ""));
  check_hint(sets >= 1 && sets <= 8, "col_x: ic_unroll counts accumulator sets: 1 to 8");
  check_hint(sets * cb * kx * u <= acc_n,
             "col_x: " + std::to_string(sets) + " sets (ic_unroll) x " + std::to_string(cb) +
                 " channels (oc_vectors) x " + std::to_string(kx) + " x taps x " + std::to_string(u) +
                 " vectors (ur_w) exceed " + std::to_string(acc_n) + " accumulators");
  pl.oc_vectors = cb;
  pl.ur_w = u;
  pl.ic_unroll = sets;
  pl.oc_blocks = ceil_div(oc, int64_t{cb});
  auto kind = [&](int64_t channels) {
    BlockKind k;
    k.vectors = static_cast<int>(channels);
    k.wei_k_floats = channels * kx;  // per (input channel or pair, z tap, y tap)
    k.wei_tap_step = {az.tap_k_step * ay.kernel * k.wei_k_floats, ay.tap_k_step * k.wei_k_floats, 0};
    k.wei_ic_step = az.kernel * ay.kernel * k.wei_k_floats;
    return k;
  };
  pl.main = kind(cb);
  pl.last = kind(oc - (pl.oc_blocks - 1) * cb);

  // Rows are tasks; a row is cut into parts only when there are too few rows for the threads. Each part
  // after the first recomputes the tile before it (its shifted taps reach into the part), so parts keep
  // at least 32 tiles: at most 3% more work.
  int64_t first = 0, end = 0;
  col_x_tiles(pl, first, end);
  const int64_t rows = pl.batch / (pl.block_over_batch ? pl.ur_w : 1) * pl.groups * az.out * ay.out;
  const int64_t tiles = end - first;
  int parts = static_cast<int>(std::clamp<int64_t>(ceil_div(int64_t{32}, rows), 1, std::max<int64_t>(1, tiles / 32)));
  parts = std::min(parts, 8);
  if (h.x_split) parts = h.x_split;
  check_hint(parts >= 1 && parts <= 8 && parts <= std::max<int64_t>(1, tiles),
             "col_x: x_split between 1 and min(8, tiles per row = " + std::to_string(tiles) + ")");
  pl.x_split = parts;

  const int64_t in_sp = az.in * ay.in * ax.in, out_sp = az.out * ay.out * ax.out;
  pl.src_c = in_sp, pl.src_x = 1, pl.src_n = p.c_in * in_sp;
  pl.dst_c = out_sp, pl.dst_x = 1, pl.dst_n = p.c_out * out_sp;
  pl.src_ic_stride = pl.src_c;
  pl.src_tap_step = {-az.tap_i_step * ay.in * ax.in, -ay.tap_i_step * ax.in, 0};
}

}  // namespace deconvjit::detail

namespace deconvjit::detail {

// Against the default on NCX data (2 threads, ms, every corpus and realworld layer col_x applies to,
// docs/data/colx_sweep_2t.jsonl): the row and dot families hold at most one vector of output channels
// there, so each FMA needs its own broadcast, and they copy the source to NXC or compute through a row
// buffer; col_x reads NCX in place with full lanes along x. At most 4 output channels it beat dot and
// dot_x on 22 of 23 layers with 8+ input channels (sepformer_decoder 0.496 -> 0.244, fsrcnn_x2 4.39 ->
// 1.87, resnet50_bwd_stem_b16 17.0 -> 11.3; tfdcgan_mnist_l3_b256 even); 5-16 output channels outside
// gemm_x won all 7 (ov_spec_ex1 1.04 -> 0.62, densepose_ann_index_b8 8.1 -> 5.8, hdemucs_freq_dec0 11.2
// -> 7.3). From 17 channels up the row families fill two vectors and win as often as they lose, except
// where those vectors leave a fifth of their lanes empty and col_x's rows leave fewer (Zen 4, 17-25
// channels, input rows filling 85%+ of their vectors: fcn8s_upscore2 1.51x, densepose_index_uv_b8 1.23x,
// linknet_fullconv2x2 1.07x, espnet_classifier 1.03x, fcn8s_upscore8 1.00x, enet_fullconv 0.97x; rows
// filling less lost: fcn8s_voc_upscore_pool4 0.94x, fcn16s_siftflow_sem_upscore2 0.92x;
// docs/data/colx_sweep_zen4_2t.jsonl). K == s layers stay with gemm_x (or, for bf16, the dot family's pairs:
// dbnet_head_up2 0.83x), which read NCX in place, except long rows (below). Fewer than 8 input channels
// leave too short a reduction for the phase interleave (flownets_flow3_up, 2 -> 2, 0.7x).
// bf16 with channel pairs (docs/data/colx_sweep_bf16_2t.jsonl): the dot family's layers again, all 23
// (sepformer_decoder 2.8x, lsgan_d7_b16 3.0x, dprnn_decoder 1.2x); but the row families reduce pairs as
// fast as col_x does, so above 4 output channels col_x wins only where they leave a quarter of their lanes
// empty (ov_spec_ex1, 10 channels, 1.45x) and loses at 15-16 (squeezeseg_fdeconv13_b8 0.66x,
// densepose_ann_index_b8 0.95x; hdemucs_freq_dec0 1.2x is the exception left out).
// col_x's vectors run along input x. Every layer above had rows filling 85%+ of them; where the output
// channels fill 3/4+ of a vector (12-16 channels) and the rows fill no more of theirs, the row families'
// vectors are the fuller ones: they won 1.04-2.0x on 9 of the 10 layers this changes, drawn for it or in
// the holdout sets (rows of 10-52 pixels; holdout seed 53's ho32, 16 channels over rows of 18, 0.76 ->
// 0.38 ms; one 0.96), f16 alike, docs/data/colx_short_rows_zen4_2t.txt. Below 3/4 both won (8-10
// channels over rows of 6-18, f16: col_x 1.2x and 1.6x; the row families 1.1x), so col_x stays there.
// Groups: each group's channels are a layer of their own, and the rule reads them per group. Measured on
// every grouped holdout layer that is not depthwise (Zen 4, 2 threads, NCX, default -> col_x, f32 / bf16 /
// f16; docs/data/col_x_groups_zen4_2t.jsonl): the 7 it takes 1.03-14.3x on all 20 rows (G=8 24 -> 3 per
// group 1.51x / 2.39x / 1.66x; G=8 12 -> 3, 1-D stride 8, 1.56x / 1.65x / 2.10x; G=4 80 -> 10, 3-D, 1.20x
// / 1.16x / 1.26x); of the layers it leaves, three rows ran faster by hint (K == s 80 -> 1 f32 1.20x
// against gemm_x, but bf16 0.31x; 2 -> 24 bf16 1.09x; 48 -> 12 f16 1.26x), the rest 0.06-1.0x. Two limits
// found there hold for all layers: rows must fill half a vector (G=4 192 -> 3 over rows of 5 lost
// 0.38-0.41x to the dot family's vectors of input channels; G=1 512 -> 8 over rows of 6 leaves col_x, bf16
// 1.09x, f16 1.34x), and the 8-channel minimum is for the phase interleave, which stride 1 does not have
// (4 groups of 3 -> 1 in 3-D, 27 products per x tap, holdout s89 ho11: 35.9 -> 2.9 ms, f32; 2 -> 24 per
// group, 18 products, 1.04x; and under 8 products, see col_x_preferred).
namespace {

// AVX2 (no gemm_x there), against the default on NCX data, f32, 2 threads, on every suite and holdout
// layer col_x applies to (444; docs/data/col_x_avx2_sweep_zen4_2t.jsonl): where the output channels leave
// a tenth or more of the row families' 8-lane vectors empty (at most 40 channels) and the input rows fill
// 85%+ of col_x's, with kernels of at most 6 x taps (two vectors per tile share each broadcast; fsrcnn_x2,
// 9 taps, 0.64x), it won 1.02-2.1x (ov_spec_ex1 2.1x, espnet_classifier 1.77x, tfdcgan_mnist_l3_b256
// 1.75x, 1-3 channels against the dot family 1.06-1.77x) except where a row's many channel blocks each
// read many input channels again (holdout s89 ho06, 768 -> 19 channels in 4 blocks, 0.54x; 4-12 blocks
// over 64-512 channels 0.68-0.89x): more than 2 blocks only up to 48 input channels per group. The 53
// layers that rule takes: 1.45x geomean, none below 1.0 (the base rule, drawn from the realworld and
// corpus rows, took 70 at 1.30x with 9 below; the block limit was then read off all 444). Timed again
// against their old plans by hint (docs/data/col_x_avx2_rule_types_zen4_2t.jsonl, 51 of them): f32 1.44x
// (1.00-8.4), f16 1.40x (4 below 1.0, dbnet_head_up2 0.76x), bf16 1.35x (9 at 0.84-0.96: widening bf16
// by shifts weighs on col_x's loads as on the row families' broadcasts), so all three types take it.
// Exactly 8 channels fill the row families' one vector, but that tile spends a broadcast on every FMA, where
// col_x's two vectors share each: over rows of 2+ vectors with at most 4 x taps, whatever the blocks (holdout
// s97 ho02, 192 -> 8 per group over rows of 17808, 2.77x; s71 ho27 1.71x, s89 ho45 1.30x, ho37 1.01x; with
// 5-6 taps or rows of one vector 0.78-0.91x). Read off those six holdout layers only; the four it takes,
// against their old plans by hint: f32 1.01-2.56x, f16 1.67-4.13x, bf16 1.04-2.99x
// (docs/data/col_x_avx2_one_vector_ab_zen4_2t.txt).
bool col_x_preferred_avx2(const Problem& p) {
  const int64_t ic = p.c_in_per_group(), oc = p.c_out_per_group(), kx = x_taps(p);
  const int64_t row_vectors = ceil_div(p.in.back(), int64_t{8});
  const int64_t blocks = ceil_div(oc, default_channels(oc, kx, row_vectors, Isa::avx2, max_vectors(Isa::avx2)));
  const bool empty_lanes = kx <= 6 && lane_use(oc, 8) <= 0.9 && oc <= 40 && (blocks <= 2 || ic <= 48);
  const bool one_vector = oc == 8 && row_vectors >= 2 && kx <= 4;
  return lane_use(p.in.back(), 8) >= 0.85 && (empty_lanes || one_vector);
}

}  // namespace

bool col_x_preferred(const Problem& p, Isa isa) {
  const int64_t ic = p.c_in_per_group(), oc = p.c_out_per_group();
  if (ic == 1 && oc == 1) return false;  // (depthwise_x)
  // Fewer than 8 input channels per group: not above x stride 1, where no reduction hides the phase interleave.
  // At stride 1 any number, however few products per x tap: the row families, the NCX row buffer and dot_x
  // did worse there. Against the old default, NCX, 2 threads, all 9 suite and holdout rows it moved
  // (docs/data/col_x_short_reduction_zen4_2t.txt): holdout s223 ho07 (8 groups of 2 -> 1, 3x3) 6.1-20.7x in
  // the three types on both ISAs, s229 ho46 (4 groups of 4 -> 10, 1x1) on AVX2 2.5-3.0x; G=1 layers drawn
  // for it 1.06-8.1x in f32 (against dot_x 1.06-1.39x, the row buffer 4.6-8.1x), bf16 and f16 on AVX-512
  // 1.16-7.0x. On AVX-512, K == s layers, which gemm_x runs faster (col_x 0.69-0.91x of it), leave below.
  if ((ic < 8 && p.stride.back() > 1) || !col_x_applies(p, isa)) return false;
  if (isa == Isa::avx2) return col_x_preferred_avx2(p);
  const bool pairs = avx512_bf16_usable(p.dtype, isa);
  const double rows = lane_use(p.in.back(), 16), channels = lane_use(oc, 16);
  const bool empty_lanes = !pairs && oc <= 32 && channels <= 0.8 && rows >= 0.85;
  if ((oc > 16 && !empty_lanes) || rows < 0.5) return false;
  if (channels >= 0.75 && rows < 0.85 && rows <= channels) return false;  // (see above)
  // gemm_x takes K == s, but where it runs long rows in x chunks whose source passes a quarter of L2 col_x
  // keeps the layers it prefers: its software prefetch serves the many input planes such a row streams,
  // which gemm_x lacks (holdout s97 ho02, 192 -> 8 channels per group over rows of 17808: gemm_x against
  // col_x 0.71-0.72x in f32, 0.84-0.88x bf16, 0.97x f16). With 16-48 input channels gemm_x won 13 of 16
  // rows (0.70-1.35x; docs/data/gemm_x_chunks_zen4_2t.jsonl).
  if (gemm_x_by_default(p, isa) && !gemm_x_streams_long_rows(p)) return false;
  return !pairs || oc <= kDotMaxOc || channels <= 0.75;
}

}  // namespace deconvjit::detail
