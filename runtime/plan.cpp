// Planning: the axes, the row families (direct, gemm, depthwise, dot) after their route and tile, the
// choices common to all families (threads, blocking, strides), the kernel name, and make_plan_at, which
// runs the stages in order. The register tile: plan_tile.cpp; the route: plan_route.cpp.
#include "runtime/plan.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <sstream>

#include <nlohmann/json.hpp>

#include "runtime/cpu.hpp"
#include "runtime/int_math.hpp"

namespace deconvjit::detail {

void check_hint(bool ok, const std::string& what) {
  if (!ok) throw Error(Error::Kind::InvalidArgument, "tuning hint rejected: " + what);
}

// The one refusal of ic_pairs, whichever step finds that the plan cannot have them.
constexpr const char* kIcPairsNeeds =
    "ic_pairs needs bf16 data, the direct, gemm, dot, col_x or gemm_x family, AVX-512, a CPU with "
    "avx512_bf16 and input channels adjacent (not layout src_in_place)";

bool avx512_bf16_usable(DType t, Isa isa) {
  return t == DType::bf16 && isa == Isa::avx512_core && cpu_has_avx512_bf16();
}

void choose_ic_pairs(Plan& pl, const TuningHints& h) {
  const bool possible = avx512_bf16_usable(pl.dtype, pl.isa) &&
                        (pl.algorithm == Algorithm::direct || pl.algorithm == Algorithm::gemm ||
                         pl.algorithm == Algorithm::dot || pl.algorithm == Algorithm::col_x ||
                         pl.algorithm == Algorithm::gemm_x) &&
                        pl.layout != LayoutPath::ncx_src_in_place;  // pairs need channels adjacent
  check_hint(h.ic_pairs != 1 || possible, kIcPairsNeeds);
  // A source asked to be widened to f32 cannot be read in pairs: unless they too are asked for, no pairs.
  pl.ic_pairs = possible && h.ic_pairs != 0 && !(h.ic_pairs == -1 && h.widen_src == 1);
}

Axis make_axis(const Problem& p, int i) {
  Axis a;
  a.in = p.in[i];
  a.kernel = p.kernel[i];
  a.stride = p.stride[i];
  a.dilation = p.dilation[i];
  a.pad_begin = p.pads_begin[i];
  a.out = p.out[i];
  const int64_t g = std::gcd(a.stride, a.dilation);
  a.tap_k_step = a.stride / g;
  a.tap_i_step = a.dilation / g;
  return a;
}

namespace {

// Output o + pad_begin = (f + q) s + phase for folded pixel f, with q = floor(pad_begin / s) and
// fold_shift = pad_begin - q s: folded channel phase * C_OUT + oc of pixel f is output f s + phase - fold_shift,
// and its tap j (kernel x phase + j s) reads input f + q - j, a stride-1 correlation with pad q.
void fold_x_phases(Plan& pl) {
  Axis& x = pl.axes[2];
  const int64_t q = floor_div(x.pad_begin, x.stride), folded = ceil_div(x.out + x.pad_begin - q * x.stride, x.stride);
  pl.fold_stride = x.stride;
  pl.fold_shift = x.pad_begin - q * x.stride;
  pl.fold_tail = folded * x.stride - x.out - pl.fold_shift;
  pl.oc_per_group *= x.stride;
  pl.dst_channels *= x.stride;
  x.out = folded;
  x.kernel /= x.stride;
  x.pad_begin = q;
  x.stride = x.tap_k_step = x.tap_i_step = 1;
}

// vdpbf16ps reduces two input channels per instruction at twice the f32 FMA rate (Zen 5, measured:
// 409 against 222 GFLOP/s, one core). It reads channel pairs from a contiguous NXC pixel, so the
// source must have input channels adjacent (every route but in_kernel, which is f32 only anyway, and
// src_in_place, which has no pairs).
BlockKind make_kind(const Plan& pl, int vectors, int mask_lanes) {
  BlockKind k;
  k.vectors = vectors;
  k.mask_lanes = mask_lanes;
  const bool dot = pl.algorithm == Algorithm::dot;
  k.wei_ic_step = dot ? pl.lanes : int64_t{vectors} * pl.lanes;  // dot: one input-channel vector
  const int64_t steps = pl.ic_pairs ? (pl.ic_per_group + 1) / 2 : pl.ic_per_group;
  k.wei_k_floats = dot ? vectors * pl.ic_vectors * pl.lanes : steps * k.wei_ic_step;
  const int64_t per_tap = k.wei_k_floats;
  const Axis &az = pl.axes[0], &ay = pl.axes[1], &ax = pl.axes[2];
  k.wei_tap_step[2] = ax.tap_k_step * per_tap;
  k.wei_tap_step[1] = ay.tap_k_step * ax.kernel * per_tap;
  k.wei_tap_step[0] = az.tap_k_step * ay.kernel * ax.kernel * per_tap;
  return k;
}

void choose_threading(Plan& pl, const TuningHints& h) {
  if (pl.layout == LayoutPath::ncx_plane_tiles) {  // the tasks are the tiles: whole rows
    check_hint(h.x_split <= 1, "layout plane_tiles computes whole rows (x_split 1)");
    pl.x_split = 1;
    return;
  }
  const int64_t images = pl.block_over_batch ? 1 : pl.batch;
  const int64_t rows = pl.groups * pl.block_tasks() * images * pl.axes[0].out * pl.axes[1].out;
  const Axis& x = pl.axes[2];
  const int64_t q_max = pl.block_over_batch ? x.out * pl.ur_w : ceil_div(x.out, x.stride);
  int64_t split = 1;
  if (rows < kTargetTasks) {
    split = ceil_div(kTargetTasks, rows);
    split = std::min(split, std::max<int64_t>(1, q_max / (2 * pl.ur_w)));
  }
  if (h.x_split) split = h.x_split;
  check_hint(split >= 1 && split <= 4096, "x_split must be in [1, 4096]");
  pl.x_split = static_cast<int>(split);
}

std::string join_x(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "x" : "") + std::to_string(v[i]);
  return s;
}

std::string make_name(const Plan& pl, const Problem& p) {
  std::ostringstream os;
  os << "deconv_" << deconvjit::to_string(p.dtype) << '_'
     << (p.data_format == DataFormat::NXC ? "nxc" : "ncx") << "_s" << join_x(p.stride) << "_k"
     << join_x(p.kernel);
  if (pl.groups > 1) os << "_g" << pl.groups;
  if (pl.algorithm != Algorithm::direct) os << '_' << to_string(pl.algorithm);
  if (pl.layout == LayoutPath::ncx_src_in_place) os << "_inplace";
  if (pl.layout == LayoutPath::ncx_plane_tiles) os << "_pt" << pl.channels_per_call;
  if (pl.block_over_batch) os << "_nblk";
  if (pl.has_halo()) os << (pl.edges.empty() ? "_halo" : "_halo_edge");
  if (pl.flat_plane)
    os << "_flat";
  else if (pl.rows_per_block > 1)
    os << "_rows" << pl.rows_per_block;
  if (pl.x_chunk) os << "_xc" << pl.x_chunk;
  if (pl.ic_blocks > 1) os << "_icb" << pl.ic_block;
  if (pl.ic_pairs) os << "_icp";
  if (pl.bf16_even_odd) os << "_eo";
  if (pl.fused_x_taps) os << "_fx";
  if (pl.widen_src) os << "_w32";
  if (pl.band_rows) os << "_bnd" << pl.band_rows;
  if (pl.ic_unroll > 1) os << "_u" << pl.ic_unroll;  // the code differs by its unroll
  if (pl.oc_loop > 1) os << "_ocl";
  if (pl.nt_stores) os << "_nt";
  if (pl.pack_src) os << "_pk";
  if (pl.prefetch_src) os << "_pf";
  if (pl.group_inner) os << "_gi";
  if (pl.oc_inner) os << "_oi";
  if (weight_regs_possible(pl) && pl.weight_regs < pl.main.vectors) os << "_wr" << pl.weight_regs;
  os << "_ur" << pl.ur_w << 'x' << pl.oc_vectors << "__" << deconvjit::to_string(pl.isa);
  return os.str();
}

}  // namespace

