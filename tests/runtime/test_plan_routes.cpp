// The plan's routes: which family computes a layer and how NCX data reaches it (runtime/plan_route.cpp and
// the families' *_preferred rules).
#include <gtest/gtest.h>

#include <string>

#include "deconvjit/deconvjit.hpp"
#include "runtime/plan.hpp"
#include "support/deconv_tester.hpp"
#include "support/plan_helpers.hpp"

namespace deconvjit::detail {
namespace {

using testing::DeconvTester;

TEST(PlanRoutes, KernelEqualsStrideWithoutPaddingIsGemm) {
  for (Isa isa : kIsas) {
    for (int64_t k : {2, 3, 4}) {
      const Plan pl = plan_for(DeconvTester().layout(DataFormat::NXC).channels(16, 24).input({5, 6}).kernel({k, k})
                                   .stride({k, k}), isa);
      EXPECT_EQ(pl.algorithm, Algorithm::gemm) << pl.name;
      EXPECT_EQ(pl.axes[2].stride, 1);  // x folded into the channels
      EXPECT_EQ(pl.oc_per_group, 24 * k);
    }
    // Groups, padding where C_OUT fills the lanes already (test_gemm_overhang.cpp), or a forced direct
    // algorithm keep it off the gemm route.
    EXPECT_NE(plan_for(DeconvTester().layout(DataFormat::NXC).groups(2).channels(16, 24).input({5, 6})
                           .kernel({2, 2}).stride({2, 2}), isa).algorithm, Algorithm::gemm);
    EXPECT_NE(plan_for(DeconvTester().layout(DataFormat::NXC).channels(16, 32).input({5, 6}).kernel({2, 2})
                           .stride({2, 2}).pads({1, 1}, {1, 1}), isa).algorithm, Algorithm::gemm);
    TuningHints direct;
    direct.algorithm = "direct";
    EXPECT_EQ(plan_for(DeconvTester().layout(DataFormat::NXC).channels(16, 24).input({5, 6}).kernel({2, 2})
                           .stride({2, 2}), isa, direct).algorithm, Algorithm::direct);
  }
}

TEST(PlanRoutes, DepthwiseWhenOneChannelPerGroup) {
  for (Isa isa : kIsas)
    for (int64_t c : {3, 16, 37})
      for (DataFormat f : {DataFormat::NCX, DataFormat::NXC}) {
        const Plan pl = plan_for(DeconvTester().layout(f).groups(c).channels(c, c).input({5, 6}).stride({2, 2}), isa);
        // NCX data gets the family that vectorises along x, or the depthwise family over plane tiles (16
        // channels of short rows: PlaneTilesForShortRowsOrManyTaps); no copies of whole tensors.
        const bool tiles = pl.layout == LayoutPath::ncx_plane_tiles;
        EXPECT_EQ(pl.algorithm, f == DataFormat::NCX && !tiles ? Algorithm::depthwise_x : Algorithm::depthwise)
            << pl.name;
        EXPECT_TRUE(!tiles || (f == DataFormat::NCX && c == 16)) << pl.name;
        EXPECT_NE(pl.name.find(f == DataFormat::NCX && !tiles ? "_depthwise_x_" : "_depthwise_"), std::string::npos)
            << pl.name;
        EXPECT_NE(plan_for(DeconvTester().layout(f).groups(c).channels(c, 2 * c).input({5, 6}), isa).algorithm,
                  Algorithm::depthwise);
      }
}

// Depthwise on NCX data: tiles of whole planes where depthwise_x cannot run, for f32 at 9+ taps per output on
// short rows (AVX2: either), for 16-bit data from 4 taps; depthwise_x elsewhere. Channels must fill whole
// vectors, and a tile hint keeps the old default.
TEST(PlanRoutes, PlaneTilesForShortRowsOrManyTaps) {
  auto tiles = [](const DeconvTester& t, Isa isa, const TuningHints& h = {}) {
    return plan_for(t, isa, h).layout == LayoutPath::ncx_plane_tiles;
  };
  auto dw = [](int64_t c, int64_t in, int64_t k, int64_t s) {
    return DeconvTester().groups(c).channels(c, c).input({in, in}).kernel({k, k}).stride({s, s});
  };
  const DeconvTester short4 = dw(64, 7, 3, 2), long4 = dw(64, 32, 4, 2), long9 = dw(64, 28, 5, 2);
  const DeconvTester short9 = dw(64, 8, 5, 2), long1 = dw(64, 16, 2, 2);
  EXPECT_TRUE(tiles(short4, Isa::avx2));  // 14-pixel rows
  EXPECT_FALSE(tiles(short4, Isa::avx512_core));
  EXPECT_FALSE(tiles(long4, Isa::avx2));
  EXPECT_TRUE(tiles(long9, Isa::avx2));
  EXPECT_FALSE(tiles(long9, Isa::avx512_core));
  EXPECT_TRUE(tiles(short9, Isa::avx512_core));
  for (DType t : {DType::bf16, DType::f16})
    for (Isa isa : kIsas) {
      EXPECT_TRUE(tiles(DeconvTester(long4).dtype(t), isa)) << to_string(isa);
      EXPECT_FALSE(tiles(DeconvTester(long1).dtype(t), isa)) << to_string(isa);
    }
  EXPECT_TRUE(tiles(dw(64, 7, 3, 3), Isa::avx2));  // stride 3: depthwise_x would leave 2 of 8 lanes idle
  EXPECT_FALSE(tiles(dw(64, 7, 3, 3), Isa::avx512_core));  // 15 of 16 lanes hold outputs
  EXPECT_FALSE(tiles(dw(60, 7, 3, 2), Isa::avx2));          // channels not whole vectors
  EXPECT_FALSE(tiles(dw(64, 7, 3, 2).layout(DataFormat::NXC), Isa::avx2));
  TuningHints ur;
  ur.ur_w = 2;
  EXPECT_FALSE(tiles(short4, Isa::avx2, ur));
  const Plan pl = plan_for(short4, Isa::avx2);
  EXPECT_EQ(pl.channels_per_call % (pl.oc_vectors * pl.lanes), 0);
  EXPECT_EQ(64 % pl.channels_per_call, 0);
  EXPECT_EQ(to_json(plan_for(short4, Isa::avx2, pl.choices).choices), to_json(pl.choices));
}

// One channel in and out: NCX and NXC are the same bytes. Either layout takes depthwise_x where it applies
// (not where gemm's folded phases fill whole vectors); NCX data without it runs the NXC family on the
// caller's tensors (layout nxc), which the hint asks for too and refuses elsewhere.
TEST(PlanRoutes, OneChannelLayersRunOnTheCallersBytes) {
  const DeconvTester s2 = DeconvTester().channels(1, 1).input({9, 21}).kernel({4, 4}).stride({2, 2})
                              .pads({1, 1}, {1, 1});
  const DeconvTester s16 = DeconvTester().channels(1, 1).input({3, 5}).kernel({32, 32}).stride({16, 16});
  for (Isa isa : kIsas)
    for (DataFormat f : {DataFormat::NCX, DataFormat::NXC}) {
      const Plan pl = plan_for(DeconvTester(s2).layout(f), isa);
      EXPECT_EQ(pl.algorithm, Algorithm::depthwise_x) << pl.name;
      const Plan wide = plan_for(DeconvTester(s16).layout(f), isa);  // AVX2: no depthwise_x at stride 16
      EXPECT_EQ(wide.layout, LayoutPath::nxc) << wide.name;
      EXPECT_FALSE(wide.copies_src() && !wide.has_halo()) << wide.name;
      EXPECT_EQ(to_json(plan_for(DeconvTester(s16).layout(f), isa, wide.choices).choices), to_json(wide.choices));
      DeconvTester(s2).layout(f).isa(isa).Test();
      DeconvTester(s16).layout(f).isa(isa).Test();
    }
  TuningHints nxc;
  nxc.layout = "nxc";
  for (Isa isa : kIsas) {
    const Plan pl = plan_for(DeconvTester(s2), isa, nxc);
    EXPECT_EQ(pl.layout, LayoutPath::nxc);
    EXPECT_EQ(pl.choices.layout, "nxc");
    DeconvTester(s2).isa(isa).hints(nxc).Test();
    expect_rejected(resolve(DeconvTester(s2).channels(2, 1).descriptor()), isa, nxc, "two input channels");
    expect_rejected(resolve(DeconvTester(s2).layout(DataFormat::NXC).descriptor()), isa, nxc, "on NXC data");
    TuningHints x = nxc;
    x.algorithm = "depthwise_x";
    expect_rejected(resolve(DeconvTester(s2).descriptor()), isa, x, "nxc with depthwise_x");
  }
}

// The NCX defaults that change a layer's family: the dot family's wide rows go to col_x (on AVX2 too where
// its kernel has at most 6 x taps), a 1->1 layer without groups to depthwise_x. Each keeps its NXC family
// when a hint asks for something only that family does (x_halo), and dot_x and col_x are refused on NXC data
// by name.
TEST(PlanRoutes, NcxNativeDefaultsYieldToFamilyHints) {
  const DeconvTester dot = DeconvTester().channels(16, 1).input({4, 40}).kernel({4, 4}).stride({2, 2})
                               .pads({1, 1}, {1, 1});
  const DeconvTester one = DeconvTester().channels(1, 1).input({8, 40}).kernel({4, 4}).stride({2, 2})
                               .pads({1, 1}, {1, 1});
  TuningHints halo;
  halo.x_halo = 1;
  TuningHints serial;
  serial.parallel = 0;
  for (Isa isa : kIsas) {
    const Algorithm native = Algorithm::col_x;
    EXPECT_EQ(plan_for(dot, isa).algorithm, native) << to_string(isa);
    EXPECT_EQ(plan_for(dot, isa, serial).algorithm, native) << to_string(isa);
    EXPECT_EQ(plan_for(dot, isa, halo).algorithm, Algorithm::dot) << to_string(isa);
    EXPECT_EQ(plan_for(one, isa).algorithm, Algorithm::depthwise_x) << to_string(isa);
    EXPECT_NE(plan_for(one, isa, halo).algorithm, Algorithm::depthwise_x) << to_string(isa);
    // NXC data with one channel each way is the same bytes as NCX: depthwise_x too, and hints as above.
    EXPECT_EQ(plan_for(DeconvTester(one).layout(DataFormat::NXC), isa).algorithm, Algorithm::depthwise_x);
    EXPECT_NE(plan_for(DeconvTester(one).layout(DataFormat::NXC), isa, halo).algorithm, Algorithm::depthwise_x);
    TuningHints dot_x;
    dot_x.algorithm = "dot_x";
    expect_rejected(resolve(DeconvTester(dot).layout(DataFormat::NXC).descriptor()), isa, dot_x, "dot_x on NXC");
    TuningHints col_x;
    col_x.algorithm = "col_x";
    expect_rejected(resolve(DeconvTester(dot).layout(DataFormat::NXC).descriptor()), isa, col_x, "col_x on NXC");
  }
}

// col_x by default on AVX-512 NCX (per group; groups in tests/jit/test_col_x_groups.cpp, with the
// half-vector rows and stride-1 rules): up to 16 output channels from 8+ input channels, except where gemm_x
// reads NCX in place (K == s), a 1->1 layer (depthwise_x); 17-25 output channels (two vectors a fifth or
// more empty) where input rows fill 85%+ of their vectors; not from 26 (f32 and f16; bf16 pairs have
// their own rule). 12-16 channels (3/4+ of a vector) only over rows that fill 85%+ of their vectors or
// more of them than the channels fill of theirs.
TEST(PlanRoutes, ColXForFewOutputChannelsOnNcx) {
  auto alg = [](const DeconvTester& t) { return plan_for(t, Isa::avx512_core).algorithm; };
  const DeconvTester base = DeconvTester().input({6, 64}).kernel({3, 3}).stride({2, 2}).pads({1, 1}, {1, 1});
  EXPECT_EQ(alg(DeconvTester(base).channels(20, 10)), Algorithm::col_x);
  EXPECT_EQ(alg(DeconvTester(base).channels(64, 16)), Algorithm::col_x);
  EXPECT_EQ(alg(DeconvTester(base).channels(64, 17)), Algorithm::col_x);
  EXPECT_EQ(alg(DeconvTester(base).channels(64, 25).dtype(DType::f16)), Algorithm::col_x);
  EXPECT_NE(alg(DeconvTester(base).channels(64, 26)), Algorithm::col_x);
  EXPECT_NE(alg(DeconvTester(base).channels(64, 17).input({6, 34})), Algorithm::col_x);  // rows 71% full
  EXPECT_NE(alg(DeconvTester(base).channels(24, 16).input({6, 18})), Algorithm::col_x);  // 56% against 100%
  EXPECT_NE(alg(DeconvTester(base).channels(24, 16).input({6, 52})), Algorithm::col_x);  // 81% against 100%
  EXPECT_NE(alg(DeconvTester(base).channels(24, 12).input({6, 24})), Algorithm::col_x);  // 75% against 75%
  EXPECT_EQ(alg(DeconvTester(base).channels(24, 12).input({6, 26})), Algorithm::col_x);  // 81% against 75%
  EXPECT_EQ(alg(DeconvTester(base).channels(24, 16).input({6, 56})), Algorithm::col_x);  // 88%
  EXPECT_EQ(alg(DeconvTester(base).channels(24, 10).input({6, 18})), Algorithm::col_x);  // channels 62%
  EXPECT_NE(alg(DeconvTester(base).channels(4, 10)), Algorithm::col_x);
  EXPECT_NE(alg(DeconvTester(base).channels(20, 10).layout(DataFormat::NXC)), Algorithm::col_x);
  EXPECT_EQ(alg(DeconvTester(base).channels(20, 10).kernel({2, 2}).pads({0, 0}, {0, 0})), Algorithm::gemm_x);
}

// AVX2 (col_x_preferred_avx2): output channels leaving a tenth of the row families' 8-lane vectors empty
// (at most 40), input rows filling 85%+ of col_x's vectors, at most 6 x taps, and more than 2 channel blocks
// only up to 48 input channels; or exactly 8 channels over rows of 2+ vectors with at most 4 x taps.
TEST(PlanRoutes, ColXOnAvx2WhereChannelsLeaveLanesEmpty) {
  auto alg = [](const DeconvTester& t) { return plan_for(t, Isa::avx2).algorithm; };
  const DeconvTester base = DeconvTester().input({6, 64}).kernel({3, 3}).stride({2, 2}).pads({1, 1}, {1, 1});
  EXPECT_EQ(alg(DeconvTester(base).channels(20, 10)), Algorithm::col_x);  // 5 blocks of 2 over 20 channels
  EXPECT_NE(alg(DeconvTester(base).channels(64, 10)), Algorithm::col_x);  // ... over 64
  EXPECT_EQ(alg(DeconvTester(base).channels(64, 3)), Algorithm::col_x);   // 2 blocks
  EXPECT_EQ(alg(DeconvTester(base).channels(20, 33)), Algorithm::col_x);  // 83% of 5 vectors
  EXPECT_NE(alg(DeconvTester(base).channels(20, 16)), Algorithm::col_x);  // full vectors
  EXPECT_EQ(alg(DeconvTester(base).channels(64, 8)), Algorithm::col_x);   // one: a broadcast per FMA there
  EXPECT_NE(alg(DeconvTester(base).channels(64, 8).kernel({5, 5}).pads({2, 2}, {2, 2})), Algorithm::col_x);
  EXPECT_NE(alg(DeconvTester(base).channels(64, 8).input({6, 8})), Algorithm::col_x);  // rows of one vector
  EXPECT_NE(alg(DeconvTester(base).channels(20, 41)), Algorithm::col_x);
  EXPECT_NE(alg(DeconvTester(base).channels(20, 10).input({6, 12})), Algorithm::col_x);  // rows 75% full
  EXPECT_EQ(alg(DeconvTester(base).channels(20, 10).input({6, 60})), Algorithm::col_x);  // 94%
  EXPECT_NE(alg(DeconvTester(base).channels(20, 10).kernel({7, 7}).pads({3, 3}, {3, 3})), Algorithm::col_x);
  EXPECT_NE(alg(DeconvTester(base).channels(4, 10)), Algorithm::col_x);  // 4 channels at stride 2
  // At stride 1 any number of channels (holdout s229 ho46: 4 groups of 4 -> 10, 1x1; G=1 2 -> 5, 3x3).
  EXPECT_EQ(alg(DeconvTester(base).channels(4, 10).stride({1, 1})), Algorithm::col_x);
  EXPECT_EQ(alg(DeconvTester().groups(4).channels(16, 40).input({40, 40}).kernel({1, 1})), Algorithm::col_x);
  EXPECT_EQ(alg(DeconvTester(base).channels(2, 5).stride({1, 1})), Algorithm::col_x);
}

// NCX layers blocked over images take whole-tensor copies, whose transposes write planes whole, instead of
// a row buffer whose flush writes each image's short rows; a layout hint still picks the row buffer.
TEST(PlanRoutes, BatchBlockedNcxThroughScratch) {
  const DeconvTester base = DeconvTester().batch(16).channels(64, 64).input({5, 5}).kernel({3, 3}).stride({2, 2});
  for (Isa isa : kIsas) {
    const Plan pl = plan_for(base, isa);
    EXPECT_TRUE(pl.block_over_batch) << to_string(isa);
    EXPECT_EQ(pl.layout, LayoutPath::ncx_via_scratch) << to_string(isa);
    TuningHints rows;
    rows.layout = "row_buffer";
    EXPECT_EQ(plan_for(base, isa, rows).layout, LayoutPath::ncx_row_buffer) << to_string(isa);
    EXPECT_EQ(plan_for(DeconvTester(base).batch(2), isa).layout, LayoutPath::ncx_row_buffer) << to_string(isa);
  }
}

// Depthwise layers depthwise_x cannot take (x dilation 2) go through whole-tensor copies while the output is
// below 8 MB, through a row buffer from there on (in bytes: bf16 halves them).
TEST(PlanRoutes, DepthwiseNcxThroughCopiesOnlyWhileTheOutputIsSmall) {
  auto dw = [](int64_t side) {
    return DeconvTester().groups(64).channels(64, 64).input({side, side}).kernel({3, 3}).stride({3, 3})
        .dilation({1, 2});
  };
  for (Isa isa : kIsas) {
    EXPECT_EQ(plan_for(dw(44), isa).layout, LayoutPath::ncx_via_scratch) << to_string(isa);    // 4.5 MB
    EXPECT_EQ(plan_for(dw(88), isa).layout, LayoutPath::ncx_row_buffer) << to_string(isa);     // 17.8 MB
    EXPECT_EQ(plan_for(dw(88).dtype(DType::bf16), isa).layout, LayoutPath::ncx_row_buffer);     // 8.9 MB
    EXPECT_EQ(plan_for(dw(60).dtype(DType::bf16), isa).layout, LayoutPath::ncx_via_scratch);    // 4.1 MB
    EXPECT_EQ(plan_for(dw(88), isa).algorithm, Algorithm::depthwise) << to_string(isa);
    TuningHints copies;
    copies.layout = "scratch";
    EXPECT_EQ(plan_for(dw(88), isa, copies).layout, LayoutPath::ncx_via_scratch) << to_string(isa);
  }
}

// col_x asks for source rows ahead only where a row spans several tiles (rows of one tile walk each plane
// row after row, as the hardware prefetchers follow).
TEST(PlanRoutes, ColXPrefetchesRowsOfSeveralTiles) {
  const DeconvTester base = DeconvTester().channels(64, 1).kernel({5, 5}).stride({2, 2}).pads({1, 1}, {2, 2});
  const Plan one = plan_for(DeconvTester(base).input({14, 14}), Isa::avx512_core);
  const Plan many = plan_for(DeconvTester(base).input({14, 200}), Isa::avx512_core);
  ASSERT_EQ(one.algorithm, Algorithm::col_x);
  ASSERT_EQ(many.algorithm, Algorithm::col_x);
  EXPECT_FALSE(one.prefetch_src);
  EXPECT_TRUE(many.prefetch_src);
}

// The dot family's shape on 1-D NXC data with 2+ taps per phase runs as gemm (its phases folded into
// channels); one tap per phase, 2-D layers and NCX data keep dot.
TEST(PlanRoutes, OneDimensionalFewOutputsFoldIntoGemm) {
  auto layer = [](int64_t k, int64_t s, DataFormat f, int rank = 1) {
    const std::vector<int64_t> in = rank == 1 ? std::vector<int64_t>{400} : std::vector<int64_t>{20, 20};
    return DeconvTester().rank(rank).channels(48, 4).input(in).kernel(std::vector<int64_t>(rank, k))
        .stride(std::vector<int64_t>(rank, s)).pads(std::vector<int64_t>(rank, (k - s) / 2),
                                                      std::vector<int64_t>(rank, (k - s) / 2)).layout(f);
  };
  for (Isa isa : kIsas) {
    EXPECT_EQ(plan_for(layer(16, 8, DataFormat::NXC), isa).algorithm, Algorithm::gemm);
    EXPECT_EQ(plan_for(layer(4, 2, DataFormat::NXC), isa).algorithm, Algorithm::gemm);
    EXPECT_EQ(plan_for(layer(2, 2, DataFormat::NXC), isa).algorithm, Algorithm::dot);
    EXPECT_EQ(plan_for(layer(4, 2, DataFormat::NXC, 2), isa).algorithm, Algorithm::dot);
    EXPECT_NE(plan_for(layer(16, 8, DataFormat::NCX), isa).algorithm, Algorithm::gemm);
    // 16-bit data up to 128 input channels takes gemm too; from 129 (and with a hint other than the
    // family-neutral ones, in any type) dot stays.
    for (DType t : {DType::bf16, DType::f16}) {
      EXPECT_EQ(plan_for(layer(16, 8, DataFormat::NXC).dtype(t).channels(128, 4), isa).algorithm, Algorithm::gemm);
      EXPECT_EQ(plan_for(layer(16, 8, DataFormat::NXC).dtype(t).channels(129, 4), isa).algorithm, Algorithm::dot);
    }
    TuningHints tile;
    tile.ur_w = 2;
    EXPECT_EQ(plan_for(layer(16, 8, DataFormat::NXC), isa, tile).algorithm, Algorithm::dot);
    EXPECT_EQ(plan_for(layer(16, 8, DataFormat::NXC).dtype(DType::f16), isa, tile).algorithm, Algorithm::dot);
  }
}

// Channel blocks innermost where a block's channels start or end inside a cache line of the output: 21
// channels folded by 4 (84 per pixel, 336 bytes) in blocks of 4 AVX2 vectors; not 128 channels (512 bytes
// per pixel, blocks of whole lines), nor through the NCX row buffer.
TEST(PlanRoutes, ChannelBlocksInnermostWhereTheyShareLines) {
  const DeconvTester shared = DeconvTester().channels(8, 21).input({13, 19}).kernel({4, 4}).stride({4, 4})
                                  .layout(DataFormat::NXC);
  const Plan on = plan_for(shared, Isa::avx2);
  ASSERT_GT(on.oc_blocks, 1);
  EXPECT_TRUE(on.oc_inner) << on.name;
  TuningHints off;
  off.oc_inner = 0;
  EXPECT_FALSE(plan_for(shared, Isa::avx2, off).oc_inner);
  const Plan whole = plan_for(DeconvTester().channels(64, 128).input({13, 19}).kernel({3, 3}).stride({2, 2})
                                  .layout(DataFormat::NXC), Isa::avx512_core);
  ASSERT_GT(whole.oc_blocks, 1);
  EXPECT_FALSE(whole.oc_inner) << whole.name;
  TuningHints rows;
  rows.layout = "row_buffer", rows.oc_vectors = 1;
  EXPECT_FALSE(plan_for(DeconvTester().channels(8, 21).input({13, 19}).kernel({3, 3}).stride({2, 2}), Isa::avx2, rows)
                   .oc_inner);
}

}  // namespace
}  // namespace deconvjit::detail
