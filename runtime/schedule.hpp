// What the executor walks: for every output coordinate of the outer axes, the valid taps; for every part
// of an output row, the segments of pixels that share one tap pattern. Derived from the Plan once, at
// compile time, so execution does no index arithmetic beyond pointer offsets.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/plan.hpp"

namespace deconvjit::detail {

// Valid taps of one output coordinate: `count` taps starting at kernel index k0 / input index i0.
struct AxisTaps {
  int64_t count = 0, i0 = 0, k0 = 0;
};

// `nblocks` register blocks of `width` pixels, consecutive in one phase, with the same x taps.
struct Segment {
  int64_t o_first = 0;  // output x of the first pixel
  int64_t n_first = 0;  // image of the first pixel (blocks across images)
  int64_t ix0 = 0, kx0 = 0, ntaps = 0;
  int32_t width = 1;
  int64_t nblocks = 1;
  int32_t edge = -1;  // one block run by the function of Plan::edges[edge] (-1: the width's function)
  // One block holding a gemm pixel that overhangs the row (Plan::fold_shift, fold_tail): it computes into
  // a scratch block, and only the lanes inside the row are copied to dst.
  bool clipped = false;
};

// A contiguous range [x0, x1) of output x and the segments that compute it.
struct RowPart {
  int64_t x0 = 0, x1 = 0;
  std::vector<Segment> segments;
};

struct Schedule {
  std::vector<AxisTaps> z, y;   // indexed by output coordinate
  std::vector<RowPart> parts;   // together they cover every output x of a row once
};

AxisTaps axis_taps(const Axis& a, int64_t o);
// The first kernel index of output phase r (0 <= r < stride), or -1 where the phase has no taps.
int64_t phase_first_tap(const Axis& a, int64_t r);
Schedule build_schedule(const Plan& plan);
// The distinct border blocks that read the halo in the rows build_schedule makes (Plan::edges).
std::vector<EdgeBlock> find_edge_blocks(const Plan& plan);

}  // namespace deconvjit::detail
