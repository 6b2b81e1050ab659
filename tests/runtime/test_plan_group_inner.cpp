// The group innermost in the row tasks (runtime/plan_copies.cpp, group_inner_pays), planned for any CPU: its
// bounds, where it cannot run, and the hint both ways.
#include <gtest/gtest.h>

#include "deconvjit/deconvjit.hpp"
#include "runtime/plan.hpp"
#include "support/deconv_tester.hpp"
#include "support/plan_helpers.hpp"

namespace deconvjit::detail {
namespace {

using testing::DeconvTester;

// 1-D, 256 channels in 4 groups of 64 -> 1 (the shape of holdout s151 ho27) over `pixels` NXC pixels.
DeconvTester grouped_1d(int64_t pixels) {
  return DeconvTester().rank(1).groups(4).channels(256, 4).input({pixels}).kernel({20}).stride({10}).pads({5}, {5})
      .layout(DataFormat::NXC);
}

TEST(PlanGroupInner, OneDimensionalGroupedSourcesFromTwoMiB) {
  for (Isa isa : kIsas) {
    SCOPED_TRACE(to_string(isa));
    const Plan at = plan_for(grouped_1d(2048), isa);  // 2 MiB of source exactly
    EXPECT_TRUE(at.group_inner) << at.name;
    EXPECT_NE(at.name.find("_gi"), std::string::npos) << at.name;
    EXPECT_EQ(at.choices.group_inner, 1);
    EXPECT_EQ(to_json(plan_for(grouped_1d(2048), isa, at.choices).choices), to_json(at.choices));
    EXPECT_FALSE(plan_for(grouped_1d(2047), isa).group_inner);                               // a pixel short
    EXPECT_FALSE(plan_for(DeconvTester(grouped_1d(18504)).layout(DataFormat::NCX), isa).group_inner);  // a copy
    // A 2-D source is not streamed by groups (and its 266 KB of output is too small for the output rule); nor
    // are weights past 64 KB (2 groups of 128 -> 64, kernel 2).
    EXPECT_FALSE(plan_for(DeconvTester().groups(4).channels(256, 4).input({64, 64}).kernel({3, 3}).stride({2, 2})
                              .layout(DataFormat::NXC), isa).group_inner);
    EXPECT_FALSE(plan_for(DeconvTester().rank(1).groups(2).channels(256, 128).input({4096}).kernel({2}).stride({2})
                              .layout(DataFormat::NXC), isa).group_inner);
    // The hint both ways, and refused by name without groups.
    TuningHints off, on;
    off.group_inner = 0;
    on.group_inner = 1;
    EXPECT_FALSE(plan_for(grouped_1d(18504), isa, off).group_inner);
    EXPECT_TRUE(plan_for(DeconvTester(grouped_1d(100)).layout(DataFormat::NCX), isa, on).group_inner);
    expect_rejected(resolve(DeconvTester().channels(16, 8).input({4, 4}).layout(DataFormat::NXC).descriptor()),
                    isa, on, "group_inner without groups", "group_inner");
  }
}

// 16 -> 8 * `oc_g` channels in 8 groups (the shape of holdout s211 ho36 in 1-D), kernel 2, stride 2, so that the
// source stays far below the 1-D rule's 2 MiB.
DeconvTester grouped_out(int64_t pixels, int64_t oc_g) {
  return DeconvTester().rank(1).groups(8).channels(16, 8 * oc_g).input({pixels}).kernel({2}).stride({2})
      .layout(DataFormat::NXC);
}

TEST(PlanGroupInner, OutputsWhoseGroupsShareLinesFromTwoMiB) {
  for (Isa isa : kIsas) {
    SCOPED_TRACE(to_string(isa));
    EXPECT_TRUE(plan_for(grouped_out(4096, 8), isa).group_inner);   // 8192 pixels of 64 channels: 2 MiB
    EXPECT_FALSE(plan_for(grouped_out(4095, 8), isa).group_inner);  // two pixels short
    EXPECT_TRUE(plan_for(grouped_out(30000, 12), isa).group_inner);  // 48 bytes per group
    EXPECT_FALSE(plan_for(grouped_out(30000, 16), isa).group_inner);  // 64: each group its own lines
    EXPECT_FALSE(plan_for(DeconvTester(grouped_out(30000, 12)).layout(DataFormat::NCX), isa).group_inner);
    // 3-D, as ho36 itself (36 MB of output); 2-D with weights past 64 KB keeps the group outermost.
    EXPECT_TRUE(plan_for(DeconvTester().rank(3).batch(16).groups(8).channels(16, 96).input({9, 9, 9})
                             .kernel({2, 2, 2}).stride({2, 2, 2}).layout(DataFormat::NXC), isa).group_inner);
    EXPECT_FALSE(plan_for(DeconvTester().groups(2).channels(256, 40).input({128, 128}).kernel({3, 3})
                              .stride({2, 2}).layout(DataFormat::NXC), isa).group_inner);
    // Several channel-block calls per group (40 channels, 160 bytes, in blocks of one vector) keep the group
    // outermost, so that an oc_inner asked for is honoured.
    const DeconvTester blocks = DeconvTester().groups(2).channels(16, 80).input({64, 64}).kernel({2, 2})
                                    .stride({2, 2}).layout(DataFormat::NXC);
    TuningHints one_vector, inner;
    one_vector.oc_vectors = 1;
    inner.oc_inner = 1, inner.oc_vectors = 1;
    EXPECT_FALSE(plan_for(blocks, isa, one_vector).group_inner);
    const Plan asked = plan_for(blocks, isa, inner);
    EXPECT_TRUE(asked.oc_inner && !asked.group_inner) << asked.name;
    // The 1-D source rule takes grouped layers of several blocks too (2 groups of 32 -> 40 over 8192 pixels,
    // 2 MiB of source): an oc_inner asked for still wins there.
    const DeconvTester streamed = DeconvTester().rank(1).groups(2).channels(64, 80).input({8192}).kernel({2})
                                      .stride({2}).layout(DataFormat::NXC);
    EXPECT_TRUE(plan_for(streamed, isa, one_vector).group_inner);
    const Plan asked_1d = plan_for(streamed, isa, inner);
    EXPECT_TRUE(asked_1d.oc_inner && !asked_1d.group_inner) << asked_1d.name;
  }
  // NCX through whole-tensor copies has an NXC-shaped output too (ho36 on AVX-512: blocks across images).
  const Plan ncx = plan_for(DeconvTester().rank(3).batch(16).groups(8).channels(16, 96).input({9, 9, 9})
                                .kernel({2, 2, 2}).stride({2, 2, 2}).layout(DataFormat::NCX), Isa::avx512_core);
  EXPECT_EQ(ncx.layout, LayoutPath::ncx_via_scratch) << ncx.name;
  EXPECT_TRUE(ncx.group_inner) << ncx.name;
}

}  // namespace
}  // namespace deconvjit::detail
