// Row tasks with the group innermost (Plan::group_inner) in the direct, gemm and dot families, NXC and NCX
// through the row buffer, rows cut into parts: checked against the double-precision reference in three types
// on both ISAs (fixture: support/kernel_cases.hpp).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "deconvjit/deconvjit.hpp"
#include "support/deconv_tester.hpp"
#include "support/kernel_cases.hpp"

namespace deconvjit {
namespace {

using testing::DeconvTester;
using testing::KernelCases;

TEST_P(KernelCases, GroupInnerMatchesTheReference) {
  TuningHints inner;
  inner.group_inner = 1;
  TuningHints split = inner;
  split.x_split = 3;
  TuningHints blocks = inner, across = inner, scratch = inner;
  blocks.oc_vectors = 1;
  across.batch_block = 1;
  scratch.layout = "scratch";
  const DeconvTester cases[] = {
      T().rank(1).batch(2).groups(4).channels(64, 4).input({90}).kernel({20}).stride({10}).pads({5}, {5})
          .layout(DataFormat::NXC).hints(split),                                                    // dot
      T().groups(3).channels(12, 18).input({5, 9}).kernel({3, 3}).stride({2, 2}).pads({1, 1}, {1, 1})
          .layout(DataFormat::NXC).hints(inner),                                                    // direct
      T().groups(2).channels(8, 16).input({4, 6}).kernel({2, 2}).stride({2, 2}).layout(DataFormat::NXC)
          .hints(split),                                                                            // gemm
      T().groups(3).channels(12, 18).input({5, 9}).kernel({3, 3}).stride({2, 2}).pads({1, 1}, {1, 1})
          .hints(split),                                                                            // NCX
      T().rank(3).batch(2).groups(2).channels(6, 4).input({3, 4, 5}).kernel({2, 3, 3}).stride({2, 1, 2})
          .layout(DataFormat::NXC).hints(inner),
      T().groups(2).channels(16, 80).input({4, 7}).kernel({3, 3}).stride({2, 2}).layout(DataFormat::NXC)
          .hints(blocks),                                                 // several channel blocks per group
      T().batch(4).groups(2).channels(8, 12).input({3, 3}).kernel({3, 3}).layout(DataFormat::NXC)
          .hints(across),                                                 // blocks across images
      T().groups(2).channels(8, 12).input({4, 6}).kernel({3, 3}).stride({2, 2}).hints(scratch),  // NCX copies
      T().rank(1).batch(2).groups(2).channels(32, 2).input({40}).kernel({4}).stride({2}).hints(inner),  // dot, NCX
  };
  for (const DeconvTester& t : cases) {
    const nlohmann::json plan = plan_of(t);
    EXPECT_TRUE(plan.at("group_inner").get<bool>()) << plan.dump();
    t.Test();
  }
}

// Refused by name where no row task walks the groups (gemm_x, col_x and dot_x on NCX; depthwise, whose
// groups are its channels; bands asked for), and accepted off everywhere; asked for, it turns the band
// default off.
TEST_P(KernelCases, GroupInnerRefusedElsewhere) {
  TuningHints on, off;
  on.group_inner = 1;
  off.group_inner = 0;
  const DeconvTester depthwise = T().groups(16).channels(16, 16).input({5, 6}).kernel({3, 3}).stride({2, 2});
  expect_refused(DeconvTester(depthwise).hints(on), "group_inner", "depthwise");
  DeconvTester(depthwise).hints(off).Test();
  TuningHints col_x = on;
  col_x.algorithm = "col_x";
  expect_refused(T().groups(2).channels(32, 4).input({4, 40}).kernel({4, 4}).stride({2, 2}).pads({1, 1}, {1, 1})
                     .hints(col_x), "group_inner", "col_x");
  TuningHints band = on;
  band.band_rows = 2;
  const DeconvTester rows = T().groups(2).channels(16, 16).input({12, 9}).kernel({3, 3}).stride({2, 2});
  expect_refused(DeconvTester(rows).hints(band), "group_inner", "band_rows");
  const nlohmann::json plan = plan_of(DeconvTester(rows).hints(on));
  EXPECT_EQ(plan.at("band_rows"), 0);
  EXPECT_TRUE(plan.at("group_inner").get<bool>());
}

}  // namespace
}  // namespace deconvjit
