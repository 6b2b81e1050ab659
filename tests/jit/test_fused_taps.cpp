// The depthwise family's fused x taps (Plan::fused_x_taps, hint fuse_x_taps): every x tap of a phase in
// one pass over the source pixels. On both ISAs and in f32, bf16 (the even/odd route too) and f16, each
// case must match the double-precision reference, and its output must equal the tap loop's bit for bit
// (the fused pass orders each accumulator's taps as the loop does). Plus the heuristic's rule.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deconvjit/deconvjit.hpp"
#include "runtime/plan.hpp"
#include "runtime/typed_data.hpp"
#include "support/deconv_tester.hpp"
#include "support/no_disk_cache.hpp"

namespace deconvjit {
namespace {

using testing::DeconvTester;

struct FuseParam {
  Isa isa;
  DType dtype;
};

class FusedXTaps : public ::testing::TestWithParam<FuseParam> {
 protected:
  void SetUp() override {
    if (!isa_available(GetParam().isa)) GTEST_SKIP() << "ISA " << to_string(GetParam().isa) << " is not available";
    if (auto why = testing::unsupported_types(GetParam().isa, GetParam().dtype)) GTEST_SKIP() << "compile: " << *why;
  }
  DeconvTester T(int fuse) const {
    TuningHints h;
    h.algorithm = "depthwise";
    h.fuse_x_taps = fuse;
    return DeconvTester().isa(GetParam().isa).dtype(GetParam().dtype).layout(DataFormat::NXC).hints(h);
  }
  // The output of `t`'s kernel on seeded operands, as bytes.
  static std::vector<uint8_t> run(const DeconvTester& t, std::string* name) {
    const Kernel k = compile(t.descriptor(), t.options());
    *name = k.name();
    const Problem& p = k.problem();
    const verify::TypedOperands ops = verify::typed_operands(p, 11);
    verify::TypedData dst(p.dtype, p.dst_elements());
    k.execute(ops.src.view(), ops.weights.view(), dst.view());
    return dst.bytes;
  }
  testing::NoDiskCache no_disk_cache_;
};

std::string fuse_name(const ::testing::TestParamInfo<FuseParam>& info) {
  return std::string(to_string(info.param.isa)) + "_" + to_string(info.param.dtype);
}

std::vector<FuseParam> fuse_params() {
  std::vector<FuseParam> v;
  for (DType t : {DType::f32, DType::bf16, DType::f16})
    for (Isa isa : {Isa::avx512_core, Isa::avx2}) v.push_back({isa, t});
  return v;
}

// Shapes: taps 2 per phase (k 4, s 2), 2 and 3 (k 5, s 2: fused twice), 3 at stride 1, 2 taps two source
// pixels apart (dilation 2), a channel tail (20: a masked vector), whole bf16 vector pairs (64: the
// even/odd route on AVX-512), several channel blocks per call, 1-D and 3-D, pads that leave border runs
// with fewer taps (the loop's).
TEST_P(FusedXTaps, MatchReferenceAndTheTapLoopBitForBit) {
  struct Shape {
    int64_t c;
    std::vector<int64_t> in, k, s, d, pb, pe;
  };
  const std::vector<Shape> shapes = {
      {32, {5, 13}, {4, 4}, {2, 2}, {1, 1}, {1, 1}, {1, 1}},
      {20, {4, 11}, {5, 5}, {2, 2}, {1, 1}, {2, 2}, {2, 2}},
      {64, {3, 17}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}},
      {48, {4, 12}, {3, 3}, {1, 1}, {2, 2}, {2, 2}, {2, 2}},
      {256, {3, 9}, {4, 4}, {2, 2}, {1, 1}, {1, 1}, {1, 1}},
      {16, {30}, {8}, {4}, {1}, {2}, {2}},
      {24, {2, 3, 7}, {2, 4, 4}, {1, 2, 2}, {1, 1, 1}, {0, 1, 1}, {0, 1, 1}},
  };
  int fused = 0;
  for (const Shape& sh : shapes) {
    auto shaped = [&](int fuse) {
      return T(fuse).rank(static_cast<int>(sh.in.size())).batch(2).groups(sh.c).channels(sh.c, sh.c).input(sh.in)
          .kernel(sh.k).stride(sh.s).dilation(sh.d).pads(sh.pb, sh.pe);
    };
    SCOPED_TRACE("C = G = " + std::to_string(sh.c) + ", kernel x " + std::to_string(sh.k.back()));
    std::string on_name, off_name;
    const DeconvTester on = shaped(-1);  // the heuristic: fused wherever these small problems allow
    on.Test();
    const std::vector<uint8_t> a = run(on, &on_name), b = run(shaped(0), &off_name);
    EXPECT_EQ(off_name.find("_fx"), std::string::npos) << off_name;
    fused += on_name.find("_fx") != std::string::npos;
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size()), 0) << on_name << " differs from " << off_name;
  }
  // AVX2's 16 registers leave the bf16 even/odd route (two vectors per load) no room on most tiles.
  EXPECT_GE(fused, GetParam().isa == Isa::avx2 && GetParam().dtype == DType::bf16 ? 1 : 6);
}

