// The fused x taps (Plan::fused_x_taps, hint fuse_x_taps) of the depthwise and dot families: every x tap of
// a phase in one pass over the source pixels. On both ISAs and in f32, bf16 (the even/odd route too) and
// f16, each case must match the double-precision reference; depthwise output must equal the tap loop's bit
// for bit (the fused pass orders each accumulator's taps as the loop does). Plus the heuristic's rules.
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

// The dot family: vectors of input channels, each source vector loaded once for the taps that meet it. Its
// sums run the taps inside the channel vectors (the loop runs them outside), so only the reference decides.
// Shapes: 1 output channel, 9 taps at stride 2 (5 and 4 per phase) and a channel tail (AVX-512: 56 = 3 x 16
// + 8); 2 channels, kernel 4; kernel 5 at stride 2 with pads (phases of 3 and 2, border runs with fewer);
// 1-D at stride 8; dilation 2 (taps two pixels apart); 3-D; 20 and 12 input channels (bf16 without pairs
// or even/odd halves: below 32 channels on AVX-512, below 16 on AVX2).
TEST_P(FusedXTaps, DotMatchesReference) {
  struct Shape {
    int64_t ci, co;
    std::vector<int64_t> in, k, s, d, pb, pe;
  };
  const std::vector<Shape> shapes = {
      {56, 1, {3, 23}, {9, 9}, {2, 2}, {1, 1}, {4, 4}, {4, 4}},
      {40, 2, {2, 15}, {4, 4}, {2, 2}, {1, 1}, {1, 1}, {1, 1}},
      {24, 1, {3, 13}, {5, 5}, {2, 2}, {1, 1}, {2, 2}, {2, 2}},
      {32, 1, {37}, {16}, {8}, {1}, {4}, {4}},
      {24, 2, {3, 19}, {5, 5}, {1, 1}, {2, 2}, {4, 4}, {4, 4}},
      {16, 1, {2, 3, 9}, {2, 4, 4}, {1, 2, 2}, {1, 1, 1}, {0, 1, 1}, {0, 1, 1}},
      {20, 1, {2, 21}, {4, 4}, {2, 2}, {1, 1}, {1, 1}, {1, 1}},
      {12, 2, {2, 21}, {4, 4}, {2, 2}, {1, 1}, {1, 1}, {1, 1}},
  };
  int fused = 0;
  auto tester = [&](const Shape& sh, DataFormat layout, int fuse) {
    TuningHints h;
    h.algorithm = "dot";
    h.fuse_x_taps = fuse;
    h.ic_pairs = GetParam().dtype == DType::bf16 ? 0 : -1;  // (a choice only bf16 has)
    return DeconvTester().isa(GetParam().isa).dtype(GetParam().dtype).layout(layout).batch(2)
        .rank(static_cast<int>(sh.in.size())).channels(sh.ci, sh.co).input(sh.in).kernel(sh.k).stride(sh.s)
        .dilation(sh.d).pads(sh.pb, sh.pe).hints(h);
  };
  for (const Shape& sh : shapes) {
    for (DataFormat layout : {DataFormat::NXC, DataFormat::NCX}) {  // NCX: through the dot family's source copy
      SCOPED_TRACE(std::to_string(sh.ci) + " -> " + std::to_string(sh.co) + ", kernel x " +
                   std::to_string(sh.k.back()) + (layout == DataFormat::NCX ? ", NCX" : ", NXC"));
      for (int fuse : {1, 0}) {
        DeconvTester t = tester(sh, layout, fuse);
        std::string name;
        try {
          name = compile(t.descriptor(), t.options()).name();
        } catch (const Error&) {
          if (fuse == 0) throw;  // the tap loop is never refused
          continue;  // fused refused: bf16 even/odd halves (two vectors of channels per load)
        }
        EXPECT_EQ(name.find("_fx") != std::string::npos, fuse == 1) << name;
        fused += fuse;
        t.Test();
      }
    }
  }
  // bf16 reduces two vectors of channels at a time through even/odd halves, which do not fuse.
  const bool bf16 = GetParam().dtype == DType::bf16;
  EXPECT_GE(fused, !bf16 ? 16 : GetParam().isa == Isa::avx2 ? 2 : 8);
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

// The dot family fuses for 1-2 output channels where every x phase has 2+ taps (or, with phases of one tap,
// where the block keeps its width and reads 4 KB+ of source per tap) and the block, narrowed for the taps'
// weights, keeps 8 accumulators; not f16 on AVX2. And where dot_x yields to it on AVX2.
TEST(PlanHeuristic, DotFusesXTapsForOneOrTwoOutputChannels) {
  auto dot = [](int64_t co, int64_t k, int64_t s, DType t) {
    return DeconvTester().layout(DataFormat::NXC).channels(56, co).input({64, 64}).kernel({k, k}).stride({s, s})
        .dtype(t);
  };
  // (make_plan is pure: f32 and f16 plans of either ISA's own code need no particular CPU)
  auto plan_on = [](const DeconvTester& t, Isa isa) {
    return detail::make_plan(resolve(t.descriptor()), isa, {}, false);
  };
  const detail::Plan one = plan_on(dot(1, 9, 2, DType::f16), Isa::avx512_core);
  ASSERT_EQ(one.algorithm, detail::Algorithm::dot);
  EXPECT_EQ(one.fused_x_taps, 5);
  EXPECT_EQ(one.ur_w, 16);  // 16 + 1 + 5 weights + 1 source vector fit 32 registers
  EXPECT_EQ(plan_on(dot(2, 4, 2, DType::f32), Isa::avx512_core).fused_x_taps, 2);
  EXPECT_EQ(plan_on(dot(2, 4, 2, DType::f32), Isa::avx512_core).ur_w, 12);  // narrowed from 14
  EXPECT_EQ(plan_on(dot(3, 4, 2, DType::f32), Isa::avx512_core).fused_x_taps, 0);  // 3 channels
  EXPECT_EQ(plan_on(dot(3, 4, 2, DType::f32), Isa::avx512_core).ur_w, 9);
  EXPECT_EQ(plan_on(dot(1, 3, 2, DType::f16), Isa::avx512_core).fused_x_taps, 0);  // phases of 2 and 1 taps
  // Phases of 2 and 1 taps where the block keeps its width and reads 4 KB+ of source per tap (holdout s97
  // ho29's 320 channels): fused; two output channels narrow the block (14 -> 12): not.
  auto wide = [](int64_t co) {
    return DeconvTester().layout(DataFormat::NXC).channels(320, co).input({20, 20}).kernel({3, 3}).stride({2, 2})
        .pads({1, 1}, {1, 1});
  };
  EXPECT_EQ(plan_on(wide(1), Isa::avx512_core).fused_x_taps, 2);
  EXPECT_EQ(plan_on(wide(1), Isa::avx512_core).ur_w, 16);
  EXPECT_EQ(plan_on(wide(2), Isa::avx512_core).fused_x_taps, 0);
  EXPECT_EQ(plan_on(dot(1, 9, 2, DType::f32), Isa::avx2).fused_x_taps, 5);
  EXPECT_EQ(plan_on(dot(1, 9, 2, DType::f32), Isa::avx2).ur_w, 9);
  EXPECT_EQ(plan_on(dot(1, 9, 2, DType::f16), Isa::avx2).fused_x_taps, 0);   // AVX2 f16
  EXPECT_EQ(plan_on(dot(1, 13, 2, DType::f32), Isa::avx2).fused_x_taps, 0);  // 7 taps: 7 pixels, 7 accumulators
  TuningHints on;
  on.fuse_x_taps = 1;
  EXPECT_EQ(detail::make_plan(resolve(dot(1, 9, 2, DType::f16).descriptor()), Isa::avx2, on).fused_x_taps, 5);
  // NCX on AVX2: dot_x yields to the dot family from 24 products per source element with 1-3 channels.
  auto ncx = [&](int64_t co, int64_t k) {
    return plan_on(dot(co, k, 2, DType::f32).layout(DataFormat::NCX), Isa::avx2);
  };
  EXPECT_EQ(ncx(1, 9).algorithm, detail::Algorithm::dot);  // 81 products, fused
  EXPECT_EQ(ncx(1, 9).fused_x_taps, 5);
  EXPECT_EQ(ncx(1, 4).algorithm, detail::Algorithm::col_x);  // 16, 4 x taps: col_x (col_x_preferred)
  EXPECT_EQ(ncx(3, 4).algorithm, detail::Algorithm::dot);    // 48, not fused (3 channels)
  EXPECT_EQ(ncx(3, 4).fused_x_taps, 0);
  EXPECT_EQ(ncx(4, 4).algorithm, detail::Algorithm::dot_x);  // 4 channels: a dot block of 2 pixels
}

// Rows of a few pixels over several images block across the images, except where the dot family would fuse
// the row's x taps (choose_batch_blocking, dot_row_fuses): holdout s229 ho31's shape.
TEST(PlanHeuristic, DotRowsThatFuseDoNotBlockOverImages) {
  auto ho31 = [](int64_t k, int64_t s, DType t) {
    return DeconvTester().layout(DataFormat::NXC).batch(16).channels(128, 1).input({8, 8}).kernel({k, k})
        .stride({s, s}).pads({k / 4, k / 4}, {k / 4, k / 4}).dtype(t);
  };
  auto plan_on = [](const DeconvTester& t, Isa isa, const TuningHints& h = {}) {
    return detail::make_plan(resolve(t.descriptor()), isa, h, false);
  };
  for (DType t : {DType::f32, DType::f16}) {
    const detail::Plan fused = plan_on(ho31(16, 8, t), Isa::avx512_core);
    ASSERT_EQ(fused.algorithm, detail::Algorithm::dot);
    EXPECT_FALSE(fused.block_over_batch);
    EXPECT_EQ(fused.fused_x_taps, 2);
  }
  // Phases of one x tap (kernel 8 at stride 8) have nothing to fuse: the rows block over the images.
  const detail::Plan one_tap = plan_on(ho31(8, 8, DType::f32), Isa::avx512_core);
  ASSERT_EQ(one_tap.algorithm, detail::Algorithm::dot);
  EXPECT_TRUE(one_tap.block_over_batch);
  // bf16 takes channel pairs or even/odd halves, which do not fuse: blocks over images.
  EXPECT_TRUE(plan_on(ho31(16, 8, DType::bf16), Isa::avx512_core).block_over_batch);
  // The hints decide: batch_block; fuse_x_taps 0 keeps the blocks, 1 takes the row where fusion does not pay.
  TuningHints blocks, unfused, fused;
  blocks.batch_block = 1;
  unfused.fuse_x_taps = 0;
  fused.fuse_x_taps = 1;
  EXPECT_TRUE(plan_on(ho31(16, 8, DType::f32), Isa::avx512_core, blocks).block_over_batch);
  EXPECT_TRUE(plan_on(ho31(16, 8, DType::f32), Isa::avx512_core, unfused).block_over_batch);
  const detail::Plan asked = plan_on(ho31(16, 8, DType::f32).channels(8, 3), Isa::avx512_core, fused);
  EXPECT_FALSE(asked.block_over_batch);  // 3 outputs: fusion does not pay by default
  EXPECT_GT(asked.fused_x_taps, 0);
}

}  // namespace
}  // namespace deconvjit
