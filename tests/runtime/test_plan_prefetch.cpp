// Software prefetch of the source (runtime/plan_copies.cpp, prefetch_src_pays; col_x_prefetch_pays) and the
// narrower blocks over a streamed source (plan_tile.cpp, streamed_block_cap: the dot family's one pixel, the
// direct and gemm families' six), planned for any CPU: their bounds, the layouts and families that never take
// them, and the hints.
#include <gtest/gtest.h>

#include "deconvjit/deconvjit.hpp"
#include "runtime/plan.hpp"
#include "support/deconv_tester.hpp"
#include "support/plan_helpers.hpp"

namespace deconvjit::detail {
namespace {

using testing::DeconvTester;

// 1x1 from 256 input channels (1 KB per f32 pixel) to 24 over rows x cols NXC pixels.
DeconvTester pointwise(int64_t rows, int64_t cols) {
  return DeconvTester().channels(256, 24).input({rows, cols}).kernel({1, 1}).layout(DataFormat::NXC);
}

TEST(PlanPrefetch, RowsAskForTheNextBlockOfABigSource) {
  for (Isa isa : kIsas) {
    SCOPED_TRACE(to_string(isa));
    // 8 MiB of source (8192 pixels of 1 KB), blocks of a few KB: from exactly the bound.
    const Plan at = plan_for(pointwise(64, 128), isa);
    ASSERT_TRUE(at.algorithm == Algorithm::gemm || at.algorithm == Algorithm::direct) << at.name;
    EXPECT_TRUE(at.prefetch_src) << at.name;
    EXPECT_NE(at.name.find("_pf"), std::string::npos) << at.name;
    EXPECT_FALSE(plan_for(pointwise(64, 127), isa).prefetch_src);  // a row of 64 KB short of it
    // The same elements in bf16 are half the bytes; twice as many are as many bytes.
    EXPECT_FALSE(plan_for(pointwise(64, 128).dtype(DType::bf16), isa).prefetch_src);
    EXPECT_TRUE(plan_for(pointwise(128, 128).dtype(DType::bf16), isa).prefetch_src);
    // Blocks across images (each pixel an image apart) never ask; the hint is refused there.
    const DeconvTester images = DeconvTester().batch(64).channels(256, 24).input({2, 2}).kernel({2, 2})
                                    .stride({2, 2}).layout(DataFormat::NXC);
    TuningHints across;
    across.batch_block = 1;
    ASSERT_TRUE(plan_for(images, isa, across).block_over_batch);
    EXPECT_FALSE(plan_for(images, isa, across).prefetch_src);
    across.prefetch_src = 1;
    expect_rejected(resolve(images.descriptor()), isa, across, "prefetch_src across images", "prefetch_src");
    // dot rows: 64 channels (blocks of 12-16 pixels, 4 KB) from 16 MB take it; 512 channels (24-32 KB of
    // next block, more than a third of L1) do not.
    const DeconvTester narrow = DeconvTester().rank(1).batch(2).channels(64, 1).input({32000}).kernel({2})
                                    .stride({1}).layout(DataFormat::NXC);
    const Plan dot = plan_for(narrow, isa);
    ASSERT_EQ(dot.algorithm, Algorithm::dot);
    EXPECT_TRUE(dot.prefetch_src);
    EXPECT_FALSE(plan_for(DeconvTester(narrow).input({64000}).dtype(DType::bf16), isa).prefetch_src);  // 16-bit dot
    // (dot by hint: by default this 1-D layer folds into gemm, PlanRoutes.OneDimensionalFewOutputsFoldIntoGemm)
    const DeconvTester wide = DeconvTester().rank(1).batch(2).channels(512, 1).input({4000}).kernel({16})
                                  .stride({8}).layout(DataFormat::NXC);
    TuningHints dot_family;
    dot_family.algorithm = "dot";
    const Plan wide_dot = plan_for(wide, isa, dot_family);
    ASSERT_EQ(wide_dot.algorithm, Algorithm::dot);
    ASSERT_GT(wide_dot.ur_w * 512 * 4, 12 << 10);
    EXPECT_FALSE(wide_dot.prefetch_src);
    // NCX data through the row buffer (a copy the caches hold) never asks: the generators do not.
    TuningHints row_buffer;
    row_buffer.layout = "row_buffer";
    const Plan ncx = plan_for(pointwise(64, 128).layout(DataFormat::NCX), isa, row_buffer);
    ASSERT_EQ(ncx.layout, LayoutPath::ncx_row_buffer);
    EXPECT_FALSE(ncx.prefetch_src);
    // The hint decides both ways where the plan can have it.
    TuningHints off, on;
    off.prefetch_src = 0;
    on.prefetch_src = 1;
    EXPECT_FALSE(plan_for(pointwise(64, 128), isa, off).prefetch_src);
    EXPECT_TRUE(plan_for(pointwise(8, 8), isa, on).prefetch_src);
    EXPECT_TRUE(plan_for(wide, isa, on).prefetch_src);
  }
}

// col_x keeps its own rule: a channel row's piece two tiles on where a row spans several tiles.
TEST(PlanPrefetch, ColXAsksWhereARowSpansSeveralTiles) {
  TuningHints col_x;
  col_x.algorithm = "col_x";
  const DeconvTester t = DeconvTester().channels(64, 3).kernel({3, 3}).stride({2, 2}).pads({1, 1}, {1, 1});
  for (Isa isa : kIsas) {
    SCOPED_TRACE(to_string(isa));
    const Plan several = plan_for(DeconvTester(t).input({5, 60}), isa, col_x);
    ASSERT_EQ(several.algorithm, Algorithm::col_x);
    EXPECT_TRUE(several.prefetch_src);
    EXPECT_FALSE(plan_for(DeconvTester(t).input({5, 3}), isa, col_x).prefetch_src);
    TuningHints off = col_x;
    off.prefetch_src = 0;
    EXPECT_FALSE(plan_for(DeconvTester(t).input({5, 60}), isa, off).prefetch_src);
    // The hint alone neither moves a col_x default to a row family nor is refused (family_neutral).
    TuningHints only_off;
    only_off.prefetch_src = 0;
    const Plan kept = plan_for(DeconvTester(t).input({5, 60}), isa, only_off);
    EXPECT_EQ(kept.algorithm, plan_for(DeconvTester(t).input({5, 60}), isa).algorithm);
    EXPECT_FALSE(kept.prefetch_src);
  }
}

// A dot row streamed from memory reads one pixel per block, in address order (plan_tile.cpp,
// streamed_block_cap): kernel 1 on every axis, 16 MiB of source (16-bit on AVX2: 32) and a block that would
// span 1 KB or more; not a block across images.
TEST(PlanPrefetch, DotReadsAStreamedSourcePixelByPixel) {
  // 96 -> 1 over 7 x c pixels of 384 bytes: 16 MiB is 43690.7 pixels.
  auto head = [](int64_t cols) {
    return DeconvTester().channels(96, 1).input({7, cols}).kernel({1, 1}).layout(DataFormat::NXC);
  };
  for (Isa isa : kIsas) {
    SCOPED_TRACE(to_string(isa));
    const Plan at = plan_for(head(6242), isa), below = plan_for(head(6241), isa);
    ASSERT_EQ(at.algorithm, Algorithm::dot);
    EXPECT_EQ(at.ur_w, 1);
    EXPECT_EQ(below.ur_w, dot_plain_ur(below));
    EXPECT_GT(below.ur_w, 2);
    EXPECT_GT(plan_for(head(6242).dtype(DType::bf16), isa).ur_w, 2);  // half the bytes
    // f16 at 16 MiB: AVX-512 one pixel; AVX2, which converts each vector in the pixel's one chain, from 32.
    EXPECT_EQ(plan_for(head(12484).dtype(DType::f16), isa).ur_w, isa == Isa::avx2 ? dot_plain_ur(below) : 1);
    EXPECT_EQ(plan_for(head(24967).dtype(DType::f16), isa).ur_w, 1);
    EXPECT_EQ(plan_for(head(24966).dtype(DType::f16), isa).ur_w, isa == Isa::avx2 ? dot_plain_ur(below) : 1);
    // More taps per phase (2x2 stride 2) keep the block wide.
    const Plan taps = plan_for(head(12484).kernel({2, 2}).stride({2, 2}), isa);
    ASSERT_EQ(taps.algorithm, Algorithm::dot);
    EXPECT_GT(taps.ur_w, 2);
    TuningHints four;
    four.ur_w = 4;
    EXPECT_EQ(plan_for(head(6242), isa, four).ur_w, 4);  // the hint decides
    // Blocks across images (64 images of 700 pixels, 17 MB) keep their width: their pixels lie an image apart.
    TuningHints images;
    images.batch_block = 1;
    const Plan across = plan_for(DeconvTester(head(1)).batch(64).input({1, 700}), isa, images);
    ASSERT_TRUE(across.block_over_batch);
    EXPECT_GT(across.ur_w, 2);
  }
  // 16 channels (64 bytes a pixel) over 512 x 512 pixels: AVX2's 12 pixels span 768 bytes and stay, AVX-512's
  // 16 span 1 KB and read one at a time.
  const DeconvTester narrow = DeconvTester().channels(16, 1).input({512, 512}).kernel({1, 1})
                                  .layout(DataFormat::NXC);
  EXPECT_EQ(plan_for(narrow, Isa::avx2).ur_w, 12);
  EXPECT_EQ(plan_for(narrow, Isa::avx512_core).ur_w, 1);
}

// The direct and gemm families over a streamed f32 source (16 MiB, one tap per phase: kernel <= stride) take
// at most 6 pixels a block where it would span 1 KB or more (streamed_block_cap), balanced along the row.
TEST(PlanPrefetch, RowBlocksOverAStreamedSourceTakeAtMostSixPixels) {
  // One vector of outputs (AVX2 8 channels: 12 pixels; AVX-512 16: 28) from 96 channels, 384 bytes a pixel.
  for (Isa isa : kIsas) {
    SCOPED_TRACE(to_string(isa));
    const int64_t oc = isa == Isa::avx2 ? 8 : 16;
    auto layer = [&](int64_t cols) {
      return DeconvTester().channels(96, oc).input({7, cols}).kernel({1, 1}).layout(DataFormat::NXC);
    };
    const Plan at = plan_for(layer(6242), isa), below = plan_for(layer(6241), isa);
    ASSERT_TRUE(at.algorithm == Algorithm::gemm || at.algorithm == Algorithm::direct) << at.name;
    ASSERT_EQ(at.oc_vectors, 1);
    EXPECT_EQ(at.ur_w, 6);
    EXPECT_EQ(below.ur_w, isa == Isa::avx2 ? 12 : 28);
    EXPECT_GT(plan_for(layer(12484).dtype(DType::f16), isa).ur_w, 6);  // 16-bit keeps its block
    // 2x2 stride 2 has one tap per phase too; 3x3 stride 1 has three and keeps its block.
    EXPECT_EQ(plan_for(layer(6242).kernel({2, 2}).stride({2, 2}), isa).ur_w, 6);
    const Plan taps = plan_for(layer(6242).kernel({3, 3}).pads({1, 1}, {1, 1}), isa);
    EXPECT_GT(taps.ur_w, 6) << taps.name;
    // Balanced: a row of 20 output pixels takes blocks of 5, not 6 + 6 + 6 + 2.
    EXPECT_EQ(plan_for(DeconvTester(layer(20)).input({2200, 20}), isa).ur_w, 5);
    TuningHints wide;
    wide.ur_w = 9;
    EXPECT_EQ(plan_for(layer(6242), isa, wide).ur_w, 9);  // the hint decides
  }
  // 19 channels (76 bytes a pixel, holdout s151 ho41) over 70 MB: AVX2's 12 pixels span 912 bytes and stay.
  const DeconvTester ho41 = DeconvTester().batch(16).channels(19, 8).input({277, 207}).kernel({1, 1})
                                .layout(DataFormat::NXC);
  EXPECT_EQ(plan_for(ho41, Isa::avx2).ur_w, 12);
}

}  // namespace
}  // namespace deconvjit::detail
