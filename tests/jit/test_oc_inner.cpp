// Row tasks with the channel block innermost (Plan::oc_inner) in the direct and gemm families: NXC, NCX
// through the row buffer and through whole-tensor copies, rows cut into parts, groups, blocks across images,
// a split reduction, gemm's clipped blocks: checked against the double-precision reference in three types on
// both ISAs (fixture: support/kernel_cases.hpp).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "deconvjit/deconvjit.hpp"
#include "support/deconv_tester.hpp"
#include "support/kernel_cases.hpp"

namespace deconvjit {
namespace {

using testing::DeconvTester;
using testing::KernelCases;

TEST_P(KernelCases, OcInnerMatchesTheReference) {
  TuningHints inner;
  inner.oc_inner = 1, inner.oc_vectors = 1;
  TuningHints split = inner, across = inner, scratch = inner, gemm = inner, passes = inner;
  split.x_split = 3;
  across.batch_block = 1;
  scratch.layout = "scratch";
  gemm.algorithm = "gemm";
  passes.ic_block = 8;
  const DeconvTester cases[] = {
      T().channels(12, 40).input({5, 9}).kernel({3, 3}).stride({2, 2}).pads({1, 1}, {1, 1})
          .layout(DataFormat::NXC).hints(inner),                                                      // direct
      T().channels(16, 24).input({4, 6}).kernel({2, 2}).stride({2, 2}).layout(DataFormat::NXC).hints(split),  // gemm
      T().rank(1).batch(2).channels(24, 12).input({30}).kernel({16}).stride({8}).pads({4}, {4})
          .layout(DataFormat::NXC).hints(gemm),                                               // clipped gemm
      T().channels(12, 40).input({5, 9}).kernel({3, 3}).stride({2, 2}).pads({1, 1}, {1, 1}).hints(split),  // NCX
      T().groups(2).channels(16, 80).input({4, 7}).kernel({3, 3}).stride({2, 2}).layout(DataFormat::NXC)
          .hints(inner),                                                                       // groups
      T().batch(4).channels(8, 40).input({3, 3}).kernel({3, 3}).layout(DataFormat::NXC).hints(across),
      T().channels(8, 40).input({4, 6}).kernel({3, 3}).stride({2, 2}).hints(scratch),           // NCX copies
      T().rank(3).channels(8, 36).input({3, 4, 5}).kernel({2, 3, 3}).stride({2, 1, 2}).layout(DataFormat::NXC)
          .hints(inner),
  };
  for (const DeconvTester& t : cases) {
    const nlohmann::json plan = plan_of(t);
    EXPECT_TRUE(plan.at("oc_inner").get<bool>()) << plan.dump();
    t.Test();
  }
  // NCX through the row buffer: the buffer holds whole pixels, every block of the task's group, flushed once.
  TuningHints bands = inner, images = inner;
  bands.band_rows = 2;
  images.batch_block = 1, images.layout = "row_buffer";
  const DeconvTester buffered[] = {
      T().channels(12, 40).input({5, 9}).kernel({3, 3}).stride({2, 2}).pads({1, 1}, {1, 1}).hints(inner),
      T().groups(2).channels(16, 42).input({4, 7}).kernel({3, 3}).stride({2, 2}).hints(inner),  // a tail each
      T().batch(2).channels(8, 40).input({6, 7}).kernel({3, 3}).stride({2, 2}).hints(bands),
      T().batch(3).channels(8, 40).input({3, 3}).kernel({3, 3}).hints(images),
      T().rank(1).channels(8, 36).input({50}).kernel({4}).stride({2}).hints(split),
  };
  for (const DeconvTester& t : buffered) {
    const nlohmann::json plan = plan_of(t);
    ASSERT_EQ(plan.at("layout"), "ncx_row_buffer") << plan.dump();
    EXPECT_TRUE(plan.at("oc_inner").get<bool>()) << plan.dump();
    // whole pixels of the group's channels, for each image of a block across images
    const int64_t group = t.descriptor().weights[1], images = plan.at("block_over_batch").get<bool>() ? 3 : 1;
    const int64_t out = plan.at("axes").at(2).at("out").get<int64_t>(), split = plan.at("x_split").get<int64_t>();
    const int64_t width = (out + split - 1) / split;
    EXPECT_EQ(plan.at("row_buffer_floats").get<int64_t>(), width * group * images) << plan.dump();
    t.Test();
  }
  if (dtype() == DType::f32) {  // a split reduction (f32 only): each pass of a task resumes its own block
    const DeconvTester t = T().channels(16, 40).input({5, 6}).kernel({3, 3}).stride({2, 2})
                               .layout(DataFormat::NXC).hints(passes);
    EXPECT_TRUE(plan_of(t).at("oc_inner").get<bool>());
    t.Test();
  }
}

// Refused by name where no row task walks channel blocks (one block, the depthwise family, the group
// innermost), and accepted off everywhere.
TEST_P(KernelCases, OcInnerRefusedElsewhere) {
  TuningHints on, off;
  on.oc_inner = 1;
  off.oc_inner = 0;
  const DeconvTester one_block = T().channels(16, 8).input({5, 6}).kernel({3, 3}).stride({2, 2})
                                     .layout(DataFormat::NXC);
  expect_refused(DeconvTester(one_block).hints(on), "oc_inner", "one channel block");
  DeconvTester(one_block).hints(off).Test();
  const DeconvTester depthwise = T().groups(64).channels(64, 64).input({5, 6}).kernel({3, 3}).stride({2, 2})
                                     .layout(DataFormat::NXC);
  expect_refused(DeconvTester(depthwise).hints(on), "oc_inner", "depthwise");
  TuningHints both = on;
  both.group_inner = 1, both.oc_vectors = 1;
  expect_refused(T().groups(2).channels(16, 80).input({4, 7}).kernel({3, 3}).layout(DataFormat::NXC).hints(both),
                 "oc_inner", "group_inner");
  // NCX through the row buffer in bands by default: asked for, it keeps them (a band task runs each row
  // part's blocks into one buffer of whole pixels), and bands asked for too.
  TuningHints narrow;
  narrow.oc_vectors = 1;
  const DeconvTester banded = T().channels(16, 48).input({96, 9}).kernel({3, 3}).stride({2, 2});
  ASSERT_GT(plan_of(DeconvTester(banded).hints(narrow)).at("band_rows").get<int>(), 0);
  TuningHints asked = narrow;
  asked.oc_inner = 1;
  const nlohmann::json plan = plan_of(DeconvTester(banded).hints(asked));
  EXPECT_GT(plan.at("band_rows").get<int>(), 0);
  EXPECT_TRUE(plan.at("oc_inner").get<bool>());
  asked.band_rows = 2;
  EXPECT_EQ(plan_of(DeconvTester(banded).hints(asked)).at("band_rows"), 2);
}

}  // namespace
}  // namespace deconvjit