// Parts off the lines split each plane line they share between two tasks' flushes, and none of a part's
// tile stores starts a line, so none is non-temporal (tile16). Where the flush runs in tiles (AVX-512, rows
// of whole lines) and a part holds 4 lines or more (fewer would lose the parts' balance), parts are rounded
// up to whole lines. Zen 4, 2 threads, in one process against parts as split (docs/data/row_parts_on_lines_*):
// f32 1.046x over the 25 rows this takes (two passes; 0.96-1.38, s151 ho34, a 1-D depthwise layer of 200000
// outputs, 1.33-1.38x; s223 ho12, 8 -> 128 channels, 1.20-1.26x), bf16 1.051x over 16, f16 1.059x over 12
// (0.97-1.43). All parts rounded alike, AVX2 and short parts included: 1.014-1.021x, 0.58-1.38 (a 21-output
// row in parts of 16 and 5: 0.58).
int64_t Plan::row_part_width() const {
  // (gemm: pixels of fold_stride outputs, so a line is line / fold_stride of them where that divides)
  const int64_t width = ceil_div(axes[2].out, x_split), line = 64 / elem_bytes() / fold_stride;
  if (!row_buffered(layout) || !flush_in_tiles(*this) || line * fold_stride * elem_bytes() != 64 ||
      width < 4 * line)
    return width;
  return std::min(axes[2].out, ceil_div(width, line) * line);
}

