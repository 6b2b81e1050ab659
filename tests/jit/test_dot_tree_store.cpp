// The dot family's store on AVX-512 in f32: with 3 or more accumulators in a block, each 16 of them are
// summed across their lanes together (halving steps over pairs of registers) instead of one by one. The
// steps add the same lanes in the same order as the horizontal sum of a lone accumulator, so a block of
// 1-2 accumulators (horizontal sums) and a wider one (the tree) must give the same bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "deconvjit/deconvjit.hpp"
#include "runtime/tolerance.hpp"
#include "support/deconv_tester.hpp"
#include "support/no_disk_cache.hpp"

namespace deconvjit {
namespace {

using testing::DeconvTester;

std::vector<float> run(const DeconvTester& t, const verify::Operands& ops) {
  const Kernel k = compile(t.descriptor(), t.options());
  EXPECT_NE(k.name().find("_dot_"), std::string::npos) << k.name();
  std::vector<float> dst(static_cast<size_t>(resolve(t.descriptor()).dst_elements()), std::nanf(""));
  k.execute(ConstBuffer(ops.src), k.pack_weights(ConstBuffer(ops.weights)), Buffer(dst));
  return dst;
}

TuningHints dot(int ur_w) {
  TuningHints h;
  h.algorithm = "dot", h.ur_w = ur_w, h.fuse_x_taps = 0;
  return h;
}

TEST(DotTreeStore, SameBitsAsHorizontalSums) {
  if (!isa_available(Isa::avx512_core)) GTEST_SKIP() << "AVX-512 is not available (the tree is AVX-512 code)";
  testing::NoDiskCache no_disk_cache;
  // 1 and 2 output channels: blocks of 1-2 accumulators sum each horizontally; blocks of 3-28 accumulators
  // take the tree (2 x 14: a group of 16 and a partial one).
  for (int64_t oc : {1, 2}) {
    const DeconvTester base = DeconvTester().channels(40, oc).input({9, 23}).kernel({4, 4}).stride({2, 2})
                                  .pads({1, 1}, {1, 1}).layout(DataFormat::NXC).isa(Isa::avx512_core);
    const verify::Operands ops = verify::random_operands(resolve(base.descriptor()), 5);
    const std::vector<float> lone = run(DeconvTester(base).hints(dot(oc == 1 ? 2 : 1)), ops);
    for (int ur : {3, 9, 14}) {
      const std::vector<float> tree = run(DeconvTester(base).hints(dot(ur)), ops);
      ASSERT_EQ(lone.size(), tree.size());
      EXPECT_EQ(std::memcmp(lone.data(), tree.data(), lone.size() * sizeof(float)), 0)
          << oc << " output channels, ur_w " << ur;
    }
  }
}

// Three output channels over 9 pixels (27 accumulators: a group of 16 and one of 11), NXC and NCX, against
// the reference.
TEST(DotTreeStore, MatchesReferenceWithPartialGroups) {
  if (!isa_available(Isa::avx512_core)) GTEST_SKIP() << "AVX-512 is not available (the tree is AVX-512 code)";
  testing::NoDiskCache no_disk_cache;
  for (DataFormat f : {DataFormat::NXC, DataFormat::NCX}) {
    TuningHints h = dot(9);
    if (f == DataFormat::NCX) h.layout = "src_copy";
    DeconvTester().batch(2).channels(40, 3).input({11, 30}).kernel({8, 8}).stride({4, 4}).pads({2, 2}, {2, 2})
        .layout(f).isa(Isa::avx512_core).hints(h).Test();
  }
}

}  // namespace
}  // namespace deconvjit
