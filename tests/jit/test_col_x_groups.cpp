// The col_x family (NCX, vectors along input x) on grouped layers, and the rule that takes it there
// by default. Each case must match the double-precision reference in f32, bf16 (channel pairs where the
// CPU has avx512_bf16) and f16.
#include <gtest/gtest.h>

#include <string>
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

// The plan of `isa` itself, on any CPU (not the AVX2 code some CPUs choose under an AVX-512 cap).
detail::Plan plan_on(Isa isa, const DeconvTester& t, const TuningHints& h = {}) {
  return detail::make_plan(resolve(t.descriptor()), isa, h, false);
}
detail::Plan plan_of(const DeconvTester& t, const TuningHints& h = {}) { return plan_on(Isa::avx512_core, t, h); }

// The grouped layers on one ISA, in each data type.
template <Isa kIsa>
class ColXGroupsOn : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    if (!isa_available(kIsa)) GTEST_SKIP() << to_string(kIsa) << " is not available";
    if (auto why = testing::unsupported_types(kIsa, GetParam())) GTEST_SKIP() << "compile: " << *why;
  }
  DeconvTester T(int rank, int64_t groups, int64_t c_in, int64_t c_out, V in) const {
    return DeconvTester().isa(kIsa).dtype(GetParam()).layout(DataFormat::NCX).rank(rank)
        .groups(groups).channels(c_in, c_out).input(std::move(in));
  }
  testing::NoDiskCache no_disk_cache_;
};
using ColXGroups = ColXGroupsOn<Isa::avx512_core>;
using ColXGroupsAvx2 = ColXGroupsOn<Isa::avx2>;

// The hints of the cases asked for: col_x; with `channels` per block and rows in two parts; across images.
struct AskedFor {
  TuningHints cx, tail, images;
  explicit AskedFor(int channels) {
    cx.algorithm = "col_x";
    tail = cx, images = cx;
    tail.oc_vectors = channels, tail.x_split = 2;
    images.batch_block = 1, images.ur_w = 2;
  }
};

// Each group's source planes, weights and output planes lie a group further on: a wrong offset of any of
// them sums another group's channels. The defaults: 3 -> 1 channels per group in 3-D at stride 1 (holdout
// s89 ho11's shape), 24 -> 3 per group at stride 2, 12 -> 3 in 1-D at stride 8, 16 -> 10 in 3-D. Asked
// for: an odd channel count per group (half a bf16 pair) with a channel tail and rows cut into parts, and
// tiles across the images of rows of one vector.
TEST_P(ColXGroups, MatchReference) {
  const AskedFor h(3);
  const TuningHints &tail = h.tail, &images = h.images;
  const std::vector<testing::FamilyCase> cases = {
      {T(3, 4, 12, 4, {5, 6, 40}).batch(2).kernel({3, 3, 3}).pads({1, 1, 1}, {1, 1, 1}), {}, true},
      {T(2, 8, 192, 24, {9, 16}).kernel({4, 4}).stride({2, 2}).pads({1, 1}, {1, 1}), {}, true},
      {T(1, 8, 96, 24, {300}).batch(2).kernel({16}).stride({8}).pads({4}, {4}), {}, true},
      {T(3, 4, 64, 40, {4, 5, 12}).kernel({3, 3, 3}).stride({2, 2, 2}).pads({1, 1, 1}, {0, 0, 0}), {}, true},
      {T(2, 2, 10, 14, {3, 70}).kernel({3, 5}).stride({1, 2}).pads({1, 2}, {0, 1}), tail, false},
      {T(2, 3, 27, 6, {4, 11}).batch(4).kernel({3, 3}).stride({2, 2}).pads({1, 1}, {1, 1}), images, false},
  };
  testing::expect_family_cases(cases, detail::Algorithm::col_x, plan_of);
}

