// Problem x ISA x hints -> Plan. Every decision the kernel and the executor follow lives here; the emitter
// and the executor only read it. A Plan is immutable once made, printable, and can be built from explicit
// choices (TuningHints) as well as by the default heuristic.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "deconvjit/deconvjit.hpp"
#include "runtime/int_math.hpp"

namespace deconvjit::detail {

// direct: stride-phase decomposition, each phase a dense stride-1 correlation over its own taps.
// gemm:   kernel a multiple of the stride on the innermost axis: the x phases fold into the channel
//         dimension, so each folded pixel is one contiguous run of s*C_OUT outputs (K == s: a GEMM).
// depthwise: one channel per group; channels become the vector dimension, inputs are loaded as vectors.
// dot:       very few output channels; input channels become the vector dimension and each output is a
//            horizontal sum, so lanes stay full when C_OUT/G is 1..4.
// depthwise_x: depthwise on NCX data with the vector along output x. Within a vector every lane keeps
//              one x phase, so a lane-permuted input vector times a per-lane weight vector does one tap
//              for all phases at once; no layout copies.
// dot_x:       few output channels (as dot) on NCX data, the vector along output x as in depthwise_x:
//              each input channel's permuted vector feeds every output channel's accumulators, and the
//              call reduces over all input channels; no layout copies.
// gemm_x:      NCX with K == s on every axis (no pads): a GEMM with the vector along input x; the
//              store interleaves the two x phases into contiguous output rows.
// col:         few input pixels and large weights: one GEMM over all input pixels at once (an inner
//              1x1 kernel with taps x C_OUT output channels, so each weight serves every pixel), then
//              generated code sums each output's taps' products (col2im, jit/col_sum.cpp).
// col_x:       few output channels x kernel x on NCX data (AVX-512, AVX2): a GEMM along input x per output
//              row, each (output channel, kernel x) an accumulator, and col2im in registers (the taps'
//              sums shifted and the x phases interleaved before the store); no layout copies.
enum class Algorithm { direct, gemm, depthwise, dot, depthwise_x, gemm_x, col, dot_x, col_x };
// The x-vector families (depthwise_x, dot_x) share the lane algebra, the executor and the generator.
inline bool x_vector_family(Algorithm a) { return a == Algorithm::depthwise_x || a == Algorithm::dot_x; }
// The row families that reduce over input channels, run by row tasks over a row of blocks along x.
inline bool reducing_row_family(Algorithm a) {
  return a == Algorithm::direct || a == Algorithm::gemm || a == Algorithm::dot;
}
// How NCX data reaches the NXC-shaped kernels. row_buffer: src copied to NXC once, each task computes
// into a small NXC row buffer and writes it out as contiguous NCX rows. in_kernel: strided broadcasts and
// scatter stores (AVX-512). scratch: whole-tensor NXC copies of src and dst.
// src_copy: src copied to NXC, outputs stored straight into NCX (scalar stores: the dot family).
// src_in_place: the caller's NCX source read by strided broadcasts (no copy), outputs through the row
// buffer as with row_buffer (the direct family).
// native: the kernel reads and writes NCX itself (depthwise_x, dot_x, gemm_x, col_x).
// plane_tiles: depthwise; a task transposes Plan::channels_per_call whole source planes into an NXC tile,
// the kernel computes an NXC output tile, and the task transposes it into those channels' output planes
// (runtime/plan_plane_tiles.cpp).
enum class LayoutPath { nxc, ncx_row_buffer, ncx_in_kernel, ncx_via_scratch, ncx_src_copy, ncx_src_in_place, ncx_native,
                        ncx_plane_tiles };
// The routes that compute into a task's NXC row buffer and write it out as NCX rows.
inline bool row_buffered(LayoutPath l) { return l == LayoutPath::ncx_row_buffer || l == LayoutPath::ncx_src_in_place; }
const char* to_string(LayoutPath l);
const char* to_string(Algorithm a);

// One spatial axis of the computation after folding (1D and 2D problems get unit outer axes).
struct Axis {
  int64_t in = 1, kernel = 1, stride = 1, dilation = 1, pad_begin = 0, out = 1;
  // Taps of one output phase form an arithmetic progression: kernel index += tap_k_step, input
  // index -= tap_i_step. (With g = gcd(stride, dilation): tap_k_step = stride/g, tap_i_step = dilation/g.)
  int64_t tap_k_step = 1, tap_i_step = 1;
};

// A register-block kind: the full-width one, and the last block along the channel vectors (fewer vectors
// and/or a masked last vector). Emitted once per pixel count 1..ur_w, then once per edge block (Plan::edges).
struct BlockKind {
  int vectors = 0;      // output-channel vectors held per pixel (dot: output channels per pixel)
  int mask_lanes = 0;   // lanes of the last vector that are real (0 = all)
  int64_t wei_k_floats = 0;               // packed floats per kernel position
  std::array<int64_t, 3> wei_tap_step{};  // floats between consecutive taps of a phase (z, y, x)
  int64_t wei_ic_step = 0;                // floats between consecutive input channels
};

// A register block at a row's border that reads the halo's zero columns (Plan::edges): it runs a function
// of its own, with the x taps unrolled and each tap's FMAs only for the pixels whose source column is real.
struct EdgeBlock {
  int width = 1;      // pixels
  int64_t first = 0;  // the real source column (halo excluded; may be negative) pixel 0 reads at tap 0
  int64_t taps = 0;   // x taps of its phase (all of them: the halo makes every pixel see them)
  bool operator==(const EdgeBlock& o) const { return width == o.width && first == o.first && taps == o.taps; }
};

struct Plan {
  Isa isa = Isa::avx2;
  int lanes = 8;
  // Element type of src and dst as the kernel reads and writes them (and of every copy of them: row
  // buffers, NXC scratch). Sums are f32 in registers; packed weights are f32 in every type (widened
  // exactly when packed), so only loads of src and stores of dst convert.
  DType dtype = DType::f32;
  Algorithm algorithm = Algorithm::direct;
  DataFormat user_layout = DataFormat::NXC;
  LayoutPath layout = LayoutPath::nxc;
  bool block_over_batch = false;  // register blocks run across images instead of along x
  int64_t row_buffer_floats = 0;  // row_buffered(): elements (of dtype) of one task's buffer
  // Zero columns added left and right of the source's x (the x axis below already includes them).
  int64_t halo_left = 0, halo_right = 0;

