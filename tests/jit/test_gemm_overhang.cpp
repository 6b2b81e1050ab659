// gemm with x pads_begin or an output size off the stride (Plan::fold_shift, fold_tail): folded pixel 0
// starts before the row and the last one ends past it. The plan's folded geometry, the schedule's clipped
// blocks (exactly the blocks holding those pixels, one block each), the default rule, and the kernels in
// every type on both ISAs against the double-precision reference, with NaN sentinels before and after dst
// catching a lane stored outside the row.
#include <gtest/gtest.h>

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

TuningHints gemm_hints() {
  TuningHints h;
  h.algorithm = "gemm";
  return h;
}

// 4x4, stride 2, pads 1 (DCGAN, pix2pix): 2 x in outputs per row, folded pixel 0 holds output -1 and 0, the
// last (in + 1) outputs 2 in - 1 and 2 in.
TEST(GemmOverhang, FoldedGeometry) {
  const DeconvTester t = DeconvTester().channels(16, 12).input({5, 7}).kernel({4, 4}).stride({2, 2})
                             .pads({1, 1}, {1, 1}).layout(DataFormat::NXC);
  for (Isa isa : kIsas) {
    const Plan pl = plan_for(t, isa, gemm_hints());
    ASSERT_EQ(pl.algorithm, Algorithm::gemm);
    EXPECT_EQ(pl.fold_stride, 2);
    EXPECT_EQ(pl.fold_shift, 1);
    EXPECT_EQ(pl.fold_tail, 1);
    EXPECT_EQ(pl.axes[2].out, 8);
    EXPECT_EQ(pl.axes[2].pad_begin, 0);
    EXPECT_EQ(pl.axes[2].kernel, 2);
    EXPECT_EQ(pl.dst_row_elements(), 14 * 12);
    EXPECT_EQ(pl.dst_row_offset(), -12);
    EXPECT_EQ(pl.dst_n, 10 * 14 * 12);
  }
  // pads_begin 3 = 1 x 2 + 1: one folded pad and a shift of 1; 15 outputs then end with a whole folded pixel.
  const Plan shifted = plan_for(DeconvTester().rank(1).channels(8, 12).input({9}).kernel({4}).stride({2}).pads({3}, {2})
                                    .layout(DataFormat::NXC), Isa::avx2, gemm_hints());
  EXPECT_EQ(shifted.axes[2].out, 8);
  EXPECT_EQ(shifted.axes[2].pad_begin, 1);
  EXPECT_EQ(shifted.fold_shift, 1);
  EXPECT_EQ(shifted.fold_tail, 0);
  // Aligned: neither.
  const Plan aligned = plan_for(DeconvTester().channels(16, 12).input({5, 7}).kernel({4, 4}).stride({2, 2})
                                    .pads({2, 2}, {2, 2}).layout(DataFormat::NXC), Isa::avx2, gemm_hints());
  EXPECT_EQ(aligned.fold_shift + aligned.fold_tail, 0);
}

// Every output x of a row once; clipped segments are single blocks holding folded pixel 0 or the last one,
// and no other block holds them.
void expect_clipped_blocks(const Plan& pl) {
  const int64_t last = pl.axes[2].out - 1;
  const Schedule s = build_schedule(pl);
  int clipped = 0;
  for (const RowPart& part : s.parts) {
    std::vector<int> seen(static_cast<size_t>(pl.axes[2].out), 0);
    for (const Segment& g : part.segments)
      for (int64_t b = 0; b < g.nblocks; ++b) {
        const int64_t o0 = g.o_first + b * g.width;
        for (int64_t i = 0; i < g.width; ++i) ++seen[static_cast<size_t>(o0 + i)];
        const bool overhangs = (pl.fold_shift && o0 == 0) || (pl.fold_tail && o0 <= last && last < o0 + g.width);
        EXPECT_EQ(g.clipped, overhangs) << "block at " << o0;
        if (g.clipped) EXPECT_EQ(g.nblocks, 1);
        clipped += g.clipped;
      }
    for (int64_t o = part.x0; o < part.x1; ++o) EXPECT_EQ(seen[static_cast<size_t>(o)], 1) << o;
  }
  EXPECT_GE(clipped, 1);
}

TEST(GemmOverhang, ScheduleClipsExactlyTheOverhangingBlocks) {
  for (int64_t in : {1, 3, 37}) {
    for (int x_split : {1, 3}) {
      TuningHints h = gemm_hints();
      h.x_split = x_split;
      expect_clipped_blocks(plan_for(DeconvTester().rank(1).channels(16, 12).input({in}).kernel({16}).stride({8})
                                         .pads({4}, {4}).layout(DataFormat::NXC), Isa::avx2, h));
    }
  }
}

