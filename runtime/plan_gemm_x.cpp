// Planning for the gemm_x family: NCX data, K == s on every axis, no pads. Each input pixel then feeds
// exactly one output per kernel position, out[co][s*iz+kz][s*iy+ky][s*ix+kx] = sum_ci in[ci][iz][iy][ix] *
// w[ci][co][kz][ky][kx], so the kernel is a GEMM with the vector along input x (contiguous in NCX) and
// one accumulator per (vector, output channel, kernel position). With stride 2 on x the two x phases of
// an output row are interleaved in registers before the store; with stride 1 (a pointwise layer, or
// K = s = 1 on x only) each vector is stored as it is. Nothing is copied or transposed.
#include <algorithm>

#include "runtime/cpu.hpp"
#include "runtime/int_math.hpp"
#include "runtime/plan.hpp"

namespace deconvjit::detail {
namespace {

// AVX-512: 24 accumulators leave room for the input vectors (up to 3) and two broadcasts, as in the row
// families. AVX2's 16 registers: 12 accumulators, 3 input vectors and one broadcast (which doubles as the
// load mask of a ragged vector; at the store all four are the interleave's scratch).
constexpr int kAccumulators = 24;
int accumulators(Isa isa) { return isa == Isa::avx2 ? 12 : kAccumulators; }
constexpr int kInputVectors = 3;

// What one core's L2 holds comfortably next to the streams (1 MiB on the machines measured).
constexpr int64_t kL2Bytes = int64_t{1} << 20;

// Rows of more than 64 vectors run in chunks of at most 64 vectors, as equal as whole vectors allow (the
// last may be shorter): the kernel unrolls a call's blocks along x, so its code grows with the row. Each
// chunk is a call (and a task) of its own. (Chunks whose source fits a quarter of L2 measured no faster:
// holdout s97 ho02, 192 -> 8 channels per group over rows of 17808, 0.711x and 0.718x against col_x with
// chunks of 62 and 21 vectors; docs/data/gemm_x_chunks_zen4_2t.jsonl.)
constexpr int64_t kMaxChunkVectors = 64;

int64_t choose_x_chunk(const Plan& pl) {
  const int64_t row_vectors = ceil_div(pl.axes[2].in, pl.lanes);
  if (row_vectors <= kMaxChunkVectors) return 0;
  return ceil_div(row_vectors, ceil_div(row_vectors, kMaxChunkVectors)) * pl.lanes;
}

// A small plane of one image may fit one tile, and then one thread: a task count that does not depend on
// the threads, as in the other families, halving the row chunk and the channel chunk in turn (a tile's
// source or weights are then read by several tasks, from L2 or L3). Zen 4, 2 threads, every suite and
// holdout layer this moves, L2 tiles against smaller ones: from fewer than 16 tasks f32 1.17x (1.00-1.99:
// holdout s89 ho44, 384 -> 48 channels over one 28x14 plane, one tile, 0.510 -> 0.256 ms; s71 ho07, 4
// tiles, 1.24x; yolov8n_proto, 7, 1.11x), bf16 1.07x, f16 1.07x (ho44 1.01x in that run, 0.529 -> 0.270
// ms timed again); from 16 to 31 even (f32 and f16 1.007x, bf16 0.997x: its channel pairs repacked the
// source per task, 0.95x where channels were cut, before pack_src_pays counted the task's blocks).
// Measured on 2 threads only: 16 tasks keep 2-8 threads busy; more threads would want more.
constexpr int64_t kMinTasks = 16;

void split_tiles_for_tasks(Plan& pl, int64_t groups) {
  const int64_t outer = pl.batch * pl.groups * pl.axes[0].in * x_chunks(pl);
  auto tasks = [&] { return outer * ceil_div(groups, pl.row_chunk) * ceil_div(pl.oc_blocks, pl.oc_chunk); };
  for (bool rows = true; tasks() < kMinTasks && (pl.row_chunk > 1 || pl.oc_chunk > 1); rows = !rows) {
    if ((rows && pl.row_chunk > 1) || pl.oc_chunk == 1) pl.row_chunk = ceil_div(pl.row_chunk, int64_t{2});
    else pl.oc_chunk = ceil_div(pl.oc_chunk, int64_t{2});
  }
}

// Each input channel of a block lies a whole plane further on, so neither an image's source nor all the
// weights need fit anywhere: a tile of row groups x channel blocks keeps its weights (half of L2) and
// its rows' source (a quarter) resident while the tile runs.
void choose_tiles(Plan& pl, const TuningHints& h) {
  const int64_t weights_per_block = ic_steps(pl) * pl.main.wei_k_floats * 4;
  const int64_t row = pl.x_chunk ? pl.x_chunk : pl.axes[2].in;  // of one task
  const int64_t source_per_group = pl.ic_per_group * pl.rows_per_block * row * 4;
  const int64_t groups = ceil_div(pl.axes[1].in, pl.rows_per_block);
  pl.oc_chunk = std::clamp<int64_t>(kL2Bytes / 2 / weights_per_block, 1, pl.oc_blocks);
  pl.row_chunk = std::clamp<int64_t>(kL2Bytes / 4 / source_per_group, 1, groups);
  split_tiles_for_tasks(pl, groups);
  check_hint(h.oc_chunk <= pl.oc_blocks && h.row_chunk <= groups,
             "gemm_x: oc_chunk at most " + std::to_string(pl.oc_blocks) + " channel blocks, row_chunk at most " +
                 std::to_string(groups) + " row groups");
  if (h.oc_chunk) pl.oc_chunk = h.oc_chunk;
  if (h.row_chunk) pl.row_chunk = h.row_chunk;
}

// The rows of a row group lie one input plane apart from channel to channel. When that distance is a
// multiple of 8 KiB they share at most 8 set offsets of the L2 (1 MiB in 16 ways: sets recur every
// 64 KiB), and more than 16 channels evict each other before the tile's next channel block comes back for
// them; a contiguous tile does not. The copy pays only where a second channel block reads it.
// Measured with pack_src 1 against 0 on every gemm_x layer of the suites (docs/data/pack_src_sweep_*;
// time without / with, 2 threads). f32: planes of 16 KiB vitdet_l_p2_up1 1.55, sam_mask_up1_b16 1.24;
// 128-512 KiB nnunet3d_up64_halfz 1.23, unet_milesial_up4 1.17; 1.04-1.21 on every other such layer; but
// 0.98 at 16 input channels (enet_fullconv), 0.93-0.94 with planes of 4 KiB (nnunet2d_up512_b12,
// unet_milesial_up1), 0.95-1.04 for planes of other sizes (25-600 KB), and 0.73 for one output channel
// (dbnet_head_up2). f16, whose planes are half as many bytes: 8 KiB vitdet_l_p2_up1 1.68, sam_mask_up1_b16
// 1.36, nnunet3d_tconv 1.16; 2 KiB 0.92 (the same two as f32's 4 KiB); unetr_dec2 0.96 (32 channels).
// bf16 pairs pack from 8 channel blocks per task on (a task packs for its tile's blocks only: holdout s89
// ho44 bf16, one block per task, 0.254 -> 0.157 ms without the copy): each pair register is two 32-byte
// half loads from two channel rows, which in a tile start on 32-byte boundaries and so never split a
// cache line, as they do along the caller's rows; but the copy is a pass of its own over the row group,
// and few channel blocks do not repay it. Measured on the 35 layers where gemm_x was preferred
// (docs/data/gemm_x_pairs_sweep_pk{0,1}_2t.jsonl, Zen 5): packed against unpacked geomean 1.27x, from 0.92
// (enet_fullconv, 16 channels) to 2.2x (vitdet_l_p2_up1). Again on Zen 4 with the grouped and
// few-channel layers gemm_x now takes (docs/data/gemm_x_pack_bf16_zen4_2t.jsonl, unpacked against
// packed): 1-6 channel blocks 1.05-2.6x faster unpacked on 36 of 40 (0.72-1.0 on the rest), 7-16 blocks
// 0.59-1.08, more 0.58-1.04.
void choose_pack_src(Plan& pl, const Problem& p, const TuningHints& h) {
  pl.pack_src = h.pack_src >= 0 ? h.pack_src == 1 : pack_src_pays(pl, p);
}

}  // namespace

// A task packs its row group once for the channel blocks of its tile (oc_chunk, set before this).
bool pack_src_pays(const Plan& pl, const Problem& /*p*/) {
  const int64_t plane_bytes = pl.axes[0].in * pl.axes[1].in * pl.axes[2].in * pl.elem_bytes();
  constexpr int64_t kSetPeriod = 8 << 10, kWays = 16;
  if (pl.x_chunk) return false;  // a task would copy whole rows for its chunk
  if (pl.ic_pairs) return pl.oc_chunk >= 8;
  return plane_bytes % kSetPeriod == 0 && pl.ic_per_group > kWays && pl.oc_chunk > 1;
}

// Against the row-buffer path, one core (ms): yolov8s_proto 3.6 vs 4.8, unet_up1 13.0 vs 14.9,
// maskrcnn_mask 8.5 vs 9.4, nnunet3d_tconv 10.7 vs 12.6 win; unet_up4 16.2 vs 15.2 and unet_up3 17.1 vs
// 14.3 lose. The losers' rows leave a vector partly empty (28 of 32, 52 of 64 lanes) and their row-buffer
// runs are already long; rows of one vector are stacked instead, and win even at 14 of 16 lanes.
// bf16 on a CPU with avx512_bf16: gemm_x reduces channel pairs too (vdpbf16ps), and the same rule holds
// against the row families' pairs (2 threads, docs/data/gemm_x_pairs_sweep_pk1_2t.jsonl): on the 35
// layers it prefers, geomean 1.26x (0.89 vitdet_l_p2_up1 to 2.24 espnet_classifier; unet_up1 1.26,
// nnunet3d_tconv 1.49); on the 12 it does not, 0.57-1.20 (unet_up3 and unet_up4 0.83).
// Rows of one vector fill gemm_x's lanes only as far as the row (stacked rows), or as the plane's pixels
// fill whole vectors (flat_plane: planes of at most 48 vectors). Below 7/8 the NXC gemm through
// whole-tensor copies, whose vectors run along full channel blocks, is faster (2 threads, gemm_x -> gemm
// through copies: swinunetr_dec5, 9 of 16 lanes, 0.67 -> 0.41 ms; unetr_enc2_init, unetr_dec5 and
// unetpp_up31_b8, 36 of 48 lanes, 1.28x, 1.19x, 1.13x; unet3d_up1, 81 of 96, 1.07x); from 7/8 on gemm_x
// wins (maskrcnn_mask, 196 of 208 lanes, 4.42 against 5.19 ms; nnunet3d_aniso_up1, nnunet3d_up320 and
// vnet_up256, whole vectors, 0.82 against 0.96, 0.27 against 0.32, 0.31 against 0.46; stacked rows of 14
// pixels beat the row buffer, see below).
bool gemm_x_lanes_wasted(const Problem& p) {
  return p.in.back() <= 16 && gemm_x_lane_use(p) < 7.0 / 8;
}

// The share of gemm_x's lanes that hold pixels: rows of several vectors, stacked rows of one vector, or
// a flat plane (as plan_gemm_x lays them out).
double gemm_x_lane_use(const Problem& p) {
  const int64_t lanes = 16, w = p.in.back(), h = p.in.size() > 1 ? p.in[p.in.size() - 2] : 1;
  if (w > lanes) return static_cast<double>(w) / static_cast<double>(ceil_div(w, lanes) * lanes);
  const int64_t plane_vectors = ceil_div(w * h, lanes);
  const bool flat = w % lanes != 0 && plane_vectors <= 48;
  const int64_t used = flat ? w * h : w, offered = flat ? plane_vectors * lanes : lanes;
  return static_cast<double>(used) / static_cast<double>(offered);
}

// Where the row families' vectors of output channels leave lanes empty, gemm_x is the default when its
// own lanes are at least as full; for the dot family's shapes always (dot copies the whole source to NXC
// first, dot_x broadcasts one input vector per tap). Both from 8 input channels per group, as measured:
// layers with K == s, NCX, 2 threads, gemm_x against the old default (docs/data/gemm_x_fill_sweep_zen4_2t
// .jsonl, 62 layers drawn for it, the holdout set and the suites): dot shapes 1.14-11.9x on 19 of 20 (ks37
// 128 -> 3 channels 4.2x, a G=2 80 -> 1 3D layer 1.64x; 0.90 against dot_x at 4 channels, rows of 100);
// channels filling at most the share of lanes gemm_x fills 1.17-3.76x on all 9 (a G=4 64 -> 8 layer,
// rows of 40: 2.23x). Where output channels fill their vectors and rows fill less than 9/10 of gemm_x's
// lanes (the rule above), the row families stayed ahead on 22 of 29 (0.35-1.0x); gemm_x won 1.01-1.61x on
// 7, grouped layers or 16-64 channels over 16-32 input channels; the rule that follows takes 4 of them, and
// two it lost there that now run as more tasks (16 -> 32 and 16 -> 48 over rows of 13 and 28: 1.28x, 1.03x).
// Fuller lanes are not all: the row families reach NCX through a row buffer whose flush costs each output
// about as much as 8 FMAs of empty lanes in f32 and 4 with 2-byte types, so where the reduction is short
// gemm_x wins with emptier lanes. It leaves C_IN x (1 / its lane use - 1 / the channels' lane use) lanes
// empty per output; where that is at most 8 (4), it is the default. Measured (Zen 4, 2 threads, f32 / bf16
// / f16, default -> gemm_x; docs/data/gemm_x_waste_zen4_2t.jsonl): 8 -> 384 1x1 over rows of 70, 1.1 lanes,
// 1.74x / 1.55x / 1.35x; 12 -> 256 2x2, 1.9, 1.48x / 1.15x / 1.12x; 16 -> 384 2x2, 2.1, 1.13x / 1.25x /
// 1.22x; 24 -> 128 1x1, 3.4, 1.57x / 1.27x / 1.25x; 40 -> 768 1x1, 7.4, 1.11x / 0.92x / 0.90x; and in f32 at
// 8.9-22 lanes 0.85-1.16x (0.85-0.95x on 6 of 10); the halves at 3.0 0.84x / 0.90x, at 5.4-8.9 0.87-1.01x.
// A grid drawn afterwards (16 and 32 -> 16, 48, 128 over rows of 13, 28, 55; f32; two runs): 1.03-1.76x
// from 16 input channels, 0.87-1.49x from 32 (gemm_x_waste_grid_zen4_2t.txt).
namespace {
double gemm_x_wasted_lanes(const Problem& p) {
  return static_cast<double>(p.c_in_per_group()) *
         (1.0 / gemm_x_lane_use(p) - 1.0 / lane_use(p.c_out_per_group(), 16));
}
}  // namespace

bool gemm_x_preferred(const Problem& p) {
  if (p.c_in_per_group() == 1 && p.c_out_per_group() == 1) return false;  // (depthwise_x)
  const int64_t w = p.in.back(), lanes = 16, vectors = (w + lanes - 1) / lanes;
  const bool full = vectors == 1 ? !gemm_x_lanes_wasted(p) : 10 * w >= 9 * vectors * lanes;
  const double flush = p.dtype == DType::f32 ? 8.0 : 4.0;
  return full || dot_applies(p) || (p.c_in_per_group() >= 8 && gemm_x_wasted_lanes(p) <= flush);
}

// Rows that gemm_x runs in chunks and whose chunk of every input channel passes a quarter of L2: gemm_x
// streams those planes without software prefetch (col_x_preferred).
bool gemm_x_streams_long_rows(const Problem& p) {
  const int64_t element = static_cast<int64_t>(dtype_size(p.dtype));
  const int64_t chunk_bytes = kMaxChunkVectors * 16 * p.c_in_per_group() * element;
  return p.in.back() > kMaxChunkVectors * 16 && chunk_bytes > kL2Bytes / 4;
}

bool gemm_x_applies(const Problem& p, Isa isa) {
  if ((isa != Isa::avx512_core && isa != Isa::avx2) || p.data_format != DataFormat::NCX) return false;
  for (int i = 0; i < p.spatial_rank; ++i)
    if (p.kernel[i] != p.stride[i] || p.pads_begin[i] != 0 || p.dilation[i] != 1 ||
        p.out[i] != p.in[i] * p.stride[i])
      return false;
  int64_t in_sp = 1, out_sp = 1, positions = 1;
  for (int64_t v : p.in) in_sp *= v;
  for (int64_t v : p.out) out_sp *= v;
  for (int64_t k : p.kernel) positions *= k;
  // The x phases are interleaved pairwise (stride 2) or stored as they are (1). One vector needs an
  // accumulator per kernel position. Blocks along a row are unrolled, so longer rows run in chunks
  // (x_chunk). Input planes are stepped (up to 8 channels unrolled) and output planes addressed (up to
  // 24 channels per block) with 32-bit displacements.
  return p.stride.back() <= 2 && positions <= accumulators(isa) &&
         std::max(in_sp * 8, out_sp * kAccumulators) * 4 < (int64_t{1} << 31);
}

// Where the default rules consider gemm_x at all: AVX-512. On AVX2 (12 accumulators) forced gemm_x ran
// 0.85x geomean of the default on the 48 suite layers it applies to (0.37-1.23; Zen 4, 2 threads, f32 NCX,
// docs/data/gemm_x_avx2_forced_zen4_2t.jsonl): there it is the tuner's and the hints' only.
bool gemm_x_by_default(const Problem& p, Isa isa) { return isa == Isa::avx512_core && gemm_x_applies(p, isa); }

// Blocks of more than three vectors along a row (the kernel's three input registers taken in turn): the
// broadcast weights of every output column (channel x kernel position) stay in the five registers the
// reduction leaves free, and the 24 accumulators bound the rest. Not with bf16 pairs (their own loads);
// AVX-512 only (AVX2 has no five registers to spare).
bool wide_possible(const Plan& pl, int64_t rows, int64_t columns) {
  return pl.isa == Isa::avx512_core && !pl.ic_pairs && !pl.flat_plane && rows == 1 && columns <= 5;
}

// A big source read plane by plane: a block of V vectors reads V lines of each input plane in turn, and
// from 32 planes on three lines per plane were too short a run for the prefetchers (from L3 or memory).
// Zen 4, 2 threads, AVX-512, against the 3-vector block in one process, two runs
// (docs/data/gemm_x_wide_zen4_2t.txt), on the 9 suite, holdout and drawn layers with 32-128 planes and 1-4
// output channels: f32 1.16x and 1.17x geomean (0.99-1.42; holdout s229 ho47, 96 -> 1 over 400 x 600,
// 1.18-1.20x; dbnet_head_up2 1.18-1.19x), f16 1.23x (0.97-1.82; drawn wd14, 128 -> 1). With 16 and 24
// planes 0.72-1.16x (16 -> 1 at K = s = 2: 0.87-0.91x), so not there. By size, 1 output channel from
// 32-128 planes: 17-22 MiB 1.02-2.35x (held in L3, most of them), 6-8 MiB 1.02-1.11x, 2.4 MiB 0.95x; so
// from 16 MiB. 16 and 24 vectors ran no faster than 8 on ho47, nor did software prefetch of the next block
// (1-4 blocks ahead); 8 and 16 planes of ho47's size 0.92-1.04x.
int wide_block(const Plan& pl, const Problem& p, int64_t row_vectors, int64_t positions) {
  constexpr int64_t kMinSrcBytes = int64_t{16} << 20, kMinPlanes = 32;
  constexpr int kWide = 8;
  if (p.src_elements() * pl.src_elem_bytes() < kMinSrcBytes || pl.ic_per_group < kMinPlanes) return 0;
  const int64_t columns = positions * pl.oc_per_group;
  const int64_t v = std::min<int64_t>({kWide, row_vectors, kAccumulators / columns});
  return v > 3 && wide_possible(pl, 1, columns) ? static_cast<int>(v) : 0;
}

void plan_gemm_x(Plan& pl, const Problem& p, const TuningHints& h) {
  check_hint(h.x_split >= 0 && h.x_split <= 1, "gemm_x computes whole rows (x_split 1)");
  check_hint(h.ic_block <= 0 || h.ic_block == pl.ic_per_group, "gemm_x reduces over all input channels in one pass");
  check_hint(h.x_halo != 1, "gemm_x has no borders to pad");
  check_hint(h.batch_block != 1 && h.oc_loop <= 1, "gemm_x blocks along rows (no batch_block, oc_loop 1)");
  pl.algorithm = Algorithm::gemm_x;
  pl.layout = LayoutPath::ncx_native;
  choose_ic_pairs(pl, h);
  const Axis &az = pl.axes[0], &ay = pl.axes[1], &ax = pl.axes[2];
  const int64_t row_vectors = ceil_div(ax.in, pl.lanes);
  const int64_t positions = az.kernel * ay.kernel * ax.kernel;  // accumulators per vector and channel

  // Narrow rows (one vector): small planes run as one sequence of vectors across rows, which fills the
  // lanes (maskrcnn_mask, 14-pixel rows: 196 of 208 lanes instead of 14 of 16); larger ones stack up to
  // three rows per block (the last group of a plane may hold fewer: a second function).
  const int64_t plane_vectors = ceil_div(ay.in * ax.in, pl.lanes);
  const bool flat_ok = row_vectors == 1 && ax.in % pl.lanes != 0 && plane_vectors <= 48;
  check_hint(h.flat_plane != 1 || flat_ok, "gemm_x: flat_plane needs rows narrower than a vector, not a "
                                           "multiple of it, and planes of at most 48 vectors");
  pl.flat_plane = h.flat_plane >= 0 ? h.flat_plane == 1 : flat_ok;
  const int64_t accs = accumulators(pl.isa);
  const int64_t max_vectors = std::min<int64_t>(kInputVectors, accs / positions);  // >= 1: gemm_x_applies
  int rows = pl.flat_plane ? static_cast<int>(ay.in)
             : row_vectors == 1 ? static_cast<int>(std::min(max_vectors, ay.in)) : 1;
  if (h.rows_per_block) {
    check_hint(h.rows_per_block == rows || (!pl.flat_plane && row_vectors == 1 && h.rows_per_block <= ay.in),
               "gemm_x: rows_per_block stacks rows of one vector (at most the height; the whole plane "
               "with flat_plane)");
    rows = h.rows_per_block;
  }
  const int64_t extent = pl.flat_plane ? plane_vectors : row_vectors;
  int u = static_cast<int>(std::min(row_vectors == 1 && !pl.flat_plane ? 1 : extent, max_vectors));
  if (const int wide = wide_block(pl, p, row_vectors, positions)) u = wide;
  if (h.oc_vectors > 0)  // the vectors that many channels leave room for (unless ur_w says otherwise)
    u = static_cast<int>(std::clamp<int64_t>(accs / (positions * h.oc_vectors * (pl.flat_plane ? 1 : rows)), 1, u));
  if (h.ur_w) u = h.ur_w;
  const int64_t vectors = pl.flat_plane ? u : int64_t{u} * rows;
  int cb = static_cast<int>(std::clamp<int64_t>(accs / (vectors * positions), 1, pl.oc_per_group));
  if (h.oc_vectors) cb = h.oc_vectors;
  check_hint(cb <= pl.oc_per_group, "gemm_x: oc_vectors counts output channels, at most those of a group");
  check_hint(cb >= 1 && vectors * positions * cb <= accs,
             "gemm_x: " + std::to_string(cb) + " output channels x " + std::to_string(positions) +
                 " kernel positions x " + std::to_string(vectors) + " vectors exceed " + std::to_string(accs) +
                 " accumulators");
  check_hint(u >= 1 && (vectors <= kInputVectors || wide_possible(pl, rows, positions * cb)),
             "gemm_x holds at most 3 input vectors (ur_w), more only along one row (no flat_plane), "
             "on AVX-512, without bf16 pairs, and with at most 5 output channels x kernel positions");
  pl.ur_w = u;
  pl.rows_per_block = rows;
  pl.oc_vectors = cb;
  pl.ic_unroll = h.ic_unroll ? h.ic_unroll : 2;
  check_hint(pl.ic_unroll >= 1 && pl.ic_unroll <= 8, "gemm_x: ic_unroll must be in [1, 8]");
  pl.x_split = 1;

  pl.oc_blocks = ceil_div(pl.oc_per_group, cb);
  auto kind = [&](int channels) {
    BlockKind k;
    k.vectors = channels;  // output channels in the block
    k.wei_k_floats = channels * positions;  // per input channel
    k.wei_ic_step = k.wei_k_floats;
    return k;
  };
  pl.main = kind(cb);
  pl.last = kind(static_cast<int>(pl.oc_per_group - (pl.oc_blocks - 1) * cb));
  pl.x_chunk = choose_x_chunk(pl);
  choose_tiles(pl, h);

  const int64_t in_sp = az.in * ay.in * ax.in, out_sp = az.out * ay.out * ax.out;
  pl.src_c = in_sp, pl.src_x = 1, pl.src_n = p.c_in * in_sp;
  pl.dst_c = out_sp, pl.dst_x = 1, pl.dst_n = p.c_out * out_sp;
  check_hint(h.pack_src != 1 || !pl.x_chunk, "gemm_x: pack_src copies whole rows, not the x chunks of rows "
                                              "of more than 64 vectors");
  choose_pack_src(pl, p, h);
  // A packed tile holds the row group's elements of each channel, a whole number of vectors apart.
  if (pl.pack_src) pl.src_c = ceil_div(int64_t{pl.rows_per_block} * ax.in, pl.lanes) * pl.lanes;
  pl.src_ic_stride = pl.src_c;
}

}  // namespace deconvjit::detail