  // Register tile and loops (the tunables).
  int ur_w = 1;          // output pixels per register block
  int oc_vectors = 1;    // channel vectors per register block (BlockKind main)
  int ic_unroll = 1;     // input-channel loop unroll
  // Weight vectors a register block keeps in registers; its FMAs read the others from memory
  // (TuningHints::weight_regs). choose_tile sets it (oc_vectors: all); 0 in the families it does not plan.
  int weight_regs = 0;
  // Independent accumulator chains a direct or gemm register block keeps at least, as registers and the
  // unroll allow (accumulator_sets); 1 elsewhere. Not a choice: idle registers cost nothing.
  int acc_chains = 1;
  int x_split = 1;       // parts each output row is cut into, for threading (see row_part_width)
  int oc_loop = 1;       // channel blocks one call walks for each pixel block (depthwise: many tiny ones)
  bool parallel = true;  // false: tiny problems run on the calling thread
  // bf16: input channels reduced in pairs by vdpbf16ps; packed weights hold (ic, ic + 1) bf16 pairs in
  // each 32-bit slot, and reduction steps count pairs (see TuningHints::ic_pairs).
  bool ic_pairs = false;
  // bf16 depthwise with channels in whole pairs of vectors: 2 x lanes channels load as dwords and widen
  // with one shift (even channels) and one mask (odd ones), no shuffles; packed weights and accumulators
  // hold each group as its even then its odd channels, and the store interleaves them back. The dot family
  // without pairs splits its whole pairs of input-channel vectors the same way (dot_even_odd_pairs), its
  // weights packed to match (unless the source is widened). Follows from the family, the tile, the type and
  // widen_src (no choice of its own).
  bool bf16_even_odd = false;
  // bf16 results round to nearest even by vcvtneps2bf16 (AVX-512 on a CPU with avx512_bf16), two uops
  // where the integer rounding takes eight; the instruction flushes subnormal inputs, so a store whose
  // sums may be subnormal (no ic_pairs) checks for them and rounds those vectors by integers, out of line.
  // Follows from the ISA, the CPU and the type (no choice of its own; same results either way).
  bool bf16_vcvt = false;
  // depthwise: x taps of a phase (2 up to this many) that one pass over the source pixels serves, each
  // pixel's vector loaded (and widened) once for all of them; 0 off.
  int fused_x_taps = 0;
  // direct and gemm with the halo: the distinct border blocks of a row, each compiled on its own (after
  // the ur_w functions of its kind); empty when off (TuningHints::edge_blocks). Every row has the same.
  std::vector<EdgeBlock> edges;
  // Whole output vectors leave by non-temporal stores in each store block whose first address the kernel
  // finds vector-aligned (see TuningHints::nt_stores); masked tails and misaligned blocks store as usual.
  // Through the row buffer the flush's stores do, not the kernel's (kernel_nt_stores).
  bool nt_stores = false;
  // Non-temporal stores by the kernel itself: into dst, never into the row buffer (its flush takes them).
  bool kernel_nt_stores() const { return nt_stores && !row_buffered(layout); }
  // Software prefetch of the source (TuningHints::prefetch_src): the direct, gemm and dot families ask for
  // the next block's source at the offsets they read in this one; col_x for each channel row's piece two
  // tiles ahead.
  bool prefetch_src = false;
  // Row tasks of a grouped layer take the group innermost (TuningHints::group_inner): a task range covers
  // every group of its row parts rather than one group's rows.
  bool group_inner = false;
  // Row tasks take the channel block innermost (TuningHints::oc_inner): a task range covers every channel
  // block of its row parts rather than one block's rows. Through the row buffer one task runs every block
  // of its part into a buffer of whole pixels (row_buffer_whole_pixels).
  bool oc_inner = false;