// Not by default: rows filling less than half a vector (a G=4 192 -> 3 layer over rows of 5 ran 0.4x
// against the dot family), more than 16 output channels per group that fill their vectors, fewer than 8
// input channels per group at a stride above 1 (no reduction to hide the phase interleave) or at stride 1
// with fewer than 8 products per x tap where gemm_x applies; K == s (gemm_x).
TEST_P(ColXGroups, NotWhereOtherFamiliesWin) {
  auto family = [&](const DeconvTester& t) { return plan_of(t).algorithm; };
  const auto k3s2 = [&](int64_t g, int64_t ci, int64_t co, V in) {
    return T(2, g, ci, co, std::move(in)).kernel({3, 3}).stride({2, 2}).pads({1, 1}, {1, 1});
  };
  EXPECT_EQ(family(k3s2(4, 64, 12, {20, 40})), detail::Algorithm::col_x);  // the reference point
  EXPECT_NE(family(k3s2(4, 64, 12, {20, 5})), detail::Algorithm::col_x);
  EXPECT_NE(family(k3s2(2, 32, 64, {20, 40})), detail::Algorithm::col_x);
  EXPECT_NE(family(k3s2(4, 16, 12, {20, 40})), detail::Algorithm::col_x);
  EXPECT_NE(family(T(2, 4, 64, 12, {20, 40}).kernel({2, 2}).stride({2, 2})), detail::Algorithm::col_x);
  // Stride 1 with few channels: a 3-D kernel's z and y taps make the reduction (3 -> 1 per group, 3x3x3:
  // 27 products per x tap); with fewer (a 2-D 2 -> 2 layer's 3 y taps: 6; 8 groups of 2 -> 1, holdout s223
  // ho07's shape) col_x still wins, but not where gemm_x applies (4 groups of 4 -> 10, 1x1: s229 ho46).
  EXPECT_EQ(family(T(3, 4, 12, 4, {8, 8, 40}).kernel({3, 3, 3}).pads({1, 1, 1}, {1, 1, 1})), detail::Algorithm::col_x);
  EXPECT_EQ(family(T(2, 1, 2, 2, {20, 64}).kernel({3, 3}).pads({1, 1}, {1, 1})), detail::Algorithm::col_x);
  EXPECT_EQ(family(T(2, 8, 16, 8, {20, 64}).kernel({3, 3}).pads({1, 1}, {1, 1})), detail::Algorithm::col_x);
  EXPECT_EQ(family(T(2, 4, 16, 40, {20, 64}).kernel({1, 1})), detail::Algorithm::gemm_x);
  EXPECT_EQ(plan_on(Isa::avx2, T(2, 4, 16, 40, {20, 64}).kernel({1, 1})).algorithm, detail::Algorithm::col_x);
}

// AVX2's col_x on grouped layers, asked for by hint (its 8 lanes and 12 accumulators: kernels of at most
// 12 x taps, 2 vectors per tile, rows of one vector at 8 pixels or fewer): 3-D stride 1, 2-D stride 2,
// 1-D stride 8, a channel tail with rows cut into parts, and tiles across the images.
TEST_P(ColXGroupsAvx2, MatchReference) {
  const AskedFor h(2);
  const TuningHints &cx = h.cx, &tail = h.tail, &images = h.images;
  const std::vector<testing::FamilyCase> cases = {
      {T(3, 4, 12, 4, {5, 6, 40}).batch(2).kernel({3, 3, 3}).pads({1, 1, 1}, {1, 1, 1}), cx, false},
      {T(2, 8, 192, 24, {9, 16}).kernel({4, 4}).stride({2, 2}).pads({1, 1}, {1, 1}), cx, false},
      {T(1, 8, 96, 24, {300}).batch(2).kernel({12}).stride({8}).pads({2}, {4}), cx, false},
      {T(2, 2, 10, 14, {3, 70}).kernel({3, 5}).stride({1, 2}).pads({1, 2}, {0, 1}), tail, false},
      {T(2, 3, 27, 6, {4, 7}).batch(4).kernel({3, 3}).stride({2, 2}).pads({1, 1}, {1, 1}), images, false},
  };
  testing::expect_family_cases(cases, detail::Algorithm::col_x,
                               [](const DeconvTester& t, const TuningHints& h) { return plan_on(Isa::avx2, t, h); });
}

std::string type_name(const ::testing::TestParamInfo<DType>& info) { return to_string(info.param); }

INSTANTIATE_TEST_SUITE_P(Types, ColXGroups, ::testing::Values(DType::f32, DType::bf16, DType::f16), type_name);
INSTANTIATE_TEST_SUITE_P(Types, ColXGroupsAvx2, ::testing::Values(DType::f32, DType::bf16, DType::f16), type_name);

}  // namespace
}  // namespace deconvjit