// The default: gemm where its folded channels fill lanes a third better than C_OUT (12 channels on AVX2,
// 8 lanes: 75% -> 100%) over 32+ input channels; the direct family where they already fill (32), on a
// shorter reduction, or where batch blocking pays.
TEST(GemmOverhang, DefaultWhereFoldingFillsLanes) {
  auto layer = [](int64_t c_out, int64_t batch, std::vector<int64_t> in, int64_t c_in = 64) {
    return DeconvTester().batch(batch).channels(c_in, c_out).input(in).kernel({4, 4}).stride({2, 2})
        .pads({1, 1}, {1, 1}).layout(DataFormat::NXC);
  };
  EXPECT_EQ(plan_for(layer(12, 1, {20, 20}, 32), Isa::avx2).algorithm, Algorithm::gemm);
  EXPECT_EQ(plan_for(layer(12, 1, {20, 20}, 31), Isa::avx2).algorithm, Algorithm::direct);
  EXPECT_EQ(plan_for(layer(12, 1, {20, 20}), Isa::avx2).algorithm, Algorithm::gemm);
  EXPECT_EQ(plan_for(layer(24, 1, {20, 20}), Isa::avx512_core).algorithm, Algorithm::gemm);
  EXPECT_EQ(plan_for(layer(32, 1, {20, 20}), Isa::avx2).algorithm, Algorithm::direct);
  EXPECT_EQ(plan_for(layer(32, 1, {20, 20}), Isa::avx512_core).algorithm, Algorithm::direct);
  EXPECT_EQ(plan_for(layer(12, 8, {4, 4}), Isa::avx2).algorithm, Algorithm::direct);  // blocks over images
  TuningHints nblk = gemm_hints();
  nblk.batch_block = 1;
  expect_rejected(resolve(layer(12, 8, {4, 4}).descriptor()), Isa::avx2, nblk, "batch_block with a clipped gemm",
                  "batch_block");
  // A batch_block hint alone keeps the direct family, which honours it, where the default would fold.
  TuningHints images;
  images.batch_block = 1;
  EXPECT_EQ(plan_for(layer(12, 2, {20, 20}), Isa::avx2).algorithm, Algorithm::gemm);
  const Plan blocked = plan_for(layer(12, 2, {20, 20}), Isa::avx2, images);
  EXPECT_EQ(blocked.algorithm, Algorithm::direct);
  EXPECT_TRUE(blocked.block_over_batch);
}

// Non-temporal stores into dst need rows and their first folded pixel whole lines apart: 32 channels
// shifted by 2 outputs start 256 bytes early, 36 channels 288.
TEST(GemmOverhang, NtStoresNeedRowsOfWholeLines) {
  auto layer = [](int64_t c_out) {
    return DeconvTester().rank(1).channels(64, c_out).input({50}).kernel({8}).stride({4}).pads({2}, {2})
        .layout(DataFormat::NXC);
  };
  TuningHints nt = gemm_hints();
  nt.nt_stores = 1;
  EXPECT_TRUE(plan_for(layer(32), Isa::avx512_core, nt).nt_stores);
  expect_rejected(resolve(layer(36).descriptor()), Isa::avx512_core, nt, "nt_stores on rows off the lines",
                  "nt_stores");
}

class GemmOverhangKernels : public testing::IsaTypeCases {
 protected:
  // Runs `t` as gemm (with `h`) after checking that its folded pixels overhang the row.
  void run(DeconvTester t, TuningHints h = {}) const {
    h.algorithm = "gemm";
    t.isa(isa()).dtype(type()).hints(h).dst_tail(5);
    const Plan pl = plan_for(t, isa(), h);
    ASSERT_TRUE(pl.overhangs_row());
    t.Test();
  }
  testing::NoDiskCache no_disk_cache_;
};

