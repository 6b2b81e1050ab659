// The reduction split in passes (TuningHints::ic_block): later passes resume from the partial sums in
// dst, so every output must still match the reference, tails and borders included, whatever the threads.
#include <gtest/gtest.h>

#include <tuple>

#include "support/deconv_tester.hpp"

namespace deconvjit::testing {
namespace {

class IcBlocking : public ::testing::TestWithParam<std::tuple<Isa, DataFormat>> {
 protected:
  DeconvTester base(int ic_block) const {
    TuningHints h;
    h.ic_block = ic_block;
    if (std::get<1>(GetParam()) == DataFormat::NCX) h.layout = "scratch";
    return DeconvTester().isa(std::get<0>(GetParam())).layout(std::get<1>(GetParam())).hints(h);
  }
};

TEST_P(IcBlocking, DirectWithBordersAndChannelTail) {
  base(8).channels(32, 37).input({5, 7}).kernel({4, 4}).stride({2, 2}).pads({1, 1}, {1, 1}).Test();
}

TEST_P(IcBlocking, OneChannelPerPass) {
  base(1).channels(3, 20).input({4, 3}).kernel({3, 3}).stride({2, 2}).output_padding({1, 1}).Test();
}

TEST_P(IcBlocking, GemmRouteWithBatch) {
  base(16).batch(5).channels(48, 16).input({3, 3}).kernel({2, 2}).stride({2, 2}).Test();
}

TEST_P(IcBlocking, GroupsAnd3D) {
  base(4).rank(3).groups(2).channels(16, 14).input({3, 3, 4}).kernel({2, 3, 2}).stride({2, 1, 2}).Test();
}

TEST_P(IcBlocking, ExactOnOneAndOnThreeThreads) {
  base(16).channels(64, 40).input({9, 11}).kernel({3, 3}).stride({2, 2}).threads(1).Test();
  base(16).channels(64, 40).input({9, 11}).kernel({3, 3}).stride({2, 2}).threads(3).Test();
}

TEST(IcBlockingHints, RejectedWhereTheySplitNothingValid) {
  Descriptor d = DeconvTester().channels(12, 8).input({4, 4}).kernel({3, 3}).stride({2, 2}).descriptor();
  Options o;
  o.use_cache = false;
  o.hints.ic_block = 5;  // does not divide 12
  try {
    compile(d, o);
    FAIL() << "ic_block 5 with 12 input channels was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("ic_block"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, IcBlocking,
                         ::testing::Combine(::testing::Values(Isa::avx512_core, Isa::avx2),
                                            ::testing::Values(DataFormat::NXC, DataFormat::NCX)));

}  // namespace
}  // namespace deconvjit::testing
