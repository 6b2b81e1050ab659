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
  };
  for (const DeconvTester& t : cases) {
    const nlohmann::json plan = plan_of(t);
    EXPECT_TRUE(plan.at("group_inner").get<bool>()) << plan.dump();
    t.Test();
  }
}

}  // namespace
}  // namespace deconvjit