int64_t Plan::packed_weights_floats() const {
  if (algorithm == Algorithm::col) return 0;  // the inner kernel's packed weights are what is stored
  if (algorithm == Algorithm::depthwise_x)  // per channel: [kz][ky][x tap][lane]
    return dst_channels * axes[0].kernel * axes[1].kernel * main.wei_k_floats;
  if (algorithm == Algorithm::dot_x)  // per (input, output) channel pair, likewise
    return ic_per_group * oc_per_group * axes[0].kernel * axes[1].kernel * main.wei_k_floats;
  if (algorithm == Algorithm::col_x)  // per group and channel block: [ic or pair][kz][ky][block's oc][kx]
    return (ic_pairs ? (ic_per_group + 1) / 2 : ic_per_group) * axes[0].kernel * axes[1].kernel * axes[2].kernel *
           dst_channels;
  if (algorithm == Algorithm::gemm_x)  // per group and channel block: [ic or pair][block's (oc, kz, ky, kx)]
    return groups * ic_steps(*this) * ((oc_blocks - 1) * main.wei_k_floats + last.wei_k_floats);
  const int64_t taps = axes[0].kernel * axes[1].kernel * axes[2].kernel;
  return groups * taps * ((oc_blocks - 1) * main.wei_k_floats + last.wei_k_floats);
}

