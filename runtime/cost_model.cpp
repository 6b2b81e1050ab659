#include "runtime/cost_model.hpp"

#include <algorithm>
#include <cmath>

#include "runtime/cpu.hpp"
#include "runtime/int_math.hpp"

namespace deconvjit::detail {
namespace {

// A core as the model sees it: two FMA pipes and two vector loads per cycle, four cycles of FMA latency,
// at a nominal clock. Memory: what two cores stream from DRAM. Calls and forks: measured orders of
// magnitude on the machines in docs/PERFORMANCE.md (tens of nanoseconds, microseconds).
constexpr double kGhz = 3.0;
constexpr double kFmaPerCycle = 2, kLoadsPerCycle = 2, kFmaLatency = 4;
constexpr double kBytesPerSecond = 20e9;
constexpr double kCallSeconds = 25e-9, kForkSeconds = 6e-6;

// Fraction of the FMA peak a block of `fmas` accumulators reaches when each step also loads `loads`
// vectors: bound by the FMA pipes, the load ports, or the latency of one accumulator's chain.
double tile_efficiency(double fmas, double loads) {
  const double busy = fmas / kFmaPerCycle;
  return busy / std::max({busy, loads / kLoadsPerCycle, kFmaLatency});
}

// Average efficiency over a row of `q` pixels cut into blocks of `ur` (the last one ragged).
double row_efficiency(int64_t q, int ur, int nv) {
  if (q <= 0) return 1;
  const int64_t full = q / ur, rem = q % ur;
  double cycles = static_cast<double>(full) * ur / tile_efficiency(ur * nv, ur + nv);
  if (rem) cycles += static_cast<double>(rem) / tile_efficiency(static_cast<double>(rem * nv), static_cast<double>(rem + nv));
  return static_cast<double>(q) / cycles;
}

struct Estimate {
  double efficiency = 1;  // of the FMA peak, on the useful arithmetic
  double calls = 0;       // kernel calls in all
  double extra_bytes = 0; // copies and partial sums beyond the operands
  int64_t tasks = 1;
};

Estimate rows_family(const Plan& pl, const Problem& p) {
  Estimate e;
  const Axis& x = pl.axes[2];
  const int64_t vec_lanes = pl.algorithm == Algorithm::dot ? pl.ic_vectors * pl.lanes
                                                           : ceil_div(pl.oc_per_group, pl.lanes) * pl.lanes;
  const double lane_use = static_cast<double>(pl.algorithm == Algorithm::dot ? pl.ic_per_group : pl.oc_per_group) /
                          static_cast<double>(vec_lanes);
  const int64_t extent = pl.block_over_batch ? pl.batch : ceil_div(x.out, x.stride);
  // The row's parts as scheduled (Plan::row_part_width may round them to whole lines: fewer than x_split).
  const int64_t parts = ceil_div(x.out, pl.row_part_width());
  const int64_t q = ceil_div(extent, parts);
  // The dot family holds one accumulator per (pixel, output channel) and ends each with a horizontal sum.
  const int nv = pl.algorithm == Algorithm::dot ? 1 : pl.oc_vectors;
  e.efficiency = lane_use * row_efficiency(q, pl.ur_w, nv * (pl.algorithm == Algorithm::dot ? pl.oc_vectors : 1));
  e.efficiency *= 1.0 / (1.0 + 0.15 / pl.ic_unroll);  // loop control per unrolled step
  // FMAs on the halo's zeros, unless edge blocks skip them (each a call of its own at a row's two ends).
  if (pl.has_halo() && pl.edges.empty())
    e.efficiency *= static_cast<double>(x.in - pl.halo_left - pl.halo_right) / x.in;
  const int64_t images = pl.block_over_batch ? 1 : pl.batch;
  const int64_t rows = pl.groups * pl.block_tasks() * images * pl.axes[0].out * pl.axes[1].out;
  // (plane tiles: a task per tile of each image, its calls a row of oc_loop blocks each)
  const bool tiles = pl.layout == LayoutPath::ncx_plane_tiles;
  e.tasks = tiles ? pl.batch * (pl.dst_channels / pl.channels_per_call) : rows * parts;
  // Segments per part: one per phase, and without a halo also the border patterns; with edge blocks, a
  // row's two ends are calls of their own.
  const double segments = static_cast<double>(x.stride) *
                          (pl.has_halo() ? (pl.edges.empty() ? 1.0 : 1.0 + 2.0 / static_cast<double>(parts))
                                         : 1.0 + 2.0 * x.kernel / x.stride / static_cast<double>(parts));
  e.calls = static_cast<double>(tiles ? rows : e.tasks) * segments * pl.ic_blocks;
  // gemm's overhanging pixels: lanes computed outside the row, and each row's clipped blocks a call of its
  // own (with the copy out of its scratch block).
  if (pl.overhangs_row()) {
    const int64_t folded = x.out * pl.fold_stride;
    e.efficiency *= static_cast<double>(folded - pl.fold_shift - pl.fold_tail) / static_cast<double>(folded);
    e.calls += 2.0 * static_cast<double>(rows) * pl.ic_blocks;
  }
  const double eb = static_cast<double>(pl.elem_bytes());
  const double src_bytes = eb * p.src_elements(), dst_bytes = eb * p.dst_elements();
  if (pl.copies_src()) e.extra_bytes += 2 * src_bytes;
  if (pl.layout == LayoutPath::ncx_via_scratch) e.extra_bytes += 2 * dst_bytes;
  if (row_buffered(pl.layout)) e.extra_bytes += dst_bytes;
  if (pl.layout == LayoutPath::ncx_plane_tiles) e.extra_bytes += src_bytes + dst_bytes;  // the tiles' moves
  if (pl.layout == LayoutPath::ncx_in_kernel) e.efficiency *= 0.7;  // strided broadcasts, scatter stores
  // Broadcasts from as many planes as channels: measured against row_buffer (docs/data/src_in_place_sweep_2t),
  // 0.68-1.32x on row blocks (geomean 0.96), 0.56-0.78x on blocks across images (each pixel an image apart).
  if (pl.layout == LayoutPath::ncx_src_in_place) e.efficiency *= pl.block_over_batch ? 0.6 : 0.9;
  e.extra_bytes += 2 * dst_bytes * static_cast<double>(pl.ic_blocks - 1);
  return e;
}

Estimate gemm_x_family(const Plan& pl, const Problem& p) {
  Estimate e;
  const Axis &ay = pl.axes[1], &ax = pl.axes[2];
  const int64_t positions = pl.axes[0].kernel * ay.kernel * ax.kernel;
  const int64_t lanes_used = pl.flat_plane ? ay.in * ax.in : ax.in;
  const int64_t vectors = ceil_div(lanes_used, pl.lanes);
  const double lane_use = static_cast<double>(lanes_used) / static_cast<double>(vectors * pl.lanes);
  const int64_t block_vectors = pl.flat_plane ? pl.ur_w : int64_t{pl.ur_w} * pl.rows_per_block;
  const double fmas = static_cast<double>(block_vectors * pl.oc_vectors * positions);
  // Weights come as embedded broadcasts: one load per FMA column, the input vectors once per step.
  e.efficiency = lane_use * tile_efficiency(fmas, static_cast<double>(block_vectors + pl.oc_vectors * positions) / 2);
  e.efficiency *= 1.0 / (1.0 + 0.15 / pl.ic_unroll);
  const int64_t groups = ceil_div(ay.in, pl.rows_per_block);
  const int64_t outer = pl.batch * pl.groups * pl.axes[0].in * x_chunks(pl);
  e.tasks = outer * ceil_div(groups, pl.row_chunk) * ceil_div(pl.oc_blocks, pl.oc_chunk);
  e.calls = static_cast<double>(outer * groups * pl.oc_blocks);
  // Tiles sized for L2 reuse weights and source; a tile that overflows it streams them again.
  const int64_t row = pl.x_chunk ? pl.x_chunk : ax.in;  // of one task
  const double tile_bytes = 4.0 * pl.ic_per_group * (pl.oc_chunk * pl.main.wei_k_floats +
                                                     pl.row_chunk * pl.rows_per_block * row);
  if (tile_bytes > (1 << 20)) e.efficiency *= 0.85;
  // Source rows that collide in the L2's sets come from further away; a tile where they would not is a
  // copy for nothing (choose_pack_src: 1.07-1.55x where it pays, 0.93-0.98x where not).
  const bool pays = pack_src_pays(pl, p);
  if (pays != pl.pack_src) e.efficiency *= pays ? 0.8 : 0.95;
  return e;
}

Estimate depthwise_x_family(const Plan& pl) {
  Estimate e;
  const Axis& x = pl.axes[2];
  // Every lane of a tap's vector does an FMA; lanes whose weight is structurally zero waste theirs.
  const double taps = static_cast<double>(ceil_div(x.kernel, x.stride));
  e.efficiency = (static_cast<double>(x.kernel) / x.stride) / taps *
                 row_efficiency(ceil_div(x.out, x_vector_span(pl)), pl.ur_w, pl.oc_vectors) * 0.5 *  // + permutes
                 static_cast<double>(x_vector_span(pl)) / pl.lanes;
  e.tasks = pl.batch * pl.axes[0].out * pl.axes[1].out * pl.oc_blocks;
  e.calls = static_cast<double>(e.tasks) * 2;
  return e;
}

// Every FMA lane is a real product except past the row's end; the phase interleave adds about three
// instructions per (output vector, kernel x), and a part recomputes one tile.
Estimate col_x_family(const Plan& pl) {
  Estimate e;
  const Axis& x = pl.axes[2];
  const int64_t lanes = pl.lanes;
  const double lanes_used = static_cast<double>(x.in) / static_cast<double>(ceil_div(x.in, lanes) * lanes);
  const double reduction = static_cast<double>(pl.ic_per_group) * pl.axes[0].kernel * pl.axes[1].kernel /
                           static_cast<double>(pl.axes[0].stride * pl.axes[1].stride);
  const double interleave = 3.0 * static_cast<double>(x.stride) / std::max(1.0, reduction);
  e.efficiency = 0.85 * lanes_used / (1.0 + interleave) * (pl.ur_w > 1 ? 1.0 : 0.9);
  e.tasks = pl.batch / (pl.block_over_batch ? pl.ur_w : 1) * pl.groups * pl.axes[0].out * pl.axes[1].out * pl.x_split;
  e.calls = static_cast<double>(e.tasks) * (pl.has_tail() ? 2 : 1);
  return e;
}

}  // namespace

double model_ms(const Plan& pl, const Problem& p, int threads) {
  // bf16 pairs: vdpbf16ps does two multiply-adds per lane at the FMA's rate (measured on Zen 5).
  // FLOP/s, one core. Where AVX-512 runs on 256-bit pipes (cpu_zmm_at_ymm_rate), a zmm FMA takes both.
  const int rate_lanes = pl.isa == Isa::avx512_core && cpu_zmm_at_ymm_rate() ? 8 : pl.lanes;
  const double peak = kGhz * 1e9 * kFmaPerCycle * 2 * rate_lanes * (pl.ic_pairs ? 2 : 1);
  const double bytes = static_cast<double>(pl.elem_bytes()) * (p.src_elements() + p.dst_elements()) +
                       4.0 * p.weights_elements();  // packed weights: f32 slots
  Estimate e;
  if (pl.algorithm == Algorithm::col) {
    // One GEMM without waste, then the col buffer written and summed once.
    e.efficiency = 0.85;
    e.extra_bytes = 2.0 * 4 * p.batch * p.c_out * static_cast<double>(p.src_elements() / std::max<int64_t>(1, p.batch * p.c_in)) *
                    static_cast<double>(p.weights_elements() / std::max<int64_t>(1, p.c_in * p.c_out_per_group()));
    e.tasks = 256;
  } else if (pl.algorithm == Algorithm::gemm_x) {
    e = gemm_x_family(pl, p);
  } else if (pl.algorithm == Algorithm::col_x) {
    e = col_x_family(pl);
  } else if (x_vector_family(pl.algorithm)) {
    e = depthwise_x_family(pl);
  } else {
    e = rows_family(pl, p);
  }
  // Plain stores read each line of an output the caches cannot keep before writing it (write-allocate);
  // non-temporal ones do not, but pay for it where the output would have stayed cached, and in gemm but
  // where its pixels are wide (gemm_nt_pays: narrower ones measured slower at every size).
  const double dst_bytes = static_cast<double>(pl.elem_bytes() * p.dst_elements());
  const bool past_caches = nt_store_big(pl, p);
  const bool nt_loses = pl.algorithm == Algorithm::gemm && !row_buffered(pl.layout) && !gemm_nt_pays(pl);
  if (pl.nt_stores ? !past_caches || nt_loses : past_caches) e.extra_bytes += dst_bytes;
  // A widened source is a pass writing twice its bytes, then read as f32; where widen_src_pays says it
  // does not pay, count that, and where it pays, the widening per read the kernel would do instead.
  // Bands cost nothing where band_rows_pay says they pay and a little where not, as the copy they replace.
  if (band_possible(pl) && (pl.band_rows > 0) != band_rows_pay(pl)) e.efficiency *= 0.95;
  // Depthwise taps fused along x: 1.07-1.27x geomean where the rule takes them (choose_fused_x_taps).
  if (fuse_x_possible(pl) && (pl.fused_x_taps > 0) != fuse_x_pays(pl, p)) e.efficiency *= 0.85;
  // Software prefetch of the source: where prefetch_src_default says (prefetch_src_pays, col_x_prefetch_pays).
  if (prefetch_src_possible(pl) && pl.prefetch_src != prefetch_src_default(pl, p)) e.efficiency *= 0.9;
  // The group innermost: where group_inner_pays says.
  if (group_inner_possible(pl) && pl.group_inner != group_inner_pays(pl, p)) e.efficiency *= 0.9;
  // The channel block innermost: likewise, where oc_inner_pays says.
  if (oc_inner_possible(pl) && pl.oc_inner != oc_inner_pays(pl)) e.efficiency *= 0.9;
  if (widen_src_possible(pl)) {
    const bool pays = widen_src_pays(pl, p);
    if (pl.widen_src) e.extra_bytes += 4.0 * static_cast<double>(p.src_elements()) * (pays ? 0.5 : 2.0);
    if (!pl.widen_src && pays) e.efficiency *= 0.9;
  }
  const int workers = pl.parallel ? std::max(1, threads) : 1;
  // A thread's share: tasks are dealt out whole, so the busiest thread takes ceil(tasks / workers).
  const double share = static_cast<double>(ceil_div(e.tasks, workers)) / static_cast<double>(e.tasks);
  const double compute = p.flops() / (peak * std::max(e.efficiency, 1e-3));
  const double memory = (bytes + e.extra_bytes) / kBytesPerSecond;
  const double overhead = e.calls * kCallSeconds + (pl.parallel ? kForkSeconds : 0.0);
  return 1e3 * (std::max(compute * share, memory / std::min(workers, 2)) + overhead * share);
}

}  // namespace deconvjit::detail
