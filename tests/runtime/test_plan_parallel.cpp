// Which problems fork onto oneTBB's threads by default (choose_parallel in runtime/plan.cpp).
#include <gtest/gtest.h>

#include "deconvjit/deconvjit.hpp"
#include "runtime/plan.hpp"
#include "support/deconv_tester.hpp"
#include "support/plan_helpers.hpp"

namespace deconvjit::detail {
namespace {

using testing::DeconvTester;

bool parallel(const DeconvTester& t) { return plan_for(t, Isa::avx512_core).parallel; }

TEST(PlanParallel, SmallLayersForkFromSixteenThousandElements) {
  // One channel, 4x4 stride 2 over 128x128 (lapsrn_img_l1): 0.5 MFLOP but 82K elements, 110 us serial.
  const auto one_channel = DeconvTester().channels(1, 1).input({128, 128}).kernel({4, 4}).stride({2, 2}).pads({1, 1}, {1, 1});
  EXPECT_TRUE(parallel(one_channel));
  EXPECT_TRUE(parallel(DeconvTester(one_channel).dtype(DType::bf16)));  // elements, not bytes
  // 80 -> 16 channels over 7x3 (holdout s71 ho37): 0.2 MFLOP, 8K elements, 2-3 us: the fork lost.
  EXPECT_FALSE(parallel(DeconvTester().channels(80, 16).input({7, 3}).kernel({2, 2}).stride({2, 2}).pads({0, 0}, {0, 0})));
  // 2 MFLOP whatever the elements (8 -> 8 channels, 9x9 over 16x16: 2.7 MFLOP, 12K elements); and the hint
  // decides both ways.
  EXPECT_TRUE(parallel(DeconvTester().channels(8, 8).input({16, 16}).kernel({9, 9}).pads({0, 0}, {0, 0})));
  TuningHints serial;
  serial.parallel = 0;
  EXPECT_FALSE(plan_for(one_channel, Isa::avx512_core, serial).parallel);
}

}  // namespace
}  // namespace deconvjit::detail