namespace {

// Small rows with several images: blocks across images keep every register block full.
// (Not where gemm's folded pixels overhang the row: a block of images would need a scratch block per image.)
bool choose_batch_blocking(const Plan& pl, const TuningHints& h) {
  const bool clipped = pl.overhangs_row();
  check_hint(h.batch_block != 1 || (pl.algorithm != Algorithm::depthwise && pl.batch >= 2 && !clipped),
             "batch_block needs a family other than depthwise, at least 2 images, and (gemm) x pads_begin and "
             "output size multiples of the x stride");
  if (h.batch_block >= 0) return h.batch_block == 1;
  if (clipped) return false;
  // The dot family's fused x taps load each source vector once for all the taps it meets along a row, which
  // blocks of images cannot: where the row would fuse, it stays a row. Holdout s229 ho31 (16 images of 8 x 8,
  // 128 -> 1, kernel 16 stride 8; 2 threads, AVX-512): f32 0.63 -> 0.32 ms, f16 1.31x. The other dot rows
  // that block over images (no fused taps) keep it: 0.68-1.20x without it, 0.93 geomean, but for ho31 in
  // bf16 (channel pairs, no fusion), 1.52x without: one row, not understood, not taken
  // (docs/data/dot_nblk_fused_zen4_2t.txt).
  if (pl.algorithm == Algorithm::dot && dot_row_fuses(pl, h)) return false;
  const Axis& x = pl.axes[2];
  return pl.algorithm != Algorithm::depthwise && batch_blocking_pays(pl.batch, x.out, x.stride, pl.isa);
}

// The reduction over input channels can run in passes: a task runs each slice of the channels over its
// row part in turn, and later passes resume from the partial sums in dst (a fixed pass order, so results
// do not depend on threads). A tuning choice only: on sbl_deconv1 (2048 channels, 33 MB of weights) one
// core measured 5.2 ms with 16 passes and 4.7 ms with one (passes then ran over the whole dst); with the
// passes inside each task, 2 to 16 passes still measured 0.56-1.04x of one on resnet50_bwd_l2down_b16,
// densepose_index_uv_b8 and vitdet_b_p2_up2 (NXC, 2 threads), so the heuristic never splits.
void choose_ic_blocks(Plan& pl, const TuningHints& h) {
  pl.ic_block = pl.ic_per_group;
  pl.ic_blocks = 1;
  if (h.ic_block <= 0 || h.ic_block == pl.ic_per_group) return;  // one pass, stated or not
  const bool possible = (pl.algorithm == Algorithm::direct || pl.algorithm == Algorithm::gemm) &&
                        (pl.layout == LayoutPath::nxc || pl.layout == LayoutPath::ncx_via_scratch);
  check_hint(possible, "ic_block needs the direct or gemm family and NXC data (or NCX layout scratch)");
  // Later passes resume from dst: in a 16-bit type the partial sums would be rounded on the way.
  check_hint(pl.dtype == DType::f32, "ic_block splits the reduction through dst: f32 data only");
  check_hint(pl.ic_per_group % h.ic_block == 0,
             "ic_block must divide C_IN/G (" + std::to_string(pl.ic_per_group) + ")");
  pl.ic_block = h.ic_block;
  pl.ic_blocks = pl.ic_per_group / h.ic_block;
}

// A depthwise block does taps x vectors FMAs per pixel: a call per block would cost more than the
// block (AVX2 dla_up_dw256: 16 blocks of 16 channels per pixel). One call walks them all.
// (Not into a row buffer, whose tasks take a block each or all of them, nor with a channel tail.)
void choose_oc_loop(Plan& pl, const TuningHints& h) {
  const bool walk_ok = pl.algorithm == Algorithm::depthwise && !pl.has_tail() &&
                       !row_buffered(pl.layout);
  // (plane tiles: the blocks of a task's tile)
  const bool tiles = pl.layout == LayoutPath::ncx_plane_tiles;
  const int all = static_cast<int>(tiles ? pl.channels_per_call / (pl.main.vectors * pl.lanes) : pl.oc_blocks);
  check_hint(h.oc_loop <= 1 || (walk_ok && h.oc_loop == all),
             "oc_loop is 1, or all channel blocks (" + std::to_string(all) +
                 ") for the depthwise family without a channel tail or row buffer");
  pl.oc_loop = h.oc_loop ? h.oc_loop : walk_ok ? all : 1;
}

// Where the source lies, per layout: the kernels read it through these (they do not depend on x_split).
void set_src_strides(Plan& pl) {
  const auto& a = pl.axes;
  const int64_t in_sp = a[0].in * a[1].in * a[2].in;
  if (pl.layout == LayoutPath::ncx_in_kernel || pl.layout == LayoutPath::ncx_src_in_place)
    pl.src_c = in_sp, pl.src_x = 1, pl.src_n = pl.src_channels * in_sp;
  else if (pl.layout == LayoutPath::ncx_plane_tiles)  // one task's tile of one image
    pl.src_c = 1, pl.src_x = pl.channels_per_call, pl.src_n = in_sp * pl.channels_per_call;
  else
    pl.src_c = 1, pl.src_x = pl.src_channels, pl.src_n = in_sp * pl.src_channels;
  pl.src_ic_stride = pl.src_c;
  pl.src_pix_stride = pl.block_over_batch ? pl.src_n : pl.src_x;
  pl.src_tap_step[2] = -a[2].tap_i_step * pl.src_x;
  pl.src_tap_step[1] = -a[1].tap_i_step * a[2].in * pl.src_x;
  pl.src_tap_step[0] = -a[0].tap_i_step * a[1].in * a[2].in * pl.src_x;
}

void set_dst_strides(Plan& pl) {
  const auto& a = pl.axes;
  const int64_t out_sp = a[0].out * a[1].out * a[2].out;
  if (pl.layout == LayoutPath::ncx_in_kernel || pl.layout == LayoutPath::ncx_src_copy)
    pl.dst_c = out_sp, pl.dst_x = 1, pl.dst_n = pl.dst_channels * out_sp;
  else if (pl.layout == LayoutPath::ncx_plane_tiles)
    pl.dst_c = 1, pl.dst_x = pl.channels_per_call, pl.dst_n = out_sp * pl.channels_per_call;
  else if (pl.layout != LayoutPath::ncx_src_in_place)
    pl.dst_c = 1, pl.dst_x = pl.dst_channels, pl.dst_n = a[0].out * a[1].out * pl.dst_row_elements();
  if (row_buffered(pl.layout)) {
    // The buffer holds one channel block of one task's part of a row, for each image in the task (gemm, and
    // the direct family with oc_inner: every block of the group, Plan::row_buffer_whole_pixels).
    const int64_t width = pl.row_part_width();
    pl.dst_x = pl.row_buffer_whole_pixels() ? pl.oc_per_group : int64_t{pl.main.vectors} * pl.lanes;
    pl.dst_n = width * pl.dst_x;
    pl.row_buffer_floats = pl.dst_n * (pl.block_over_batch ? pl.batch : 1);
  }
  pl.dst_pix_stride = pl.block_over_batch ? pl.dst_n : a[2].stride * pl.dst_x;
}

// The most lines that `w` source pixels `stride` bytes apart hold in one L1 set at one channel offset
// (64-byte lines, 64 sets: lines 4 KiB apart share a set; pixels closer than a line share it).
int lines_per_l1_set(int64_t stride, int w) {
  std::map<int64_t, int> sets;
  int64_t last_line = -1;
  int most = 0;
  for (int p = 0; p < w; ++p) {
    const int64_t line = p * stride / 64;
    if (line != last_line) most = std::max(most, ++sets[line % 64]);
    last_line = line;
  }
  return most;
}

// Each step of a block's reduction reads one channel of each of its ur_w pixels: a cache line each, at
// the same offset. Pixels a large power of two apart put those lines in few L1 sets: 28 pixels of 512
// f32 channels (2 KiB apart) are 14 lines in each of 2 sets, more than an 8-way L1 (Skylake, Zen 4; 12
// ways on Zen 5) keeps, so the lines leave before their next channels are read and come back from L2,
// a line per FMA at one vector of outputs. Blocks are narrowed until no set holds more than 8 such lines,
// and balanced along the row. Measured, NXC f32, 2 threads: densepose_ann_index_b8 (15 output channels:
// one vector, 28 pixels) 6.1 -> 5.1 ms at 14 pixels; 1024 -> 12 channels, 3x3 s2 on 28x28 4.52 -> 1.44
// ms at 7. f16 widening 4+ channels of a pixel at once (f16_grouped_widening) reads each line a quarter
// as often and tolerates 16: 1024 -> 8 channels (2 KiB apart) fastest at 28 pixels (3.50 ms; 14: 3.67),
// 2048 -> 16 (4 KiB apart) at 14 (4.09 ms; 28: 6.09, 7: 4.57).
void fit_block_to_l1_sets(Plan& pl, const TuningHints& h) {
  if (h.ur_w || pl.src_ic_stride != 1) return;  // NCX read in place: a block's pixels share lines
  const int64_t stride = pl.src_pix_stride * pl.src_elem_bytes();
  const int ways = f16_grouped_widening(pl) && pl.ic_unroll >= 4 ? 16 : 8;
  int fit = pl.ur_w;
  while (fit > 1 && lines_per_l1_set(stride, fit) > ways) --fit;
  if (fit != pl.ur_w) narrow_block(pl, fit);
}

// Depthwise: a phase's x taps read source pixels tap_i_step apart, so a block of w pixels and n taps reads
// w + (n - 1) k of them where the tap loop loads w n. Fused, each vector is loaded (and widened) once for
// all the taps (jit/deconv_direct.cpp, emit_fused_x). Measured against the loop on Zen 4 (2 threads, NXC,
// the 11 depthwise suite layers it takes, docs/data/fused_x_taps_zen4_2t.jsonl): AVX-512 f16 1.07-1.45x
// (geomean 1.27), bf16 1.01-1.34x (1.15), f32 0.95-1.23x (1.07; the 0.95, dla_up_dw256 at 18 us, re-timed
// 1.03); AVX2 f16 0.95-1.42x (1.11), f32 0.91-1.21x (1.05; the 0.91-0.95 are dla34_centernet_dw64_f2_b16,
// 67 MB). Where x phases have 1 and 2 taps (kernel 3, stride 2) and the output reaches 16 MB it lost
// (mobilenetv2_bwd_dw96_b16 f16 38 MB 0.82x, bf16 0.84x; kernel-3 variants at 25-51 MB 0.86-0.98x; at
// 4-10 MB they gained 1.05-1.16x): not understood, so not taken there.
constexpr int64_t kFuseMixedMaxBytes = 16 << 20;

void choose_fused_x_taps(Plan& pl, const Problem& p, const TuningHints& h) {
  const bool possible = fuse_x_possible(pl);
  check_hint(h.fuse_x_taps != 1 || possible,
             "fuse_x_taps needs the depthwise or dot family (dot without bf16 pairs or even/odd halves) with 2+ "
             "x taps in a phase, no batch blocking, and "
             "registers for the taps' weights next to the block's accumulators");
  const bool wanted = fuse_x_pays(pl, p);
  pl.fused_x_taps = possible && (h.fuse_x_taps >= 0 ? h.fuse_x_taps == 1 : wanted) ? max_x_taps(pl) : 0;
}

// The steps that follow the tile, whatever the family.
void finish_rows(Plan& pl, const TuningHints& h) {
  choose_acc_chains(pl);
  set_src_strides(pl);
  fit_block_to_l1_sets(pl, h);
  fit_block_to_streams(pl, h);
  choose_threading(pl, h);
  set_dst_strides(pl);
}

// The row families (direct, gemm, depthwise, dot) after the layout is fixed.
void plan_rows(Plan& pl, const Problem& p, const TuningHints& h) {
  Axis& x = pl.axes[2];
  pl.algorithm = choose_algorithm(p, pl.isa, x, pl.layout, h);
  if (pl.algorithm == Algorithm::gemm) {
    fold_x_phases(pl);
  } else if (pl.algorithm == Algorithm::depthwise) {
    pl.groups = 1;
    pl.oc_per_group = p.c_out;
  }
  pl.block_over_batch = choose_batch_blocking(pl, h);
  choose_halo(pl, h);

  const int64_t n_vec = ceil_div(pl.oc_per_group, pl.lanes);
  if (pl.algorithm == Algorithm::dot) {
    choose_ic_blocks(pl, h);  // rejects an ic_block hint: the dot family reduces in one pass
    choose_ic_pairs(pl, h);
    choose_widen_src(pl, p, h);
    // bf16 widened to f32 (no pairs): each pair of whole channel vectors is loaded once and split by a
    // shift (even channels) and a mask (odd ones); the sum over channels does not mind their order.
    pl.bf16_even_odd = pl.dtype == DType::bf16 && !pl.ic_pairs && !pl.widen_src && pl.ic_per_group >= 2 * pl.lanes;
    choose_dot_tile(pl, h);
    pl.oc_blocks = 1;
    pl.main = pl.last = make_kind(pl, pl.oc_vectors, 0);
    check_hint(h.oc_loop <= 1, "oc_loop applies to the depthwise family");
    choose_band_rows(pl, h);
    finish_rows(pl, h);
    return choose_fused_x_taps(pl, p, h);
  }
  choose_tile(pl, h, n_vec);
  if (pl.layout == LayoutPath::ncx_plane_tiles) {
    const int nv = pl.oc_vectors;
    choose_plane_tile(pl, p, h);
    TuningHints cut = h;  // a narrower block: its own width (ur_w)
    cut.oc_vectors = pl.oc_vectors;
    if (pl.oc_vectors != nv) choose_tile(pl, cut, n_vec);
  }
  choose_ic_pairs(pl, h);
  pl.oc_blocks = ceil_div(n_vec, pl.oc_vectors);
  pl.main = make_kind(pl, pl.oc_vectors, 0);
  const int last_vectors = static_cast<int>(n_vec - (pl.oc_blocks - 1) * pl.oc_vectors);
  pl.last = make_kind(pl, last_vectors, static_cast<int>(pl.oc_per_group % pl.lanes));
  if (pl.oc_blocks == 1) pl.main = pl.last;
  choose_oc_loop(pl, h);
  choose_ic_blocks(pl, h);
  choose_widen_src(pl, p, h);
  choose_band_rows(pl, h);
  // bf16 depthwise widens a pair of vectors by a shift and a mask (no shuffle per FMA; AVX2 1.15-1.30x on
  // all 11 suite layers, docs/DTYPES.md). Whole vector pairs (so no masks), and registers for the even
  // and odd vectors (AVX-512: and the odd-channel mask; AVX2 reads it from memory).
  const int even_odd_regs = pl.isa == Isa::avx512_core ? 3 : 2;
  pl.bf16_even_odd = !pl.widen_src && pl.algorithm == Algorithm::depthwise && pl.dtype == DType::bf16 &&
                     pl.oc_per_group % (2 * pl.lanes) == 0 && pl.oc_vectors % 2 == 0 &&
                     pl.ur_w * pl.oc_vectors + pl.oc_vectors + even_odd_regs <= vector_registers(pl.isa);
  finish_rows(pl, h);
  choose_fused_x_taps(pl, p, h);
}

void check_family_hints(const Plan& pl, const TuningHints& h) {
  check_hint(h.channels_per_call == 0 || pl.algorithm == Algorithm::depthwise_x ||
                 pl.layout == LayoutPath::ncx_plane_tiles,
             "channels_per_call applies to the depthwise_x family and layout plane_tiles");
  check_hint((h.rows_per_block == 0 && h.flat_plane == -1 && h.oc_chunk == 0 && h.row_chunk == 0) ||
                 pl.algorithm == Algorithm::gemm_x,
             "rows_per_block, flat_plane, oc_chunk and row_chunk apply to the gemm_x family");
  check_hint(h.pack_src != 1 || pl.algorithm == Algorithm::gemm_x, "pack_src applies to the gemm_x family");
  check_hint(h.ic_pairs != 1 || pl.ic_pairs, kIcPairsNeeds);
  check_hint(h.widen_src != 1 || pl.widen_src, kWidenSrcNeeds);
  check_hint(h.band_rows <= 0 || pl.band_rows > 0, kBandRowsNeeds);
  check_hint(!h.weight_regs || weight_regs_possible(pl), kWeightRegsNeeds);
  check_hint(h.edge_blocks != 1 || edge_blocks_possible(pl),
             "edge_blocks needs the direct or gemm family with the x halo and blocks along x");
}

// Tiny problems run on the calling thread unless told otherwise (col follows its inner kernel). Little
// arithmetic on many elements still pays for a fork: each core brings its own bandwidth (dcgan64_g1_b1, a
// 1x1 input and 3.2 MB of weights read once: 0.041 ms on one thread, 0.023 ms on two), and one or two
// channels leave most lanes empty, so such kernels take longer than their FLOPs say. Zen 4, 2 threads,
// every suite and holdout row under 2 MFLOP, serial -> parallel (docs/data/parallel_small_zen4_2t.jsonl):
// from 16K elements of operands 1.02-1.96x in all three types on AVX-512 (lapsrn_img_l1, one channel, NXC
// f32 110 -> 58 us; holdout s89 ho38, depthwise, 36 -> 21 us; the least, s37 ho36 at 25K elements,
// 1.02-1.32x), 0.92-1.96x on AVX2 (ho36 at 3-4 us the one below 1); below 16K, layers of 2-6 us,
// 0.60-1.46x.
void choose_parallel(Plan& pl, const Problem& p, const TuningHints& h) {
  const int64_t elements = p.src_elements() + p.weights_elements() + p.dst_elements();
  pl.parallel = h.parallel >= 0 ? h.parallel == 1 : p.flops() >= kSerialFlops || elements >= kSerialElements;
}

}  // namespace