  // Geometry, axes z, y, x (virtual: after folding for gemm).
  std::array<Axis, 3> axes;
  int64_t batch = 1, groups = 1;
  int64_t ic_per_group = 1;     // reduction length per output
  int64_t ic_block = 1;         // reduction length of one call; the reduction runs in ic_blocks passes
  int64_t ic_blocks = 1;
  int64_t src_channels = 1;     // channels per source pixel (C_IN)
  int64_t oc_per_group = 1;     // vector-dimension length per group (C_OUT/G, or Kx*C_OUT for gemm)
  int64_t dst_channels = 1;     // floats per virtual output pixel (C_OUT, or Kx*C_OUT for gemm)
  int64_t fold_stride = 1;      // gemm: the x stride folded into the channels (1 otherwise)
  // gemm with x pads_begin or output size not multiples of the stride: folded pixel 0 starts fold_shift
  // outputs before the row and the last folded pixel ends fold_tail outputs past it. Blocks holding such a
  // pixel store through a scratch block (Segment::clipped), so no lane outside the row is written.
  int64_t fold_shift = 0, fold_tail = 0;
  int64_t oc_blocks = 1;        // register blocks along the vector dimension per group
  int64_t channels_per_call = 0;  // depthwise_x: channels one call walks (oc_blocks calls per row); dot_x: C_OUT;
                                  // plane_tiles: channels (planes) of one task's tile, the kernel's pixel stride
  int rows_per_block = 1;         // gemm_x: input rows in one register block (narrow rows; the last
                                  // group of a plane takes the remainder)
  bool flat_plane = false;        // gemm_x: a row group is the whole plane, its vectors run across rows
  int64_t x_chunk = 0;            // gemm_x: input pixels of a row per call, rows of more than 64 vectors
                                  // (0: the whole row)
  // gemm_x: a task is a tile of row_chunk row groups x oc_chunk channel blocks, channel blocks innermost:
  // a row group's source is reused by the tile's channel blocks, their weights by its row groups.
  int64_t oc_chunk = 1, row_chunk = 1;
  // gemm_x: a task copies each row group's source (all input channels) into a contiguous tile, which its
  // channel blocks read instead of the caller's planes; src_c is then the tile's channel stride.
  bool pack_src = false;
  // 16-bit data, row families without pairs: the kernel reads a copy of the source widened to f32
  // (TuningHints::widen_src); its strides count f32 elements, the output keeps the data type.
  bool widen_src = false;
  // ncx_row_buffer (and the dot family's source copy), or NXC with widen_src; 2-D or 3-D with one z tap per
  // output plane: output rows per band of one output plane (TuningHints::band_rows); a task transposes (NXC:
  // widens) the input rows its band reads into a thread-local NXC band laid out like the whole-source copy
  // (0: that copy).
  int64_t band_rows = 0;
  int64_t ic_vectors = 0;       // dot: input-channel vectors per pixel
  int ic_tail_lanes = 0;        // dot: real channels of the last input-channel vector (0 = all; with
                                // ic_pairs a vector holds 2 * lanes channels)
  BlockKind main, last;         // last == main when there is no tail

  // Element strides of the buffers the kernel touches: image, channel, x pixel (z and y follow x).
  int64_t src_n = 0, src_c = 1, src_x = 1, dst_n = 0, dst_c = 1, dst_x = 1;

