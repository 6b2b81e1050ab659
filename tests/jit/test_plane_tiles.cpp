// The plane-tile route for depthwise layers on NCX data (LayoutPath::ncx_plane_tiles): each task transposes
// a tile of whole channel planes into NXC, runs the depthwise kernel over it and transposes the result into
// the caller's planes. Checked against the double-precision reference in three types on both ISAs
// (fixture: support/kernel_cases.hpp), and the hint's refusals.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "deconvjit/deconvjit.hpp"
#include "support/deconv_tester.hpp"
#include "support/kernel_cases.hpp"

namespace deconvjit {
namespace {

using testing::DeconvTester;
using testing::KernelCases;

TuningHints tiles(int channels_per_call = 0, int oc_vectors = 0) {
  TuningHints h;
  h.layout = "plane_tiles";
  h.channels_per_call = channels_per_call;
  h.oc_vectors = oc_vectors;
  return h;
}

// Planes with ragged tile edges (7x7 in, 14x14 out: neither a multiple of 8 or 16 pixels), several tiles
// per image and images per call, one tile holding every channel, blocks of one vector walked by the
// kernel's channel loop, strides with taps missing at the borders, 1-D and 3-D, batch > 1.
TEST_P(KernelCases, PlaneTilesMatchTheReference) {
  const int lanes = isa() == Isa::avx512_core ? 16 : 8;
  const DeconvTester mobile = T().groups(4 * lanes).channels(4 * lanes, 4 * lanes).batch(2).input({7, 7})
                                  .kernel({3, 3}).stride({2, 2}).pads({1, 1}, {1, 1}).output_padding({1, 1});
  struct Case {
    DeconvTester t;
    TuningHints h;
  } cases[] = {
      {mobile, tiles()},
      {mobile, tiles(lanes, 1)},          // a tile per vector of channels
      {mobile, tiles(2 * lanes, 1)},      // the kernel walks two blocks of one vector
      {mobile, tiles(4 * lanes, 2)},      // one tile holds every channel
      {mobile, [&] {                      // four blocks of one vector, a call each (oc_loop 1)
         TuningHints h = tiles(4 * lanes, 1);
         h.oc_loop = 1;
         return h;
       }()},
      {T().groups(2 * lanes).channels(2 * lanes, 2 * lanes).input({5, 9}).kernel({4, 4}).stride({2, 2})
           .pads({1, 1}, {1, 1}), tiles()},
      {T().groups(lanes).channels(lanes, lanes).batch(3).input({13}).kernel({5}).stride({3}).pads({2}, {1}),
       tiles()},
      {T().groups(lanes).channels(lanes, lanes).input({3, 4, 5}).kernel({2, 3, 3}).stride({1, 2, 2})
           .pads({0, 1, 1}, {0, 1, 1}), tiles()},
  };
  for (const Case& c : cases) {
    const DeconvTester t = DeconvTester(c.t).hints(c.h);
    const nlohmann::json plan = plan_of(t);
    EXPECT_EQ(plan["layout"], "ncx_plane_tiles") << plan.dump();
    if (c.h.channels_per_call) EXPECT_EQ(plan["channels_per_call"], c.h.channels_per_call);
    t.Test();
  }
}

// The hint is refused by name where the route cannot run: NXC data, channels not a multiple of the lanes,
// more than one channel per group, a channels_per_call that is not whole blocks dividing the channels.
TEST_P(KernelCases, PlaneTilesRefusedElsewhere) {
  const int lanes = isa() == Isa::avx512_core ? 16 : 8;
  const DeconvTester dw = T().groups(2 * lanes).channels(2 * lanes, 2 * lanes).input({6, 6}).kernel({3, 3})
                              .stride({2, 2});
  expect_refused(DeconvTester(dw).layout(DataFormat::NXC).hints(tiles()), "NCX", "NXC data");
  expect_refused(T().groups(12).channels(12, 12).input({6, 6}).kernel({3, 3}).stride({2, 2}).hints(tiles()),
                 "plane_tiles", "12 channels");
  expect_refused(T().groups(lanes).channels(2 * lanes, 2 * lanes).input({6, 6}).kernel({3, 3}).hints(tiles()),
                 "plane_tiles", "two channels per group");
  expect_refused(DeconvTester(dw).hints(tiles(lanes / 2, 1)), "channels_per_call", "half a vector");
  expect_refused(DeconvTester(dw).hints(tiles(3 * lanes, 1)), "channels_per_call", "not dividing");
}

}  // namespace
}  // namespace deconvjit