// A shift and a tail; a shift only and a tail only; negative pads; a row of one folded pixel overhanging
// both ways, and of two in one block; channel tails and several channel blocks (the clipped lanes cut across
// them); a row cut into parts; the source with the x halo and edge blocks; 3-D; NCX through whole-tensor
// copies; the reduction in two passes (f32), whose second pass reads the first's sums back from dst;
// non-temporal stores (AVX-512 f32: the scratch block takes plain ones); a 16-bit source widened first.
TEST_P(GemmOverhangKernels, MatchReference) {
  const auto nxc = DataFormat::NXC;
  run(DeconvTester().channels(16, 12).input({5, 7}).kernel({4, 4}).stride({2, 2}).pads({1, 1}, {1, 1}).layout(nxc));
  run(DeconvTester().rank(1).batch(2).channels(24, 12).input({37}).kernel({16}).stride({8}).pads({4}, {4})
          .output_padding({3}).layout(nxc));
  run(DeconvTester().rank(1).channels(8, 5).input({9}).kernel({8}).stride({4}).pads({2}, {1}).layout(nxc));
  run(DeconvTester().rank(1).channels(8, 20).input({9}).kernel({8}).stride({4}).pads({4}, {2}).output_padding({1})
          .layout(nxc));
  run(DeconvTester().rank(1).channels(8, 12).input({9}).kernel({4}).stride({2}).pads({3}, {2}).layout(nxc));
  run(DeconvTester().rank(1).batch(3).channels(8, 12).input({1}).kernel({4}).stride({4}).pads({1}, {2}).layout(nxc));
  run(DeconvTester().rank(1).channels(8, 12).input({6}).kernel({4}).stride({2}).pads({-1}, {-1}).layout(nxc));
  run(DeconvTester().channels(8, 3).input({4, 1}).kernel({2, 4}).stride({1, 2}).pads({0, 1}, {0, 1}).layout(nxc));
  TuningHints wide;
  wide.ur_w = 4;
  run(DeconvTester().channels(8, 12).input({3, 1}).kernel({4, 4}).stride({2, 2}).pads({1, 0}, {1, 1}).layout(nxc),
      wide);
  TuningHints blocks;
  blocks.oc_vectors = 1;
  run(DeconvTester().channels(16, 40).input({3, 6}).kernel({4, 4}).stride({2, 2}).pads({1, 1}, {1, 1}).layout(nxc),
      blocks);
  run(DeconvTester().rank(1).channels(8, 19).input({11}).kernel({8}).stride({4}).pads({2}, {2}).layout(nxc), blocks);
  TuningHints parts;
  parts.x_split = 3;
  run(DeconvTester().rank(1).batch(2).channels(16, 12).input({40}).kernel({16}).stride({8}).pads({4}, {4})
          .layout(nxc), parts);
  TuningHints halo;
  halo.x_halo = 1;
  run(DeconvTester().channels(16, 12).input({4, 5}).kernel({4, 4}).stride({2, 2}).pads({1, 1}, {1, 1}).layout(nxc),
      halo);
  run(DeconvTester().rank(3).channels(8, 12).input({2, 3, 4}).kernel({4, 4, 4}).stride({2, 2, 2})
          .pads({1, 1, 1}, {1, 1, 1}).layout(nxc));
  TuningHints scratch;
  scratch.layout = "scratch";
  run(DeconvTester().channels(16, 12).input({5, 7}).kernel({4, 4}).stride({2, 2}).pads({1, 1}, {1, 1})
          .layout(DataFormat::NCX), scratch);
  if (isa() == Isa::avx512_core && type() == DType::f32) {
    TuningHints nt;
    nt.nt_stores = 1;
    run(DeconvTester().rank(1).channels(16, 16).input({21}).kernel({4}).stride({2}).pads({1}, {1}).layout(nxc), nt);
  }
  if (type() != DType::f32) {
    TuningHints widened;
    widened.widen_src = 1, widened.ic_pairs = 0;
    run(DeconvTester().channels(16, 12).input({5, 7}).kernel({4, 4}).stride({2, 2}).pads({1, 1}, {1, 1})
            .layout(nxc), widened);
  }
  if (type() == DType::f32) {
    TuningHints split;
    split.ic_block = 8;
    run(DeconvTester().channels(16, 12).input({5, 7}).kernel({4, 4}).stride({2, 2}).pads({1, 1}, {1, 1})
            .layout(nxc), split);
    split.oc_vectors = 1;
    run(DeconvTester().rank(1).channels(24, 20).input({9}).kernel({8}).stride({4}).pads({2}, {2}).layout(nxc), split);
  }
}

// 1-D layers of 1-4 output channels with 2+ taps per phase run as gemm by default (16-bit data: up to 128
// input channels; plan_route.cpp, folded_row_beats_dot): the default kernels against the reference.
TEST_P(GemmOverhangKernels, FewOutputs1DByDefault) {
  for (int64_t c_out : {1, 2, 3, 4}) {
    DeconvTester t = DeconvTester().rank(1).batch(2).channels(48, c_out).input({37}).kernel({16}).stride({8})
                         .pads({4}, {4}).layout(DataFormat::NXC).isa(isa()).dtype(type()).dst_tail(3);
    const Plan pl = plan_for(t, isa());
    EXPECT_EQ(pl.algorithm, Algorithm::gemm) << pl.name;
    t.Test();
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, GemmOverhangKernels, testing::isa_type_values(), testing::isa_type_name);

}  // namespace
}  // namespace deconvjit::detail