INSTANTIATE_TEST_SUITE_P(Types, FusedXTaps, ::testing::ValuesIn(fuse_params()), fuse_name);

detail::Plan plan_of(const DeconvTester& t, const TuningHints& h = {}) {
  return detail::make_plan(resolve(t.descriptor()), Isa::avx512_core, h);
}

// Fused wherever every x phase has 2+ taps; where some has one (kernel 3, stride 2) only below 16 MB of
// output, where it measured slower (mobilenetv2_bwd_dw96_b16, 38 MB in f16).
TEST(PlanHeuristic, FusedXTapsWhereEveryPhaseHasTwoOrTheOutputIsSmall) {
  auto dw = [](int64_t c, int64_t n, int64_t hw, int64_t k) {
    return DeconvTester().layout(DataFormat::NXC).batch(n).groups(c).channels(c, c).input({hw, hw}).kernel({k, k})
        .stride({2, 2}).pads({1, 1}, {1, 1}).dtype(DType::f16);
  };
  if (!isa_available(Isa::avx512_core)) GTEST_SKIP() << "AVX-512 is not available";
  EXPECT_EQ(plan_of(dw(64, 1, 32, 4)).fused_x_taps, 2);
  EXPECT_EQ(plan_of(dw(64, 16, 64, 4)).fused_x_taps, 2);   // 33 MB, but every phase has 2 taps
  EXPECT_EQ(plan_of(dw(144, 2, 28, 5)).fused_x_taps, 3);   // phases of 3 and 2 taps
  EXPECT_EQ(plan_of(dw(96, 4, 56, 3)).fused_x_taps, 2);    // phases of 2 and 1, 9.6 MB
  EXPECT_EQ(plan_of(dw(96, 16, 56, 3)).fused_x_taps, 0);   // phases of 2 and 1, 38 MB
  TuningHints on;
  on.fuse_x_taps = 1;
  EXPECT_EQ(plan_of(dw(96, 16, 56, 3), on).fused_x_taps, 2);
  // A choice the tuner sees and can make again.
  EXPECT_EQ(plan_of(dw(64, 1, 32, 4)).choices.fuse_x_taps, 1);
  EXPECT_EQ(plan_of(dw(96, 16, 56, 3)).choices.fuse_x_taps, 0);
  // Refused outside the family, or with 1x1 kernels (one tap).
  const DeconvTester direct = DeconvTester().layout(DataFormat::NXC).channels(16, 16).input({4, 4}).kernel({4, 4})
                                  .stride({2, 2});
  EXPECT_THROW(plan_of(direct, on), Error);
  EXPECT_EQ(plan_of(direct).choices.fuse_x_taps, -1);
  const DeconvTester one_tap = DeconvTester().layout(DataFormat::NXC).groups(64).channels(64, 64).input({8, 8})
                                   .kernel({1, 1}).stride({2, 2});
  EXPECT_THROW(plan_of(one_tap, on), Error);
}

}  // namespace
}  // namespace deconvjit