bool fuse_x_pays(const Plan& pl, const Problem& p) {
  if (pl.algorithm == Algorithm::dot) return dot_fusion_pays(pl, pl.ur_w);
  const Axis& x = pl.axes[2];
  const bool every_phase = x.kernel / x.tap_k_step >= 2;
  return every_phase || p.dst_elements() * pl.elem_bytes() < kFuseMixedMaxBytes;
}

bool batch_blocking_pays(int64_t batch, int64_t out_x, int64_t stride_x, Isa isa) {
  const int64_t q_max = ceil_div(out_x, stride_x);
  const int full_ur = isa == Isa::avx512_core ? 6 : 4;
  return batch >= 4 && q_max < 2 * full_ur;
}

// Registers: the accumulators, each tap's weights and a source vector (bf16 pairs: twice, and the mask);
// dot: the accumulators, its weight vectors, the source vector and each tap's weights (not on bf16 channel
// pairs or even/odd halves, which load the source their own way).
bool fuse_x_possible(const Plan& pl) {
  const int taps = max_x_taps(pl);
  if (pl.block_over_batch || taps < 2) return false;
  if (pl.algorithm == Algorithm::dot)
    return !pl.ic_pairs && !pl.bf16_even_odd &&
           (pl.ur_w + 1 + taps) * pl.oc_vectors + 1 <= vector_registers(pl.isa);
  const int per = pl.bf16_even_odd ? 2 : 1;
  const int mask = pl.bf16_even_odd && pl.isa == Isa::avx512_core;
  const int need = pl.ur_w * pl.oc_vectors + per * (taps + 1) + mask;
  return pl.algorithm == Algorithm::depthwise && need <= vector_registers(pl.isa);
}

