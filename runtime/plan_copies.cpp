// Planning, how the source reaches the row kernels: widened to f32 once (Plan::widen_src), asked for ahead
// of the FMAs (Plan::prefetch_src), and for NCX through the row buffer (or NXC widened) band by band
// (Plan::band_rows) rather than as one whole-tensor transpose (or widened copy).
#include <algorithm>
#include <functional>
#include <numeric>

#include "runtime/int_math.hpp"
#include "runtime/plan.hpp"

namespace deconvjit::detail {

// The one refusal of widen_src.
const char* const kWidenSrcNeeds =
    "widen_src needs bf16 or f16 data, the direct, gemm, depthwise or dot family without ic_pairs, and the "
    "source channels adjacent (NXC, or NCX through the row buffer, scratch or the dot family's source copy)";

bool widen_src_possible(const Plan& pl) {
  const bool family = pl.algorithm == Algorithm::direct || pl.algorithm == Algorithm::gemm ||
                      pl.algorithm == Algorithm::depthwise || pl.algorithm == Algorithm::dot;
  const bool layout = pl.layout == LayoutPath::nxc || pl.layout == LayoutPath::ncx_row_buffer ||
                      pl.layout == LayoutPath::ncx_via_scratch || pl.layout == LayoutPath::ncx_src_copy;
  return pl.dtype != DType::f32 && !pl.ic_pairs && pl.ic_blocks == 1 && family && layout;
}

void choose_widen_src(Plan& pl, const Problem& p, const TuningHints& h) {
  const bool possible = widen_src_possible(pl);
  check_hint(h.widen_src != 1 || possible, kWidenSrcNeeds);
  pl.widen_src = possible && (h.widen_src >= 0 ? h.widen_src == 1 : widen_src_pays(pl, p));
}

// A kernel reading f16 widens each element it broadcasts (AVX2: vpbroadcastw + vcvtph2ps, or the slot's
// widening store and reloads; AVX-512: each pixel's unrolled channels into a stack slot); a copy widened
// once costs a pass over the source and then twice its bytes at every read, and where the plan bands its
// rows (NXC 2-D and 3-D, NCX through the row buffer) the pass runs per band into L2.
// - AVX2, direct and gemm, at least 128 FLOPs per source element (2 x C_OUT/G x taps; the kernel then takes
//   f32's tiles, choose_tile). Zen 4, 2 threads, in one process. The widened source (the hint) against the
//   old default on every suite and holdout row (docs/data/widen_src_f16_avx2_hint_sweep_*): where it was
//   not widened before, by FLOPs per element, NXC 0.95x under 64, 1.00x at 64-128, 1.12x at 128-256, 1.12x
//   at 256-512, 1.16x at 512-1024, 1.05x above (gemm's three vectors); NCX 0.89x, 0.94x, 1.04x, 1.08x,
//   1.14x, 1.00x. This default against the old one (1024+ FLOPs and at most two output vectors), on the
//   rows it changes (docs/data/widen_src_f16_avx2_default_vs_old_*): NXC 1.074x over 476 (28 below 0.95;
//   unet_up1 1.15x, maskrcnn_mask 1.12x, linknet_final 1.09x), NCX 1.047x over 402 (22 below 0.95). The
//   worst were 1-D, whose rows are not banded (the widened copy streams through memory at twice the
//   bytes); timed again against the source not widened: s197 ho06 NCX 0.81x (32 output channels: two
//   blocks through the row buffer where the four-vector block made one), s197 ho11 NXC 0.88x,
//   wavenet_bwd_d512 NXC 0.98x, s89 ho15 1.02x (0.32-0.61 in the sweep's slow minutes).
// - AVX-512: one to three input channels, too few to widen as a group: 1.08-1.52x on all 5 such layers;
//   over all 176 layers geomean 0.92.
// - depthwise (a vector of channels per load, few FLOPs per element) 0.43-0.75; bf16, whose widening is
//   one shift, 0.88-1.07 on AVX2, 0.97x in bands (docs/data/widen_src_bf16_avx2_hint_sweep_nxc_zen4_2t.jsonl);
//   AVX-512 f16 in bands 0.98x (docs/data/widen_src_f16_avx512_hint_sweep_nxc_zen4_2t.jsonl).
// - the dot family (1-4 output channels: few FLOPs per element), AVX2: 0.82-0.88x over 63-115 rows per type
//   and layout, but bf16 fsrcnn_x2 1.02-1.15x where widening lets its x taps fuse (docs/data/dot_widened_*).
bool widen_src_pays(const Plan& pl, const Problem& p) {
  if (pl.dtype != DType::f16 || pl.algorithm == Algorithm::depthwise || pl.algorithm == Algorithm::dot) return false;
  if (pl.isa == Isa::avx512_core) return pl.ic_per_group <= 3;
  const int64_t taps = std::accumulate(p.kernel.begin(), p.kernel.end(), int64_t{1}, std::multiplies<>());
  return widening_repays_on_avx2(p.c_out_per_group(), taps);
}

bool widening_repays_on_avx2(int64_t oc_per_group, int64_t taps) { return 2 * oc_per_group * taps >= 128; }

constexpr int64_t kPrefetchMinSrcBytes = int64_t{8} << 20;
constexpr int64_t kPrefetchMaxBlockBytes = int64_t{12} << 10;

// The one refusal of prefetch_src.
const char* const kPrefetchSrcNeeds =
    "prefetch_src needs the direct, gemm or dot family on NXC data with blocks along x (not across images), "
    "or col_x";

// Where the generators (jit/deconv_direct.cpp, deconv_dot.cpp, deconv_col_x.cpp) ask for the next block:
// along a row (blocks across images would ask an image or more ahead, and lost where measured: the 4 such
// sweep layers 0.70-1.03x), at an offset from the block's source pointer that fits a 32-bit displacement
// (the farthest: the last pixel of the next block at the last channel of an unrolled pass).
bool prefetch_src_possible(const Plan& pl) {
  if (pl.algorithm == Algorithm::col_x) return true;
  const int64_t farthest = ((2 * int64_t{pl.ur_w} - 1) * pl.src_pix_stride + 2 * pl.ic_unroll * pl.src_ic_stride) *
                           pl.src_elem_bytes();
  return reducing_row_family(pl.algorithm) && pl.layout == LayoutPath::nxc && !pl.block_over_batch &&
         farthest < (int64_t{1} << 31);
}

void choose_prefetch_src(Plan& pl, const Problem& p, const TuningHints& h) {
  const bool possible = prefetch_src_possible(pl);
  check_hint(h.prefetch_src != 1 || possible, kPrefetchSrcNeeds);
  pl.prefetch_src = possible && (h.prefetch_src >= 0 ? h.prefetch_src == 1 : prefetch_src_default(pl, p));
}

bool prefetch_src_default(const Plan& pl, const Problem& p) {
  return pl.algorithm == Algorithm::col_x ? col_x_prefetch_pays(pl) : prefetch_src_pays(pl, p);
}

// The row families ask for the next block's source where the source is big enough to come from beyond the
// caches while the FMAs run (8 MiB: four times the two cores' L2), and that next block is small next to the
// 32 KB L1. Measured, Zen 4, NXC, f32, 2 threads, every suite and holdout layer (s89, s97, s131, s151) of 3
// MB of source or more that a row family takes, prefetch against none, min of 3 interleaved
// (docs/data/prefetch_src_sweep_*_zen4_2t.jsonl). Where this takes it: AVX2 1.112 over 64 layers, AVX-512
// 1.084 over 58 (the 1x1 layers of 50-83 MB from 320 -> 24, 128 -> 4 and 768 -> 19 channels 1.17-1.58x on
// AVX2, 1.03-1.50x on AVX-512; unet_up1 1.33x; a streaming dot row, dprnn_decoder, ran at 0.27-1.5 ms from
// one timing to the next without, 0.25-0.39 with; below 0.95: AVX2 pointpillars_up1_k1 0.60 (0.98 timed
// again), ho41 0.86 (19 channels, 70 MB), nnunet2d_up64_b2 0.90 (1.02 again), enet_fullconv 0.93, AVX-512
// unetr_dec2 0.91). From 3 to 8 MiB: AVX2 0.99 over 58, AVX-512 1.01 over 51. Next blocks of more than
// 12 KB lost: dot blocks of 12-16 pixels of 512-597 channels (convtasnet_decoder 0.67-0.78, pwcnet_upfeat3
// 0.90 on AVX-512), 6 pixels of 1024 (pix2pixhd_g1_up1 0.77). 16-bit data (the same bound in bytes):
// gemm rows gained as f32 did (holdout s151 ho46, bf16: 1.45x AVX2, 1.66x AVX-512; unet_up1 1.07-1.10x), a
// dot row lost (ho33, 41 MB of bf16 already read at 27 GB/s: 0.86-0.92x on AVX2, 0.95x on AVX-512 pairs;
// f16 0.89-1.09x), so 16-bit dot rows do without.
bool prefetch_src_pays(const Plan& pl, const Problem& p) {
  if (pl.algorithm == Algorithm::dot && pl.dtype != DType::f32) return false;
  const int64_t src_bytes = p.src_elements() * pl.src_elem_bytes();
  const int64_t next_block_bytes = pl.ur_w * pl.src_pix_stride * pl.src_elem_bytes();
  return src_bytes >= kPrefetchMinSrcBytes && next_block_bytes <= kPrefetchMaxBlockBytes;
}

// The group innermost (Plan::group_inner): the row families' tasks (runtime/executor.cpp, decompose), not a
// band's, of a layer with groups.
bool group_inner_possible(const Plan& pl) {
  return reducing_row_family(pl.algorithm) && pl.groups > 1 && pl.band_rows == 0;
}

void choose_group_inner(Plan& pl, const Problem& p, const TuningHints& h) {
  const bool possible = group_inner_possible(pl);
  check_hint(h.group_inner != 1 || possible,
             "group_inner needs the direct, gemm or dot family of a grouped layer (G > 1) without band_rows");
  // An asked-for oc_inner (one order at a time) keeps the group outermost unless group_inner is asked too.
  pl.group_inner = possible && (h.group_inner >= 0 ? h.group_inner == 1 : h.oc_inner != 1 && group_inner_pays(pl, p));
}

// With the group outermost, a task range (a thread's share) walks one group's rows: each group's pass
// reads its slice of every source pixel, so a 1-D source streamed from memory is read by as many sparse
// passes as groups, the two threads in different groups at once. The group innermost reads each pixel's
// slices together, once; its cost is the weights of every group in turn, so only where they are small.
// Zen 4, 2 threads, the 33 grouped suite and holdout layers (not depthwise) in both orders, two runs
// alternated (docs/data/grouped_task_order_ab_zen4_2t.txt): the 1-D layers on NXC data with 2 MiB of
// source or more, all with 24 KB of weights or less, 1.06-1.83x (holdout s151 ho27, 256 channels in 4
// groups over 18504 pixels, 1.31-1.41x; 1-D 2-group layers 1.29-1.83x); 2-D and 3-D layers mixed
// (0.63-1.41: a 3-D layer of 25 MB and 5 KB of weights 0.86-0.96x; big weights lost, stylegan2_fused_r8_b8
// 0.74-0.80x), so left as they were. Checked on 16 1-D grouped layers drawn for it afterwards (seed 181,
// all within the bounds): 1.16x geomean over their 32 rows on both ISAs, 0.94-1.95 once two outliers were
// timed again (docs/data/group_inner_check_s181_zen4_2t.txt).
// The output alike, whatever the rank (as oc_inner_pays for channel blocks): where a group's channels of an
// NXC-shaped output pixel (NXC data, or NCX through whole-tensor copies; not the row buffer) start or end
// inside a cache line, the next group's pass writes the rest of the line much later, from memory again once
// the output outgrows the caches. Only with one channel-block call per group, as measured: with several, the
// group innermost puts the block outermost (decompose), so lines between groups are still split, and it
// would rule out oc_inner. Zen 4, 2 threads, f32, the 43 grouped layers of the suites and holdouts
// (docs/data/grouped_layers_s21.jsonl), the group innermost forced (group_inner_sweep_s21_*): on NXC data
// where this holds from 2 MiB of output with weights of 64 KB or less, 1.06-1.95x (s211 ho36, 16 -> 96
// channels in 8 groups, 36 MB of output, 1.53-1.69x; s211 ho06, 2 channels per group, 1.81-1.95x), s23 ho45
// 0.98-1.01. The rule against the group outermost, two passes (group_inner_rule_s21_*, with the 1-D rows
// above): the 8 rows it adds 0.97-2.01x, AVX-512 1.88x on ho36, 1.84x on ho06, 1.17-1.21x on s53 ho11, s89
// ho11 and s11 ho15, AVX2 alike. In 16-bit data (one pass over every row the rule takes, 1-D ones included):
// bf16 1.16x (AVX-512) and 1.19x (AVX2) geomean, f16 1.29x and 1.17x, 0.91-3.01, the one below 0.95 a 1-D
// row of the older rule (s11 ho26, bf16).
// Where the kernels write an NXC-shaped output themselves, channels of a pixel adjacent (NXC data, or NCX
// through whole-tensor copies): the one place whose lines the task order can leave half-written (the row
// buffer's flush writes whole runs of a plane). group_inner_pays and oc_inner_pays both ask it.
static bool writes_nxc_lines(const Plan& pl) { return !row_buffered(pl.layout) && pl.dst_c == 1; }

bool group_inner_pays(const Plan& pl, const Problem& p) {
  constexpr int64_t kMinBytes = int64_t{2} << 20, kMaxWeightBytes = int64_t{64} << 10;
  if (pl.packed_weights_floats() * 4 > kMaxWeightBytes) return false;
  const int64_t src_bytes = p.src_elements() * pl.src_elem_bytes();
  const int64_t eb = pl.elem_bytes(), dst_bytes = p.dst_elements() * eb;
  const bool streamed_src = p.spatial_rank == 1 && pl.layout == LayoutPath::nxc && src_bytes >= kMinBytes;
  const bool one_block = pl.oc_blocks / pl.oc_loop == 1;
  const bool line_split = (p.c_out_per_group() * eb) % 64 != 0;
  const bool shared_lines = writes_nxc_lines(pl) && one_block && line_split;
  return streamed_src || (shared_lines && dst_bytes >= kMinBytes);
}

// The channel block innermost (Plan::oc_inner): the direct and gemm families' row tasks with two or more
// channel-block calls per group, not with the group innermost (one order at a time). (Through the row
// buffer one task runs every block into a buffer of whole pixels; a band walks its rows' blocks innermost.)
bool oc_inner_possible(const Plan& pl) {
  const bool family = pl.algorithm == Algorithm::direct || pl.algorithm == Algorithm::gemm;
  return family && pl.oc_blocks / pl.oc_loop > 1 && !pl.group_inner && pl.layout != LayoutPath::ncx_plane_tiles;
}

void choose_oc_inner(Plan& pl, const TuningHints& h) {
  const bool possible = oc_inner_possible(pl);
  check_hint(h.oc_inner != 1 || possible, "oc_inner needs the direct or gemm family with two or more channel "
                                          "blocks per group, without group_inner");
  pl.oc_inner = possible && (h.oc_inner >= 0 ? h.oc_inner == 1 : oc_inner_pays(pl));
}

// With the channel block outermost, each block's pass writes its channels of every output pixel, and where
// a block's channels start or end inside a cache line (pixels, or blocks, not a whole number of lines) the
// next block's pass writes the rest of that line much later, from memory again; innermost, a row's blocks
// finish its lines while they are in cache. Zen 4, 2 threads, f32, on every suite and holdout layer where
// this takes it, against the channel block outermost in one process, two passes
// (docs/data/oc_inner_rule_*_zen4_2t.jsonl): AVX2 NXC 1.022x over 61 (0.96-1.27; s197 ho30, 8 -> 21
// channels folded by 4 into 84 per pixel, 1.27), NCX 1.024x over 9 (0.98-1.08); AVX-512 NXC 1.111x over 9
// (1.01-1.85, ho30), NCX 1.051x over 3. Where lines are not shared it bought nothing on the whole (one noisy
// pass over 80 AVX2 layers), so those keep the block outermost, which keeps one block's weights in cache.
bool oc_inner_pays(const Plan& pl) {
  const int64_t eb = pl.elem_bytes();
  const bool shared_lines = (pl.dst_x * eb) % 64 != 0 || (int64_t{pl.main.vectors} * pl.lanes * eb) % 64 != 0;
  return writes_nxc_lines(pl) && shared_lines;
}

// The one refusal of band_rows.
const char* const kBandRowsNeeds =
    "band_rows needs NCX data through the row buffer (the direct or gemm family) or the dot family's source "
    "copy, or NXC data with widen_src (direct, gemm, dot), rows of 2-D data (an input more than one row high) or of "
    "3-D data with at most one kernel z tap per output plane, no batch blocking and one pass over the input "
    "channels";

// A band is a run of output rows of one output plane: in 3-D it reads input rows of one input plane only
// where each output plane has at most one z tap (a kernel z within the taps' step, such as k = s).
bool band_possible(const Plan& pl) {
  const bool family = pl.algorithm == Algorithm::direct || pl.algorithm == Algorithm::gemm;
  const bool route = (family && pl.layout == LayoutPath::ncx_row_buffer) ||
                     ((family || pl.algorithm == Algorithm::dot) && pl.layout == LayoutPath::nxc && pl.widen_src) ||
                     (pl.algorithm == Algorithm::dot && pl.layout == LayoutPath::ncx_src_copy);
  const Axis& z = pl.axes[0];
  return route && !pl.block_over_batch && pl.ic_blocks == 1 && z.kernel <= z.tap_k_step && pl.axes[1].in > 1;
}

namespace {

constexpr int64_t kBandBytes = 256 << 10;  // input rows per band: a quarter of a 1 MiB L2
constexpr int64_t kBandTasks = 16;         // bands per problem the default height aims at

// Bands of `rows` output rows in the problem: per image and output plane.
int64_t band_count(const Plan& pl, int64_t rows) {
  return pl.batch * pl.axes[0].out * ceil_div(pl.axes[1].out, rows);
}

// Output rows per band of kBandBytes of input rows.
int64_t rows_in_l2(const Plan& pl) {
  const Axis& y = pl.axes[1];
  const int64_t row_bytes = pl.axes[2].in * pl.ic_per_group * pl.groups * pl.src_elem_bytes();
  const int64_t in_rows = std::max<int64_t>(1, kBandBytes / std::max<int64_t>(row_bytes, 1));
  return std::clamp<int64_t>(in_rows * y.tap_k_step / y.tap_i_step, 1, y.out);
}

// The least band height whose input rows are at least 8 times the rows it shares with the next band
// (those are transposed twice): a tap span of (taps - 1) * tap_i_step rows. The dot family asks no such
// margin (see band_rows_pay).
int64_t min_band_rows(const Plan& pl) {
  if (pl.algorithm == Algorithm::dot) return 1;
  const Axis& y = pl.axes[1];
  const int64_t shared = (ceil_div(y.kernel, y.tap_k_step) - 1) * y.tap_i_step;
  return std::min(y.out, 8 * shared * y.tap_k_step / y.tap_i_step);
}

}  // namespace

// Bands of about 256 KB of input rows, halved (not below min_band_rows) until they make 16 tasks.
int64_t default_band_rows(const Plan& pl) {
  const int64_t floor = std::max<int64_t>(1, min_band_rows(pl));
  int64_t rows = std::max(rows_in_l2(pl), floor);
  while (rows > floor && band_count(pl, rows) < kBandTasks)
    rows = std::max((rows + 1) / 2, floor);
  return rows;
}

// Each band transposes its input rows and runs its rows while they are in L2, so the source crosses
// memory once instead of three times, and one parallel loop runs instead of two. Measured against the
// whole-source copy, NCX, 2 threads: the heights of this file's rule on every suite layer
// (docs/data/band_rows_sweep_f32_2t.jsonl): where a 256 KB band holds 8 times the rows it shares with
// the next, 0.97-1.33; 4-8 times, 0.80-1.10 (deconvnet_deconv5 0.80); fewer, 0.73-1.10
// (stylegan2_fused_r64_b4 0.74). The default as it stands (band_rows_default_vs_copy_*_2t.jsonl): f32
// 1.067x geomean on 16 layers, 0.92-1.40 (pointpillars_up1_k1 1.40, resnet50_bwd_l2down_b16 1.27);
// bf16 1.077x on 27, 0.92-1.45. Fewer than 8 bands keep the copy, which every thread shares.
// The dot family (at most 4 output channels) does so little arithmetic per source element that the
// whole copy weighs more than rows transposed twice: bands of about 256 KB pay wherever an image's source
// is larger than one band, though neighbours share a third of their input rows (Zen 4, NCX, 2 threads,
// in one process against the copy, docs/data/dot_bands_default_vs_copy_zen4_2t.jsonl: f32 AVX-512
// fsrcnn_x3 1.07x, espcn_deconv_x3 1.02x; AVX2 1.03x, 1.03x and resnet50_bwd_stem_b16 1.20x; bf16 pairs
// 0.99x, 1.01x), and lose on batches of small images, where a band would be the whole image and the copy
// serves every thread (cdcgan_mnist_h2_b64 0.80-0.95, infogan_mnist_up2_b64 0.75-0.93 at 4-24 rows).
// 3-D layers (bands of one output plane, k = s on z in the suites) gain where an image's source passes
// 1 MiB, whose copy leaves the caches, and rows are whole 8x8 tiles or 24+ pixels: a band transposes row
// by row, a ragged tile at each row's end, where the whole copy joins a plane's rows into whole tiles
// (Zen 4, NCX, 2 threads, in one process against the copy, two passes, docs/data/band3d_*_zen4_2t_p*.jsonl):
// 1.15x geomean over the 13 rows this takes, 0.99-1.68 (nnunet3d_aniso_up5_half 29.5 -> 21.9 ms,
// swinunetr_dec1 32.1 -> 25.7, s11 ho15 (dot) 1.68x); rows of 9-21 pixels lost 0.94-0.95 (unet3d_up1,
// s71 ho40, s23 ho08; s71 ho17, dot, 0.80); below 1 MiB 1.015x over 19, 0.79-1.25 (layers with far more
// output than input channels gain nothing: s211 ho21, 12 -> 768 channels, 0.79). On the rows it takes, one
// pass: f16 1.15x on AVX2 (0.98-1.97, 11 rows), bf16 1.00x (0.91-1.13), AVX-512 1.01-1.02x on 2.
bool band_rows_pay(const Plan& pl) {
  const int64_t rows = default_band_rows(pl);
  const bool enough = band_count(pl, rows) >= kBandTasks / 2;
  const Axis* a = pl.axes.data();
  const int64_t x = a[2].in - pl.halo_left - pl.halo_right;  // the pixels a band transposes per row
  const int64_t image = a[0].in * a[1].in * x * pl.ic_per_group * pl.groups * pl.src_elem_bytes();
  if (a[0].out > 1 && (image <= 4 * kBandBytes || (x < 24 && x % 8 != 0))) return false;
  if (pl.algorithm == Algorithm::dot) return image > kBandBytes && enough;
  return rows_in_l2(pl) >= min_band_rows(pl) && enough;
}

void choose_band_rows(Plan& pl, const TuningHints& h) {
  const bool possible = band_possible(pl);
  check_hint(h.band_rows <= 0 || possible, kBandRowsNeeds);
  check_hint(h.band_rows <= pl.axes[1].out, "band_rows is at most the output height (" +
                                                std::to_string(pl.axes[1].out) + ")");
  // (a band walks its groups within the band: group_inner asked for keeps the band default off)
  if (!possible || h.band_rows == 0 || (h.band_rows < 0 && h.group_inner == 1))
    pl.band_rows = 0;
  else
    pl.band_rows = h.band_rows > 0 ? h.band_rows : band_rows_pay(pl) ? default_band_rows(pl) : 0;
}

}  // namespace deconvjit::detail
