#include "runtime/schedule.hpp"

#include <algorithm>

#include "runtime/int_math.hpp"

namespace deconvjit::detail {
namespace {

// A run of pixels with an identical tap pattern: consecutive pixels of one phase (i0 advances by one
// per pixel), or, when blocking across images, one output x in every image.
struct Run {
  int64_t o_first, q_count;
  AxisTaps taps;  // of the first pixel
};

std::vector<Run> batch_runs(const Axis& x, int64_t batch, int64_t x0, int64_t x1) {
  std::vector<Run> runs;
  for (int64_t o = x0; o < x1; ++o) runs.push_back({o, batch, axis_taps(x, o)});
  return runs;
}

// The last q of phase r's interior from q on: outputs q * stride + r - pad_begin whose taps all meet the
// input row, each with the same taps as the one before, one input further (so they extend its run), or q
// where q is not in it. Planning walks every row (choose_edge_blocks); without this a row of 19150 outputs
// (holdout s229 ho04) cost as many axis_taps calls per plan, and the tuner enumerates 400k plans of it.
int64_t interior_end(const Axis& x, int64_t r, int64_t q) {
  const int64_t k0 = phase_first_tap(x, r);
  if (k0 < 0) return q;
  const int64_t n_taps = (x.kernel - 1 - k0) / x.tap_k_step + 1;
  const int64_t d = (r - k0 * x.dilation) / x.stride;  // exact: input index of tap 0 is q + d
  const int64_t first = (n_taps - 1) * x.tap_i_step - d, last = x.in - 1 - d;
  return q >= first && q < last ? last : q;
}

// Runs of the output x in [x0, x1), phase by phase.
std::vector<Run> row_runs(const Axis& x, int64_t x0, int64_t x1) {
  std::vector<Run> runs;
  for (int64_t r = 0; r < x.stride; ++r) {
    const int64_t q_lo = ceil_div_signed(x0 + x.pad_begin - r, x.stride);
    const int64_t q_hi = floor_div(x1 - 1 + x.pad_begin - r, x.stride);
    for (int64_t q = q_lo; q <= q_hi; ++q) {
      if (!runs.empty() && q > q_lo) {  // inside the interior, the run of q - 1 takes every output to its end
        const int64_t end = std::min(q_hi, interior_end(x, r, q - 1));
        if (end >= q) {
          runs.back().q_count += end - q + 1;
          q = end;
          continue;
        }
      }
      const int64_t o = q * x.stride + r - x.pad_begin;
      const AxisTaps t = axis_taps(x, o);
      if (!runs.empty()) {
        Run& b = runs.back();
        const bool same_phase = o == b.o_first + b.q_count * x.stride;
        const bool same_taps = t.count == b.taps.count && t.k0 == b.taps.k0 &&
                               (t.count == 0 || t.i0 == b.taps.i0 + b.q_count);
        if (same_phase && same_taps) {
          ++b.q_count;
          continue;
        }
      }
      runs.push_back({o, 1, t});
    }
  }
  return runs;
}

// Cuts a run into as few blocks as ur_w allows, of balanced widths: 32 pixels with ur_w 6 become
// 6,6,5,5,5,5 rather than 6,6,6,6,6,2 (a narrow block has too few independent FMA chains).
void emit_piece(std::vector<Segment>& out, const Run& run, int64_t count, int ur_w, int64_t stride,
                bool across_images) {
  const int64_t blocks = (count + ur_w - 1) / ur_w;
  if (blocks == 0) return;
  const int64_t narrow = count / blocks, wide_blocks = count % blocks;
  int64_t first = 0;
  for (int64_t wide = 1; wide >= 0; --wide) {
    const int64_t n = wide ? wide_blocks : blocks - wide_blocks;
    if (n == 0) continue;
    Segment s;
    s.o_first = across_images ? run.o_first : run.o_first + first * stride;
    s.n_first = across_images ? first : 0;
    s.ntaps = run.taps.count;
    s.ix0 = run.taps.count ? run.taps.i0 + (across_images ? 0 : first) : 0;
    s.kx0 = run.taps.k0;
    s.width = static_cast<int32_t>(narrow + wide);
    s.nblocks = n;
    out.push_back(s);
    first += s.width * n;
  }
}

// Plan::edges: the blocks of `segs` that read a zero column of the halo for some pixel and tap become
// segments of one block each, tagged with their pattern's index in `edges` (added there when `add`).
// The real columns of a phase's taps: tap j of pixel p reads first + p - j * tap_i_step.
std::vector<Segment> split_edges(const Plan& pl, const std::vector<Segment>& segs, std::vector<EdgeBlock>& edges,
                                 bool add) {
  const Axis& x = pl.axes[2];
  const int64_t real = x.in - pl.halo_left - pl.halo_right;
  std::vector<Segment> out;
  for (const Segment& s : segs) {
    Segment plain = s;
    plain.nblocks = 0;
    auto flush = [&] {
      if (plain.nblocks) out.push_back(plain);
    };
    for (int64_t b = 0; b < s.nblocks; ++b) {
      const EdgeBlock e{s.width, s.ix0 + b * s.width - pl.halo_left, s.ntaps};
      const bool edge = s.ntaps > 0 && (e.first - (s.ntaps - 1) * x.tap_i_step < 0 || e.first + s.width > real);
      if (!edge) {
        if (!plain.nblocks) plain = Segment{s.o_first + b * s.width * x.stride, s.n_first, s.ix0 + b * s.width,
                                            s.kx0, s.ntaps, s.width, 0, -1};
        ++plain.nblocks;
        continue;
      }
      flush();
      plain.nblocks = 0;
      auto at = std::find(edges.begin(), edges.end(), e);
      if (at == edges.end()) {
        if (!add) throw Error(Error::Kind::Internal, "schedule: a border block the plan has no edge function for");
        at = edges.insert(edges.end(), e);
      }
      out.push_back(Segment{s.o_first + b * s.width * x.stride, s.n_first, e.first + pl.halo_left, s.kx0, s.ntaps,
                            s.width, 1, static_cast<int32_t>(at - edges.begin())});
    }
    flush();
  }
  return out;
}

// gemm: the blocks holding folded pixel 0 (fold_shift) or the last one (fold_tail) become segments of one
// block each, marked clipped. Blocks along x only (choose_batch_blocking), one pixel apart after folding.
std::vector<Segment> split_clipped(const Plan& pl, const std::vector<Segment>& segs) {
  const int64_t last = pl.axes[2].out - 1;
  auto overhangs = [&](int64_t o0, int64_t width) {
    return (pl.fold_shift && o0 == 0) || (pl.fold_tail && o0 <= last && last < o0 + width);
  };
  std::vector<Segment> out;
  for (const Segment& s : segs) {
    int64_t b = 0;
    while (b < s.nblocks) {
      int64_t e = b;  // blocks [b, e) run as one segment
      while (e < s.nblocks && !overhangs(s.o_first + e * s.width, s.width)) ++e;
      if (e == b) ++e;
      Segment piece = s;
      piece.o_first = s.o_first + b * s.width;
      piece.ix0 = s.ix0 + (s.ntaps ? b * s.width : 0);
      piece.nblocks = e - b;
      piece.clipped = overhangs(piece.o_first, s.width);
      out.push_back(piece);
      b = e;
    }
  }
  return out;
}

// The parts of a row and their segments; with `edges` (Plan::edges or, when `add`, a list to fill) the
// border blocks apart.
std::vector<RowPart> row_parts(const Plan& pl, std::vector<EdgeBlock>* edges, bool add) {
  std::vector<RowPart> parts;
  const Axis& x = pl.axes[2];
  const int64_t width = pl.row_part_width();
  for (int64_t x0 = 0; x0 < x.out; x0 += width) {
    RowPart part;
    part.x0 = x0;
    part.x1 = std::min(x.out, x0 + width);
    const std::vector<Run> runs = pl.block_over_batch ? batch_runs(x, pl.batch, part.x0, part.x1)
                                                      : row_runs(x, part.x0, part.x1);
    for (const Run& run : runs)
      emit_piece(part.segments, run, run.q_count, pl.ur_w, x.stride, pl.block_over_batch);
    if (edges) part.segments = split_edges(pl, part.segments, *edges, add);
    if (pl.overhangs_row()) part.segments = split_clipped(pl, part.segments);
    parts.push_back(std::move(part));
  }
  return parts;
}

}  // namespace

int64_t phase_first_tap(const Axis& a, int64_t r) {
  for (int64_t k = 0; k < a.tap_k_step && k < a.kernel; ++k)
    if ((k * a.dilation) % a.stride == r) return k;
  return -1;
}

AxisTaps axis_taps(const Axis& a, int64_t o) {
  AxisTaps t;
  const int64_t shifted = o + a.pad_begin;
  const int64_t r = shifted - floor_div(shifted, a.stride) * a.stride;
  const int64_t q = (shifted - r) / a.stride;
  const int64_t k0 = phase_first_tap(a, r);
  if (k0 < 0) return t;
  const int64_t n_taps = (a.kernel - 1 - k0) / a.tap_k_step + 1;
  const int64_t base = q + (r - k0 * a.dilation) / a.stride;  // input index of tap 0
  const int64_t j_lo = std::max<int64_t>(0, ceil_div_signed(base - (a.in - 1), a.tap_i_step));
  const int64_t j_hi = std::min<int64_t>(n_taps - 1, floor_div(base, a.tap_i_step));
  if (j_hi < j_lo) return t;
  t.count = j_hi - j_lo + 1;
  t.i0 = base - j_lo * a.tap_i_step;
  t.k0 = k0 + j_lo * a.tap_k_step;
  return t;
}

Schedule build_schedule(const Plan& pl) {
  Schedule s;
  for (int64_t o = 0; o < pl.axes[0].out; ++o) s.z.push_back(axis_taps(pl.axes[0], o));
  for (int64_t o = 0; o < pl.axes[1].out; ++o) s.y.push_back(axis_taps(pl.axes[1], o));
  // The NCX-native families resolve x inside the kernel (gemm_x needs no taps at all).
  if (pl.layout == LayoutPath::ncx_native) return s;
  std::vector<EdgeBlock> edges = pl.edges;
  s.parts = row_parts(pl, edges.empty() ? nullptr : &edges, false);
  return s;
}

std::vector<EdgeBlock> find_edge_blocks(const Plan& pl) {
  std::vector<EdgeBlock> edges;
  row_parts(pl, &edges, true);
  return edges;
}

}  // namespace deconvjit::detail