Plan make_plan_at(const Problem& p, Isa isa, const TuningHints& h) {
  Plan pl;
  pl.isa = isa;
  pl.lanes = vector_lanes(isa);
  pl.dtype = p.dtype;
  pl.user_layout = p.data_format;
  const int off = 3 - p.spatial_rank;
  for (int i = 0; i < p.spatial_rank; ++i) pl.axes[off + i] = make_axis(p, i);
  pl.batch = p.batch;
  pl.groups = p.groups;
  pl.ic_per_group = pl.ic_block = p.c_in_per_group();
  pl.src_channels = p.c_in;
  pl.oc_per_group = p.c_out_per_group();
  pl.dst_channels = p.c_out;

  // The family first (it decides how NCX data flows), then the layout, then gemm, which needs an
  // NXC-shaped destination: one decision each, made once. col is the default only without any hint: a
  // tile or layout hint keeps the row families, which can honour it.
  // bf16 channel pairs reduce at twice the rate of col's f32 GEMM (col_preferred).
  if (h.algorithm == "col" || (h.empty() && col_preferred(p, isa) && !avx512_bf16_usable(p.dtype, isa))) {
    // Its GEMM and its sums of taps are f32 (16-bit data widened exactly): not for sums in halves.
    check_hint(p.accumulation == DType::f32, "algorithm col needs accumulation f32");
    plan_col(pl, p, isa, h);
  } else {
    Algorithm family = choose_algorithm(p, isa, pl.axes[2], LayoutPath::nxc, h);
    if (one_channel_native(p, isa, pl.axes[2], h)) family = Algorithm::depthwise;
    Algorithm native = family;
    pl.layout = choose_layout(p, isa, h, family, native);
    if (pl.layout != LayoutPath::ncx_native) {
      plan_rows(pl, p, h);
      choose_edge_blocks(pl, h);
    } else if (native == Algorithm::depthwise_x)
      plan_depthwise_x(pl, p, h);
    else if (native == Algorithm::dot_x)
      plan_dot_x(pl, p, h);
    else if (native == Algorithm::col_x)
      plan_col_x(pl, p, h);
    else
      plan_gemm_x(pl, p, h);
    check_family_hints(pl, h);
    choose_nt_stores(pl, p, h);
    choose_prefetch_src(pl, p, h);
    choose_group_inner(pl, p, h);
    choose_oc_inner(pl, h);
    if (pl.oc_inner && row_buffered(pl.layout)) set_dst_strides(pl);  // (a buffer of whole pixels)
    choose_parallel(pl, p, h);
    pl.packing = pl.packing_signature();
  }
  pl.bf16_vcvt = avx512_bf16_usable(pl.dtype, isa);
  pl.name = make_name(pl, p);
  pl.choices = plan_choices(pl);
  return pl;
}

}  // namespace deconvjit::detail
