// The gemm_x family's plans: where it is the default on NCX data (gemm_x_preferred), and tiles cut into
// enough tasks for every thread whatever their count (the plan does not know it).
#include <gtest/gtest.h>

#include "deconvjit/deconvjit.hpp"
#include "runtime/int_math.hpp"
#include "runtime/plan.hpp"
#include "support/deconv_tester.hpp"
#include "support/plan_helpers.hpp"

namespace deconvjit::detail {
namespace {

using testing::DeconvTester;

// gemm_x's tasks (runtime/executor.cpp, run_gemm_x): images x planes x x chunks x row tiles x channel tiles.
int64_t gemm_x_tasks(const Plan& pl) {
  const int64_t groups = ceil_div(pl.axes[1].in, int64_t{pl.rows_per_block});
  return pl.batch * pl.groups * pl.axes[0].in * x_chunks(pl) * ceil_div(groups, pl.row_chunk) *
         ceil_div(pl.oc_blocks, pl.oc_chunk);
}

// 384 -> 48 channels, 2x2 stride 2, over one 28x14 plane (holdout s89 ho44): the L2's tile holds the whole
// layer, one task, and ran on one thread of two (0.510 ms, against 0.256 cut into channel tiles).
DeconvTester one_small_plane(int64_t batch) {
  return DeconvTester().batch(batch).channels(384, 48).input({28, 14}).kernel({2, 2}).stride({2, 2}).pads({0, 0}, {0, 0});
}

TEST(PlanGemmX, CutsOnePlanesTileIntoTasks) {
  const Plan one = plan_for(one_small_plane(1), Isa::avx512_core);
  ASSERT_EQ(one.algorithm, Algorithm::gemm_x);
  // Every channel block is a task of its own: no more are to be had (the plane is one row group).
  EXPECT_EQ(gemm_x_tasks(one), one.oc_blocks) << one.to_json();
  EXPECT_EQ(one.oc_chunk, 1);
  // With 16 images there are tasks enough: the tile stays as the L2 sets it (every channel block).
  const Plan many = plan_for(one_small_plane(16), Isa::avx512_core);
  ASSERT_EQ(many.algorithm, Algorithm::gemm_x);
  EXPECT_EQ(many.oc_chunk, many.oc_blocks);
  EXPECT_EQ(gemm_x_tasks(many), 16);
  // A hint still sets the tile.
  TuningHints h;
  h.oc_chunk = 24;
  EXPECT_EQ(plan_for(one_small_plane(1), Isa::avx512_core, h).oc_chunk, 24);
}

TEST(PlanGemmX, HalvesRowsAndChannelsInTurn) {
  // 64 -> 64 over 64 rows of 48 pixels: blocks of 3 vectors x 2 channels, 32 channel blocks. The L2 takes
  // 21 rows (a quarter of 1 MiB at 12 KiB a row) and all 32 blocks (half of it at 2 KiB a block): 4 tasks.
  // Halved in turn to 16 tasks: rows 11, blocks 16, rows 6: 11 row tiles x 2 channel tiles.
  const Plan pl = plan_for(DeconvTester().channels(64, 64).input({64, 48}).kernel({2, 2}).stride({2, 2}).pads({0, 0}, {0, 0}),
                           Isa::avx512_core);
  ASSERT_EQ(pl.algorithm, Algorithm::gemm_x);
  ASSERT_EQ(pl.oc_blocks, 32) << pl.to_json();
  EXPECT_EQ(pl.row_chunk, 6);
  EXPECT_EQ(pl.oc_chunk, 16);
  EXPECT_EQ(gemm_x_tasks(pl), 22);
}

// A row of 256 vectors runs as 4 x chunks, 4 tasks of all 16 channel blocks: the channel tiles are halved
// only to 4 blocks for 16 tasks (counting the chunks; without them the tiles would shrink to one block).
TEST(PlanGemmX, CountsXChunksAsTasks) {
  const Plan pl = plan_for(DeconvTester().rank(1).channels(16, 64).input({4096}).kernel({2}).stride({2}).pads({0}, {0}),
                           Isa::avx512_core);
  ASSERT_EQ(pl.algorithm, Algorithm::gemm_x);
  EXPECT_EQ(pl.x_chunk, 64 * 16);
  EXPECT_EQ(x_chunks(pl), 4);
  ASSERT_EQ(pl.oc_blocks, 16) << pl.to_json();
  EXPECT_EQ(pl.oc_chunk, 4);
  EXPECT_EQ(gemm_x_tasks(pl), 16);
}

Algorithm ncx_family(const DeconvTester& t) { return plan_for(t, Isa::avx512_core).algorithm; }

// Output channels fill their vectors and rows of 28 fill 7/8 of gemm_x's: it leaves C_IN / 7 lanes empty
// per output, which a short reduction repays (the row buffer's flush costs about 8 in f32, 4 in halves).
TEST(PlanGemmX, TakesShortReductionsDespiteEmptierLanes) {
  auto k2s2 = [](int64_t ic) {
    return DeconvTester().channels(ic, 256).input({20, 28}).kernel({2, 2}).stride({2, 2}).pads({0, 0}, {0, 0});
  };
  EXPECT_EQ(ncx_family(k2s2(8)), Algorithm::gemm_x);                           // 1.1 lanes
  EXPECT_EQ(ncx_family(k2s2(24)), Algorithm::gemm_x);                          // 3.4
  EXPECT_EQ(ncx_family(k2s2(48)), Algorithm::gemm_x);                          // 6.9
  EXPECT_NE(ncx_family(k2s2(64)), Algorithm::gemm_x);                          // 9.1
  EXPECT_EQ(ncx_family(k2s2(24).dtype(DType::f16)), Algorithm::gemm_x);        // 3.4
  EXPECT_NE(ncx_family(k2s2(48).dtype(DType::f16)), Algorithm::gemm_x);        // 6.9
  // Fewer than 8 input channels: not measured, the row families keep them.
  EXPECT_NE(ncx_family(k2s2(4)), Algorithm::gemm_x);
}

// Wide blocks by default (wide_block): a source of 16 MiB or more read from 32 planes or more, with at most
// 5 output columns: 8 vectors for one channel at 1x1 (holdout s229 ho47), 6 for one channel at 2x2 stride
// 2 (4 columns of 24 accumulators); three below 16 MiB, from 16 planes, with 6 channels, and with bf16
// pairs.
TEST(PlanGemmX, WideBlocksWhereManyPlanesStream) {
  auto pointwise = [](int64_t ic, int64_t oc, int64_t h) {
    return DeconvTester().channels(ic, oc).input({h, 600}).kernel({1, 1}).layout(DataFormat::NCX);
  };
  auto ur_w = [](const DeconvTester& t) {
    const Plan pl = plan_for(t, Isa::avx512_core);
    EXPECT_EQ(pl.algorithm, Algorithm::gemm_x) << pl.to_json();
    return pl.ur_w;
  };
  EXPECT_EQ(ur_w(pointwise(96, 1, 400)), 8);                         // 92 MB
  EXPECT_EQ(ur_w(pointwise(32, 1, 240)), 8);                         // 18 MB
  EXPECT_EQ(ur_w(pointwise(96, 1, 60)), 3);                          // 14 MB
  EXPECT_EQ(ur_w(pointwise(16, 1, 1000)), 3);                        // 38 MB from 16 planes
  EXPECT_EQ(ur_w(pointwise(96, 4, 400)), 6);                         // 4 columns
  EXPECT_LE(ur_w(pointwise(96, 6, 400)), 3);                         // 6 columns
  EXPECT_EQ(ur_w(pointwise(96, 1, 400).dtype(DType::f16)), 8);       // 46 MB
  const DeconvTester k2 = DeconvTester().channels(64, 1).input({368, 640}).kernel({2, 2}).stride({2, 2})
                              .pads({0, 0}, {0, 0}).layout(DataFormat::NCX);  // dbnet_head_up2
  EXPECT_EQ(ur_w(k2), 6);
  // The channel count asked for keeps the wide block; more channels than a group has are refused.
  TuningHints one;
  one.algorithm = "gemm_x";
  one.oc_vectors = 1;
  EXPECT_EQ(plan_for(pointwise(96, 1, 400), Isa::avx512_core, one).ur_w, 8);
  EXPECT_EQ(plan_for(pointwise(96, 4, 400), Isa::avx512_core, one).ur_w, 6);
  TuningHints two = one;
  two.oc_vectors = 2;
  EXPECT_THROW(plan_for(pointwise(96, 1, 400), Isa::avx512_core, two), Error);
  if (avx512_bf16_usable(DType::bf16, Isa::avx512_core)) {
    const Plan pairs = plan_for(pointwise(96, 1, 400).dtype(DType::bf16), Isa::avx512_core);
    EXPECT_TRUE(pairs.ic_pairs);
    EXPECT_LE(pairs.ur_w, 3);
  }
}

}  // namespace
}  // namespace deconvjit::detail
