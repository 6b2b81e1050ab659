// Edge blocks (Plan::edges): with the x halo, the blocks at a row's borders run functions of their own that
// skip the FMAs on the halo's zero columns. The plan and its schedule: exactly the blocks that read the halo
// become edge blocks, each a single block of a listed pattern, and the segments still cover every output x
// once. The kernels: in every type on both ISAs against the double-precision reference, and an infinite
// weight on a border tap meets no zero (0 x inf would be NaN where the reference has a finite sum).
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "deconvjit/deconvjit.hpp"
#include "runtime/plan.hpp"
#include "runtime/schedule.hpp"
#include "support/deconv_tester.hpp"
#include "support/isa_type_cases.hpp"
#include "support/no_disk_cache.hpp"
#include "support/plan_helpers.hpp"

namespace deconvjit::detail {
namespace {

using testing::DeconvTester;

// 8x8 under a 7x7 kernel at stride 1 (holdout s113 ho03, 48 -> 320): every pixel of a row is a border
// pixel, and the halo's zeros take 21% of the FMAs.
DeconvTester small_7x7(int64_t c_in, int64_t c_out) {
  return DeconvTester().channels(c_in, c_out).input({8, 8}).kernel({7, 7}).pads({3, 3}, {3, 3});
}

// Whether some pixel of the block at `first` (the real column its pixel 0 reads at tap 0) reads the halo at
// some tap: every (pixel, tap) pair tried.
bool reads_halo(const Plan& pl, int64_t first, int64_t width, int64_t taps) {
  const Axis& x = pl.axes[2];
  const int64_t real = x.in - pl.halo_left - pl.halo_right;
  for (int64_t p = 0; p < width; ++p)
    for (int64_t j = 0; j < taps; ++j) {
      const int64_t col = first + p - j * x.tap_i_step;
      if (col < 0 || col >= real) return true;
    }
  return false;
}

void expect_schedule_covers_rows(const Plan& pl) {
  const Axis& x = pl.axes[2];
  const Schedule s = build_schedule(pl);
  for (const RowPart& part : s.parts) {
    std::vector<int> seen(static_cast<size_t>(x.out), 0);
    for (const Segment& g : part.segments) {
      for (int64_t i = 0; i < g.nblocks * g.width; ++i) ++seen[static_cast<size_t>(g.o_first + i * x.stride)];
      const int64_t first = g.ix0 - pl.halo_left;
      if (g.edge < 0) {
        for (int64_t b = 0; b < g.nblocks; ++b) EXPECT_FALSE(reads_halo(pl, first + b * g.width, g.width, g.ntaps));
        continue;
      }
      ASSERT_LT(static_cast<size_t>(g.edge), pl.edges.size());
      const EdgeBlock& e = pl.edges[static_cast<size_t>(g.edge)];
      EXPECT_EQ(g.nblocks, 1);
      EXPECT_EQ(e.width, g.width);
      EXPECT_EQ(e.first, first);
      EXPECT_EQ(e.taps, g.ntaps);
      EXPECT_TRUE(reads_halo(pl, first, g.width, g.ntaps));
    }
    for (int64_t o = part.x0; o < part.x1; ++o) EXPECT_EQ(seen[static_cast<size_t>(o)], 1) << "output x " << o;
  }
}

TEST(EdgeBlocks, BorderBlocksReadingTheHaloRunTheirOwnFunctions) {
  for (Isa isa : kIsas) {
    const Plan pl = plan_for(small_7x7(48, 320).layout(DataFormat::NXC), isa);
    ASSERT_TRUE(pl.has_halo()) << to_string(isa);
    ASSERT_FALSE(pl.edges.empty());
    EXPECT_EQ(pl.functions_per_kind(), pl.ur_w + static_cast<int>(pl.edges.size()));
    EXPECT_EQ(pl.choices.edge_blocks, 1);
    expect_schedule_covers_rows(pl);
    // Each tap's pixels are those whose column is real: [lo, hi) inside, the rest outside.
    const int64_t real = pl.axes[2].in - pl.halo_left - pl.halo_right;
    for (const EdgeBlock& e : pl.edges)
      for (int64_t j = 0; j < e.taps; ++j) {
        int64_t lo = 0, hi = 0;
        edge_pixels(pl, e, j, lo, hi);
        for (int64_t p = 0; p < e.width; ++p) {
          const int64_t col = e.first + p - j * pl.axes[2].tap_i_step;
          EXPECT_EQ(p >= lo && p < hi, col >= 0 && col < real) << "pixel " << p << " tap " << j;
        }
      }
  }
  // Long rows split into parts, strided phases with taps of their own: only the rows' two ends.
  const Plan parts = plan_for(DeconvTester().channels(16, 48).input({6, 90}).kernel({7, 7}).stride({3, 3})
                                  .pads({3, 3}, {3, 3}).layout(DataFormat::NXC),
                              Isa::avx512_core, [] {
                                TuningHints h;
                                h.x_halo = 1, h.x_split = 3;
                                return h;
                              }());
  ASSERT_FALSE(parts.edges.empty());
  expect_schedule_covers_rows(parts);
}

TEST(EdgeBlocks, HintsTurnThemOffOrAreRefused) {
  const DeconvTester t = small_7x7(48, 320).layout(DataFormat::NXC);
  TuningHints off;
  off.edge_blocks = 0;
  const Plan pl = plan_for(t, Isa::avx512_core, off);
  EXPECT_TRUE(pl.has_halo());
  EXPECT_TRUE(pl.edges.empty());
  EXPECT_EQ(pl.functions_per_kind(), pl.ur_w);
  EXPECT_EQ(pl.choices.edge_blocks, 0);
  const Problem p = resolve(t.descriptor());
  TuningHints no_halo;
  no_halo.x_halo = 0, no_halo.edge_blocks = 1;
  expect_rejected(p, Isa::avx512_core, no_halo, "edge_blocks without the halo");
  TuningHints depthwise;
  depthwise.edge_blocks = 1;
  expect_rejected(resolve(DeconvTester().channels(16, 16).groups(16).input({8, 8}).kernel({3, 3})
                              .pads({1, 1}, {1, 1}).layout(DataFormat::NXC).descriptor()),
                  Isa::avx512_core, depthwise, "edge_blocks in the depthwise family");
}

class EdgeBlockKernels : public testing::IsaTypeCases {
 protected:
  // Runs `t` with the halo (and `h`) after checking that its plan has edge blocks.
  void run(DeconvTester t, TuningHints h = {}) const {
    h.x_halo = 1;
    t.isa(isa()).dtype(type()).hints(h);
    ASSERT_FALSE(plan_for(t, isa(), h).edges.empty());
    t.Test();
  }
  testing::NoDiskCache no_disk_cache_;
};

// Both layouts; strided phases with 1-2 taps each; a dilation; a 1-D row cut into parts; 3-D; the reduction
// in two passes (f32: split reductions are f32 only); gemm's folded channels by hint; wide blocks whose
// edge taps each leave out different pixels.
TEST_P(EdgeBlockKernels, MatchReference) {
  run(small_7x7(8, 20).layout(DataFormat::NXC));
  run(small_7x7(8, 20).layout(DataFormat::NCX));
  run(DeconvTester().channels(12, 24).input({6, 5}).kernel({4, 4}).stride({2, 2}).pads({1, 1}, {1, 1})
          .layout(DataFormat::NXC));
  run(DeconvTester().channels(8, 16).input({5, 9}).kernel({3, 3}).dilation({2, 2}).pads({2, 2}, {2, 2})
          .layout(DataFormat::NXC));
  TuningHints parts;
  parts.x_split = 3;
  run(DeconvTester().rank(1).batch(2).channels(16, 40).input({70}).kernel({9}).stride({3}).pads({4}, {4})
          .layout(DataFormat::NXC),
      parts);
  run(DeconvTester().rank(3).channels(8, 16).input({3, 4, 6}).kernel({3, 3, 3}).pads({1, 1, 1}, {1, 1, 1})
          .layout(DataFormat::NXC));
  if (type() == DType::f32) {
    TuningHints split;
    split.ic_block = 8;
    run(small_7x7(16, 20).layout(DataFormat::NXC), split);
  }
  TuningHints gemm;
  gemm.algorithm = "gemm";
  run(DeconvTester().channels(16, 24).input({5, 7}).kernel({4, 4}).stride({2, 2}).layout(DataFormat::NXC), gemm);
  TuningHints wide;
  wide.ur_w = 8, wide.oc_vectors = 1;
  run(small_7x7(8, 12).layout(DataFormat::NXC), wide);
  // Taps 2 apart in the phase's input (stride 2, dilation 3); an odd channel count (a lone bf16 channel,
  // an unroll remainder); a part boundary inside the border run; the source widened first (16-bit data).
  run(DeconvTester().rank(1).channels(8, 24).input({19}).kernel({5}).stride({2}).dilation({3}).pads({6}, {5})
          .layout(DataFormat::NXC));
  run(small_7x7(7, 20).layout(DataFormat::NXC));
  TuningHints halves;
  halves.x_split = 2, halves.ur_w = 2;
  run(small_7x7(8, 20).layout(DataFormat::NXC), halves);
  if (type() != DType::f32) {
    TuningHints widened;
    widened.widen_src = 1, widened.ic_pairs = 0;
    run(small_7x7(8, 20).layout(DataFormat::NXC), widened);
  }
}

// An infinite weight on the rightmost x tap: the outputs of the first three columns never meet it (their
// tap reads left of the input), so the reference sums stay finite there; on the leftmost tap, those of the
// last three columns. Over the halo's zeros those outputs would be NaN (0 x inf).
TEST_P(EdgeBlockKernels, InfiniteWeightsMeetNoZeros) {
  for (int64_t kx : {6, 0}) {
    SCOPED_TRACE(kx);
    // OIX weights [4][16][7][7]: input channel 0, output channel 0, ky 3.
    auto inf_at = [kx](verify::TypedOperands& o) {
      o.weights.set((0 * 7 + 3) * 7 + kx, std::numeric_limits<double>::infinity());
    };
    run(small_7x7(4, 16).layout(DataFormat::NXC).edit(inf_at));
    run(small_7x7(4, 16).layout(DataFormat::NCX).edit(inf_at));
  }
}

INSTANTIATE_TEST_SUITE_P(Types, EdgeBlockKernels, testing::isa_type_values(), testing::isa_type_name);

}  // namespace
}  // namespace deconvjit::detail
