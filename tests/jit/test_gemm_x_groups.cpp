// The gemm_x family (NCX, K == s, no pads) on grouped layers, and the rule that takes it where its lanes
// along x are fuller than the row families' lanes along output channels. Each case must match the
// double-precision reference in f32, bf16 (channel pairs where the CPU has avx512_bf16) and f16, on
// AVX-512 and AVX2 (where the rule does not take it yet: there every case asks for it).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "deconvjit/deconvjit.hpp"
#include "runtime/plan.hpp"
#include "support/deconv_tester.hpp"
#include "support/family_cases.hpp"
#include "support/no_disk_cache.hpp"

namespace deconvjit {
namespace {

using testing::DeconvTester;
using V = std::vector<int64_t>;

detail::Plan plan_of(const DeconvTester& t, const TuningHints& h = {}) {
  return detail::make_plan(resolve(t.descriptor()), Isa::avx512_core, h);
}

class GemmXGroups : public ::testing::TestWithParam<std::tuple<DType, Isa>> {
 protected:
  void SetUp() override {
    if (!isa_available(isa())) GTEST_SKIP() << to_string(isa()) << " is not available";
    if (auto why = testing::unsupported_types(isa(), dtype())) GTEST_SKIP() << "compile: " << *why;
  }
  DType dtype() const { return std::get<0>(GetParam()); }
  Isa isa() const { return std::get<1>(GetParam()); }
  bool z() const { return isa() == Isa::avx512_core; }
  DeconvTester T(int rank, int64_t groups, int64_t c_in, int64_t c_out, V in) const {
    const V k(static_cast<size_t>(rank), 2);
    return DeconvTester().isa(isa()).dtype(dtype()).layout(DataFormat::NCX).rank(rank)
        .groups(groups).channels(c_in, c_out).input(std::move(in)).kernel(k).stride(k);
  }
  std::function<detail::Plan(const DeconvTester&, const TuningHints&)> planner() const {
    return [isa = isa()](const DeconvTester& t, const TuningHints& h) {
      return detail::make_plan(resolve(t.descriptor()), isa, h);
    };
  }
  testing::NoDiskCache no_disk_cache_;
};

// Each group's source planes, weights and output planes lie a group further on: a wrong offset of any of
// them sums another group's channels. Shapes: one output channel per group in 3D (the dot family's shape,
// rows of two vectors), 8 per group over rows of 40 pixels, a 1x1 kernel with stacked 13-pixel rows and a
// channel tail, a flat plane of 7-pixel rows with the source packed into tiles, an odd channel count per
// group (a half bf16 pair), and batches. The first three are the default; the rest are asked for.
TEST_P(GemmXGroups, MatchReference) {
  TuningHints gx;
  gx.algorithm = "gemm_x";
  TuningHints packed = gx;
  packed.pack_src = 1;
  const TuningHints by_default = z() ? TuningHints{} : gx;
  const std::vector<testing::FamilyCase> cases = {
      {T(3, 2, 160, 2, {3, 4, 27}).batch(2), by_default, z()},
      {T(2, 4, 64, 32, {5, 40}), by_default, z()},
      {T(2, 2, 64, 26, {7, 13}).kernel({1, 1}).stride({1, 1}), by_default, z()},
      {T(2, 8, 64, 16, {6, 7}).batch(2), packed, false},
      {T(2, 2, 18, 10, {3, 20}), gx, false},
      {T(1, 3, 24, 6, {50}).batch(3), gx, false},
  };
  testing::expect_family_cases(cases, detail::Algorithm::gemm_x, planner());
}

// Rows of more than 64 vectors run in x chunks (at most 64 vectors, balanced, and within a quarter of L2
// for their source): each chunk's source and output start x_chunk pixels further on, and the row's last
// chunk is a function of its own. 1-D stride 2 over two and three chunks (groups, a ragged last vector),
// 2-D, and stride 1 on x; the first is the default for its shape.
TEST_P(GemmXGroups, LongRowsRunInChunks) {
  TuningHints gx;
  gx.algorithm = "gemm_x";
  TuningHints tail = gx;
  tail.oc_vectors = 4;
  const std::vector<DeconvTester> cases = {
      T(1, 1, 12, 40, {1187}).batch(2).hints(z() ? TuningHints{} : gx),
      T(1, 2, 32, 8, {2100}).hints(gx),
      T(2, 1, 24, 6, {3, 1500}).hints(gx),
      T(1, 1, 8, 5, {2100}).kernel({1}).stride({1}).hints(gx),
      T(1, 1, 13, 10, {1100}).hints(tail),  // a channel tail kind; 13 channels: half a bf16 pair
      T(1, 1, 8, 4, {2048}).hints(gx),      // chunks of exactly 64 vectors: the last one is full too
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    DeconvTester t = cases[i];
    t.Test();
    const detail::Plan pl = planner()(t, i == 0 && z() ? TuningHints{} : i == 4 ? tail : gx);
    EXPECT_EQ(pl.algorithm, detail::Algorithm::gemm_x) << pl.name;
    EXPECT_GT(pl.x_chunk, 0) << pl.name;
    EXPECT_LE(pl.x_chunk, 64 * pl.lanes);
    EXPECT_GE(detail::x_chunks(pl), 2);
    EXPECT_EQ(pl.x_chunk % pl.lanes, 0);
  }
}

std::string case_name(const ::testing::TestParamInfo<std::tuple<DType, Isa>>& info) {
  return std::string(to_string(std::get<0>(info.param))) + "_" + to_string(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Types, GemmXGroups,
                         ::testing::Combine(::testing::Values(DType::f32, DType::bf16, DType::f16),
                                            ::testing::Values(Isa::avx512_core, Isa::avx2)),
                         case_name);

// gemm_x by default, K == s on NCX: for the dot family's shapes (at most 4 output and 8+ input channels per
// group), and from 8 input channels per group where its lanes along x are at least as full as the output
// channels fill vectors; not where the channels fill theirs and the rows do not, nor below 8 input
// channels, nor for depthwise layers.
TEST(PlanHeuristic, GemmXWhereItsLanesAreFullerThanTheChannels) {
  if (!isa_available(Isa::avx512_core)) GTEST_SKIP() << "AVX-512 is not available";
  auto k2 = [](int64_t g, int64_t ci, int64_t co, V in) {
    return DeconvTester().layout(DataFormat::NCX).groups(g).channels(ci, co).input(std::move(in)).kernel({2, 2})
        .stride({2, 2});
  };
  using detail::Algorithm;
  EXPECT_EQ(plan_of(k2(1, 64, 1, {40, 20})).algorithm, Algorithm::gemm_x);   // dot shape, 20 of 32 lanes
  EXPECT_EQ(plan_of(k2(2, 64, 4, {40, 20})).algorithm, Algorithm::gemm_x);   // the same per group
  EXPECT_EQ(plan_of(k2(1, 32, 6, {40, 28})).algorithm, Algorithm::gemm_x);   // 28 of 32 against 6 of 16
  EXPECT_EQ(plan_of(k2(4, 64, 32, {40, 40})).algorithm, Algorithm::gemm_x);  // 40 of 48 against 8 of 16
  EXPECT_NE(plan_of(k2(1, 32, 12, {400, 7})).algorithm, Algorithm::gemm_x);  // stacked rows: 7 of 16 lanes
  EXPECT_NE(plan_of(k2(1, 64, 64, {40, 20})).algorithm, Algorithm::gemm_x);  // channels fill their vectors
  EXPECT_NE(plan_of(k2(1, 6, 3, {40, 37})).algorithm, Algorithm::gemm_x);    // 6 input channels
  EXPECT_EQ(plan_of(k2(16, 16, 16, {40, 40})).algorithm, Algorithm::depthwise_x);
  // Rows of more than 64 vectors: gemm_x in x chunks, except where col_x, which prefetches the planes a
  // long row streams, takes the layer (at most 16 output channels from 8+ input channels) and a chunk's
  // source passes a quarter of L2.
  auto k2_1d = [](int64_t ci, int64_t co, int64_t w) {
    return DeconvTester().layout(DataFormat::NCX).rank(1).channels(ci, co).input({w}).kernel({2}).stride({2});
  };
  EXPECT_EQ(plan_of(k2_1d(12, 384, 1187)).algorithm, Algorithm::gemm_x);
  EXPECT_EQ(plan_of(k2_1d(192, 8, 17808)).algorithm, Algorithm::col_x);  // 768 KB of source per chunk
  EXPECT_EQ(plan_of(k2_1d(192, 8, 1025)).algorithm, Algorithm::col_x);
  EXPECT_EQ(plan_of(k2_1d(192, 8, 1024)).algorithm, Algorithm::gemm_x);  // one call per row
  EXPECT_EQ(plan_of(k2_1d(48, 8, 17808)).algorithm, Algorithm::gemm_x);  // 192 KB per chunk
}

}  // namespace
}  // namespace deconvjit