  // Strides the emitter bakes in (floats).
  int64_t src_pix_stride = 1;               // between consecutive pixels of a register block
  int64_t dst_pix_stride = 1;
  int64_t src_ic_stride = 1;                // between consecutive input channels
  std::array<int64_t, 3> src_tap_step{};    // between consecutive taps of a phase (negative)

  std::string name;
  std::string packing;  // packing_signature(), computed once
  // Every choice above as hints: make_plan(problem, isa, choices) makes this plan again.
  TuningHints choices;

  int64_t elem_bytes() const { return dtype == DType::f32 ? 4 : 2; }  // src and dst as given
  int64_t src_elem_bytes() const { return widen_src ? 4 : elem_bytes(); }  // the source the kernel reads
  // Elements between consecutive output rows of an NXC-shaped destination, and the offset of folded pixel 0
  // from the row's first output (gemm: the outputs cut off by fold_shift).
  int64_t dst_row_elements() const {
    return (axes[2].out * fold_stride - fold_shift - fold_tail) * dst_x / fold_stride;
  }
  int64_t dst_row_offset() const { return -fold_shift * dst_x / fold_stride; }
  // gemm's folded pixels overhang the row at either end: its border blocks store through scratch (clipped).
  bool overhangs_row() const { return fold_shift || fold_tail; }
  // Outputs along a row (gemm: its folded pixels times the stride, less the overhang).
  int64_t row_outputs() const { return axes[2].out * fold_stride - fold_shift - fold_tail; }
  // The row buffer holds whole output pixels (every channel block of the task's group; the task computes
  // them all over its part, then flushes it once): gemm always (a folded pixel's blocks each hold some
  // (phase, channel) pairs of its s outputs), the direct family with oc_inner. Otherwise one block.
  bool row_buffer_whole_pixels() const {
    return row_buffered(layout) && (algorithm == Algorithm::gemm || oc_inner);
  }
  // Row tasks per (group, image, output row, part): one per call along the channel blocks, or one for all
  // of them into a row buffer of whole pixels.
  int64_t block_tasks() const { return row_buffer_whole_pixels() ? 1 : oc_blocks / oc_loop; }
  bool has_tail() const { return last.vectors != main.vectors || last.mask_lanes != 0; }
  bool has_halo() const { return halo_left + halo_right > 0; }
  // The source the kernels read is a copy (NXC, possibly with a halo) rather than the caller's buffer.
  bool copies_src() const {
    if (band_rows) return false;  // each band task copies its own rows
    return has_halo() || widen_src || layout == LayoutPath::ncx_row_buffer ||
           layout == LayoutPath::ncx_via_scratch || layout == LayoutPath::ncx_src_copy;
  }
  int64_t packed_weights_floats() const;
  // Output x of one part of a row (the last part may be narrower): ceil(out / x_split), through the row
  // buffer where its flush runs in AVX-512 tiles and a part holds 4+ lines rounded up to whole lines of a
  // channel plane (so that each tile store starts a line), which may leave fewer than x_split parts.
  int64_t row_part_width() const;
  // Everything the packed weight layout depends on. Weights packed for one kernel serve another with the
  // same signature (say, another batch size); any other kernel must refuse them.
  std::string packing_signature() const;
  std::string to_json() const;
  // Generated functions per block kind: one per block width for the row families, one for depthwise_x and dot_x,
  // and for gemm_x the full row group plus a shorter last one when rows_per_block does not divide the
  // height, or with x chunks the full chunk and the row's last.
  int functions_per_kind() const {
    if (algorithm == Algorithm::col) return 0;  // the inner kernel's functions do the work
    if (algorithm == Algorithm::gemm_x) return x_chunk || axes[1].in % rows_per_block ? 2 : 1;
    if (algorithm == Algorithm::col_x) return x_split;  // one per part of a row
    return x_vector_family(algorithm) ? 1 : ur_w + static_cast<int>(edges.size());
  }
};

// The route (runtime/plan_route.cpp): the family as chosen for NXC data (`layout` is the route so far),
// then how NCX data reaches it; for ncx_native, `native` receives the family that reads and writes NCX
// itself. one_channel_native: a 1->1 layer without groups taken to the depthwise families.
Algorithm choose_algorithm(const Problem& p, Isa isa, const Axis& x, LayoutPath layout, const TuningHints& h);
LayoutPath choose_layout(const Problem& p, Isa isa, const TuningHints& h, Algorithm family, Algorithm& native);
bool one_channel_native(const Problem& p, Isa isa, const Axis& x, const TuningHints& h);

// The default heuristic, overridden by any non-zero hint. `p` must come from resolve(); `cap` from
// resolve_isa(). The first choice is the instruction set (runtime/plan_isa.cpp), the rest are made for it
// by make_plan_at, whose hints carry no isa.
Plan make_plan(const Problem& p, Isa cap, const TuningHints& hints);
Plan make_plan(const Problem& p, Isa cap, const TuningHints& hints, bool zmm_at_ymm_rate);  // (tests: any CPU)
Plan make_plan_at(const Problem& p, Isa isa, const TuningHints& hints);
// The rule behind the second: the family's vectors hold their channels with fewer empty lanes at 8 lanes.
bool ymm_fills_better(const Plan& zmm, const Plan& ymm);
// Every choice of a finished plan as hints that make it again (runtime/plan_print.cpp).
TuningHints plan_choices(const Plan& pl);

// The x-vector families (depthwise_x, dot_x, and the row of each vector): output x per vector. Vectors start
// at multiples of it, so each lane keeps one x phase: every lane where the x stride divides the lane count,
// else the lanes up to the largest multiple of the stride (stride 3 on 16 lanes: 15, on 8: 6); the lanes
// past it are computed and never stored.
inline int64_t x_vector_span(const Plan& pl) { return pl.lanes - pl.lanes % pl.axes[2].stride; }

// depthwise_x: the kernel x that lane `lane` of x tap `tap` sees, for vectors starting at a multiple of
// x_vector_span (see runtime/plan_depthwise_x.cpp); at or past the kernel size the lane has no term.
inline int64_t depthwise_x_kernel_x(const Axis& x, int64_t lane, int64_t tap) {
  return (lane + floor_mod(x.pad_begin, x.stride)) % x.stride + x.stride * tap;
}

// dot with bf16_even_odd: the whole pairs of input-channel vectors the kernel splits into even and odd
// channels (the vectors after them, and a tail, keep the source's order).
inline int64_t dot_even_odd_pairs(const Plan& pl) {
  return pl.bf16_even_odd ? (pl.ic_vectors - (pl.ic_tail_lanes ? 1 : 0)) / 2 : 0;
}

// Shared by the family planners (plan.cpp, plan_depthwise_x.cpp, plan_gemm_x.cpp).
// Work below this runs on the calling thread: a TBB fork costs more than the arithmetic.
constexpr double kSerialFlops = 2e6;
// ... unless it touches this many elements: with vectors mostly empty (one or two channels) such a
// kernel takes longer than its FLOPs say, and two cores stream more bytes than one.
constexpr int64_t kSerialElements = int64_t{1} << 14;
// Tasks to aim for, so that up to 64 threads balance.
constexpr int64_t kTargetTasks = 256;
void check_hint(bool ok, const std::string& what);  // throws InvalidArgument "tuning hint rejected"
// bf16 channel pairs (vdpbf16ps) where the family, ISA, CPU and hint allow them (Plan::ic_pairs).
void choose_ic_pairs(Plan& pl, const TuningHints& h);
// Zero columns around the source where they merge a row's border runs into whole blocks (Plan::halo_left,
// halo_right; runtime/plan_halo.cpp). Widens axes[2] by them.
void choose_halo(Plan& pl, const TuningHints& h);
// Edge blocks (runtime/plan_halo.cpp): where they can run, and the plan's choice.
bool edge_blocks_possible(const Plan& pl);
void choose_edge_blocks(Plan& pl, const TuningHints& h);
// The pixels [lo, hi) of edge block `e` whose x tap j (0 = its first) reads a real source column.
inline void edge_pixels(const Plan& pl, const EdgeBlock& e, int64_t j, int64_t& lo, int64_t& hi) {
  const int64_t real = pl.axes[2].in - pl.halo_left - pl.halo_right, shift = j * pl.axes[2].tap_i_step;
  lo = std::clamp<int64_t>(shift - e.first, 0, e.width);
  hi = std::clamp<int64_t>(real - e.first + shift, lo, e.width);
}
// A 16-bit source widened to f32 once before the kernel (Plan::widen_src): where the plan allows it, and
// by the hint or widen_src_pays (also the cost model's judgement).
bool widen_src_possible(const Plan& pl);
void choose_widen_src(Plan& pl, const Problem& p, const TuningHints& h);
bool widen_src_pays(const Plan& pl, const Problem& p);
// AVX2 f16: whether each source element feeds enough FLOPs (2 x C_OUT/G x taps) for a widened copy to repay
// its bytes; widen_src_pays and the f16 AVX2 block rule (choose_tile) read the same bound.
bool widening_repays_on_avx2(int64_t oc_per_group, int64_t taps);
// bf16 data on AVX-512 with the avx512_bf16 instructions (vdpbf16ps channel pairs, vcvtneps2bf16); each
// family decides whether it reduces in pairs (Plan::ic_pairs).
bool avx512_bf16_usable(DType t, Isa isa);
// Bands of the source transposed (NCX) or widened (NXC) per task (Plan::band_rows): where the plan allows
// them, the band height by the hint or default_band_rows (0: the whole-source copy).
bool band_possible(const Plan& pl);
// Plan::fused_x_taps: the depthwise or dot family with 2+ x taps in some phase, a block's pixels along x,
// and registers for the taps' weights and a source vector next to the accumulators.
bool fuse_x_possible(const Plan& pl);
// choose_fused_x_taps's default where it is possible (depthwise: every x phase has 2+ taps, or the output
// is small; dot: dot_fusion_pays).
bool fuse_x_pays(const Plan& pl, const Problem& p);
// The default of batch_block: at least 4 images and rows of fewer than two full blocks per phase.
bool batch_blocking_pays(int64_t batch, int64_t out_x, int64_t stride_x, Isa isa);
bool band_rows_pay(const Plan& pl);
void choose_band_rows(Plan& pl, const TuningHints& h);
int64_t default_band_rows(const Plan& pl);
// Software prefetch of the source (Plan::prefetch_src): where the generators honour it, and by the hint or
// the default (col_x_prefetch_pays for col_x, prefetch_src_pays for the row families).
bool prefetch_src_possible(const Plan& pl);
void choose_prefetch_src(Plan& pl, const Problem& p, const TuningHints& h);
bool prefetch_src_default(const Plan& pl, const Problem& p);
bool prefetch_src_pays(const Plan& pl, const Problem& p);
bool col_x_prefetch_pays(const Plan& pl);
// The group innermost in the row tasks (Plan::group_inner): where the executor can order them so, and by
// the hint or group_inner_pays.
bool group_inner_possible(const Plan& pl);
void choose_group_inner(Plan& pl, const Problem& p, const TuningHints& h);
bool group_inner_pays(const Plan& pl, const Problem& p);
// The channel block innermost in the row tasks (Plan::oc_inner; runtime/plan_copies.cpp): likewise.
bool oc_inner_possible(const Plan& pl);
void choose_oc_inner(Plan& pl, const TuningHints& h);
bool oc_inner_pays(const Plan& pl);
// The one refusal of each of these hints (runtime/plan_copies.cpp).
extern const char* const kWidenSrcNeeds;
extern const char* const kBandRowsNeeds;
bool depthwise_x_applies(const Problem& p, Isa isa);
// The x stride divides the lanes: every lane of an x vector holds an output (x_vector_span). Where not, the
// default takes dot_x and one-channel layers elsewhere, and on AVX2 depthwise through plane tiles where
// they apply.
bool x_vectors_whole(const Problem& p, Isa isa);
// The plane-tile route (runtime/plan_plane_tiles.cpp): where it applies, and the tile (channels_per_call,
// and oc_vectors cut to divide the channel vectors).
bool plane_tiles_applies(const Problem& p, Isa isa);
bool plane_tiles_preferred(const Problem& p, Isa isa);  // the default heuristic's choice
void choose_plane_tile(Plan& pl, const Problem& p, const TuningHints& h);
extern const char* const kPlaneTilesNeeds;
// At most this many output channels per group take the dot families (dot, dot_x).
constexpr int64_t kDotMaxOc = 4;
bool dot_x_applies(const Problem& p, Isa isa);
bool dot_x_preferred(const Problem& p, Isa isa);  // the default heuristic's choice where dot_x applies
// The share of lanes a channel count fills in whole vectors.
inline double lane_use(int64_t channels, int lanes) {
  return static_cast<double>(channels) / static_cast<double>(ceil_div(channels, int64_t{lanes}) * lanes);
}
// Non-temporal stores can serve the plan: AVX-512 (a vector is a cache line), f32 stored straight into the
// caller's tensor, never into a copy read back later. NXC: the direct, gemm and depthwise families in one
// reduction pass (a later pass would read the sums back from memory), with pixels a whole number of vectors
// apart; NCX: depthwise_x and dot_x, with output rows (so planes) a whole number of vectors long. Either way
// each store block's vectors are whole vectors apart, so the block's first address decides whether all of
// them are aligned. NCX through the row buffer: its flush, in any type on either ISA, with rows of whole
// lines (flush_in_lines), each line-long run of a channel's row checked for alignment by itself.
bool nt_stores_possible(const Plan& pl);
// f16 sources one element at a time cost a broadcast and a conversion (2 uops) per pixel and channel,
// which narrow tiles (one vector of outputs: as many conversions as FMAs) cannot hide. With channels
// adjacent (NXC) the direct family widens the unroll's 2 to 16 channels of a pixel in one instruction into
// a stack slot, and the broadcasts read f32 from there. Measured (1 thread, NXC, f16 / f32 speed, geomean
// of 6 layers): AVX-512 0.913 -> 0.937 (ov_spec_ex1 0.72 -> 0.83). Not for bf16, whose broadcast widens
// with one shift (AVX-512 exact route 1.031 -> 0.938; AVX2 0.78-1.01 on all 27 realworld layers, Zen 4).
// On AVX2 only with three or more vectors per block (the gemm tile), whose broadcasts each feed three FMAs:
// there the two uops saved per channel and pixel outweigh the slot's store and reload (Zen 4, NXC, 2 threads,
// in one process against broadcast-and-convert: 1.19x geomean on the 60 such corpus layers, 0.91-1.29,
// and 1.16-1.27x on all 9 realworld ones; docs/data/f16_slot_avx2_zen4_2t.jsonl). With two vectors (the
// direct tile) it breaks even (1.00 on 14 corpus layers; 0.876 -> 0.845 on 3 layers on Zen 5, 1 thread).
// The accumulator sets of a direct or gemm function of w pixels x nv vectors: its unrolled input channels
// cycle over them, and they are summed (in a fixed order) before the store. See Plan::acc_chains.
int accumulator_sets(const Plan& pl, int w, int nv);

// The row families' register tile (runtime/plan_tile.cpp): pixels x channel vectors within the register
// budget (choose_tile), the dot family's (choose_dot_tile), the FMA chains that hide latency, the x taps
// of one phase, and whether the dot family's fused x taps pay for a block of `ur` pixels.
void choose_tile(Plan& pl, const TuningHints& h, int64_t n_vec);
// Plan::weight_regs below the block's vectors: AVX2 (whose FMAs take no broadcast operand, so every
// source element is a broadcast of its own), the direct and gemm families (depthwise loads vectors).
bool weight_regs_possible(const Plan& pl);
// The weight vectors a block of nv vectors keeps in registers: all of them unless the plan reads some
// from memory, and then at most Plan::weight_regs (a tail block of fewer vectors may keep all).
inline int weights_in_registers(const Plan& pl, int nv) {
  return pl.weight_regs == 0 || pl.weight_regs >= pl.oc_vectors ? nv : std::min(pl.weight_regs, nv);
}
extern const char* const kWeightRegsNeeds;
void choose_dot_tile(Plan& pl, const TuningHints& h);
void choose_acc_chains(Plan& pl);
int max_x_taps(const Plan& pl);
bool dot_fusion_pays(const Plan& pl, int ur);
int dot_plain_ur(const Plan& pl);  // the dot family's block without fused taps
Plan dot_fused_block(const Plan& pl);
bool dot_row_fuses(const Plan& pl, const TuningHints& h);  // before batch blocking
int streamed_block_cap(const Plan& pl);  // 0, or the widest block over a source streamed from DRAM
void fit_block_to_streams(Plan& pl, const TuningHints& h);
void narrow_block(Plan& pl, int fit);  // at most fit pixels, balanced

inline bool f16_grouped_widening(const Plan& pl) {
  const int u = pl.ic_unroll;
  return pl.dtype == DType::f16 && !pl.widen_src && (pl.isa == Isa::avx512_core || pl.oc_vectors >= 3) &&
         pl.algorithm != Algorithm::depthwise && pl.src_ic_stride == 1 &&
         (u == 2 || u == 4 || u == 8 || (u == 16 && pl.isa == Isa::avx512_core));  // AVX2: 8 lanes
}
// The row buffer's flush moves output rows of whole lines (AVX-512) in AVX-512 tiles, which may leave by
// non-temporal stores; other rows in 8x8 tiles, whose half-line stores split fewer lines. Against 8x8 tiles
// on every corpus layer through the row buffer (NCX, 2 threads, docs/data/flush_tiles_ab_*_corpus_2t.txt):
// f32 geomean 1.011 over 80 (0.84-1.30; unet3d_up3 1.30x and psmnet_hg_conv5 1.12x with nt_stores, small
// layers either way: linknet_dec3 1.17x, dpt_base_reassemble1 0.89x), bf16 1.011 over 102 (0.74-1.23).
// Rows that are not whole lines lost in AVX-512 tiles (56 pixels, resnet50_bwd_l2down_b16: 0.88x).
inline bool flush_in_tiles(const Plan& pl) {
  return pl.isa == Isa::avx512_core && pl.row_outputs() * pl.elem_bytes() % 64 == 0;
}
// Whether the flush can write whole lines non-temporally (Plan::nt_stores): rows of whole lines, in
// AVX-512 tiles or on AVX2 in tiles of a line's rows by 8 channels (transpose_block_nt).
inline bool flush_in_lines(const Plan& pl) { return pl.row_outputs() * pl.elem_bytes() % 64 == 0; }
void choose_nt_stores(Plan& pl, const Problem& p, const TuningHints& h);
// Whether the output (NXC rows: and the source) outgrows the caches by choose_nt_stores' bounds
// (runtime/plan_stores.cpp); the cost model asks it too.
bool nt_store_big(const Plan& pl, const Problem& p);
bool gemm_nt_pays(const Plan& pl);  // gemm's non-temporal stores where its (folded) pixels are wide
// Input-channel steps of one reduction pass: channels, or pairs of them.
inline int64_t ic_steps(const Plan& pl) { return pl.ic_pairs ? (pl.ic_block + 1) / 2 : pl.ic_block; }
// gemm_x: the calls (chunks) a row takes along x.
inline int64_t x_chunks(const Plan& pl) { return pl.x_chunk ? (pl.axes[2].in + pl.x_chunk - 1) / pl.x_chunk : 1; }
bool gemm_x_applies(const Problem& p, Isa isa);
bool gemm_x_by_default(const Problem& p, Isa isa);  // where the default rules weigh gemm_x (applies, and measured)
bool dot_applies(const Problem& p);  // few output and 8+ input channels per group: the dot family's shape
bool gemm_x_preferred(const Problem& p);  // the default heuristic's choice where gemm_x applies
bool gemm_x_streams_long_rows(const Problem& p);  // x chunks whose source passes a quarter of L2
double gemm_x_lane_use(const Problem& p);  // the share of gemm_x's lanes holding pixels
bool gemm_x_lanes_wasted(const Problem& p);  // rows of one vector filling less than 7/8 of gemm_x's lanes
// gemm_x: whether copying each row group's source into a tile pays (choose_pack_src; the cost model).
bool pack_src_pays(const Plan& pl, const Problem& p);
// Fills the tile, threading and strides of the depthwise_x family (make_plan adds name and packing).
void plan_depthwise_x(Plan& pl, const Problem& p, const TuningHints& h);
void plan_dot_x(Plan& pl, const Problem& p, const TuningHints& h);  // likewise, plan_depthwise_x.cpp
void plan_gemm_x(Plan& pl, const Problem& p, const TuningHints& h);  // likewise, plan_gemm_x.cpp
// col_x (runtime/plan_col_x.cpp): where it can run, the default heuristic's choice, the planner, and the
// tiles [first, end) of ur_w input vectors that a row's outputs need.
bool col_x_applies(const Problem& p, Isa isa);
bool col_x_preferred(const Problem& p, Isa isa);
void plan_col_x(Plan& pl, const Problem& p, const TuningHints& h);
void col_x_tiles(const Plan& pl, int64_t& first, int64_t& end);
// Input vectors along x in one col_x tile: ur_w, or one when the tile's vectors are images.
inline int col_x_tile_vectors(const Plan& pl) { return pl.block_over_batch ? 1 : pl.ur_w; }

// col (runtime/col.cpp): whether the default heuristic takes it, and the inner GEMM's descriptor: N
// images of prod(in) pixels, C_IN -> taps * C_OUT channels (channel t * C_OUT + co), kernel 1, NXC.
bool col_preferred(const Problem& p, Isa isa = Isa::avx512_core);
// Axis i of the problem as the planner sees it (plan.cpp), and whether the gemm family can fold its x
// phases into channels (plan_route.cpp).
Axis make_axis(const Problem& p, int i);
bool gemm_applies(const Problem& p, const Axis& x);
// Folded pixels that all lie within the row (x pads_begin and output size multiples of the stride): the
// case gemm was first measured on, and takes by default wherever it applies.
bool gemm_aligned(const Axis& x);
Descriptor col_inner_descriptor(const Problem& p);
// col's own plan (make_plan_at): it names the inner GEMM kernel, planned as a kernel of its own.
void plan_col(Plan& pl, const Problem& p, Isa isa, const TuningHints& h);
// The inner kernel's options: the col plan's own ISA (as cap and choice), the heuristic's plan.
Options col_inner_options(const Plan& plan, const Options& options);

}  // namespace deconvjit::detail
