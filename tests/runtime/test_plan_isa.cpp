// The plan's instruction set (runtime/plan_isa.cpp): the cap, or AVX2 code under an AVX-512 cap where the
// CPU runs AVX-512 at the AVX2 rate and 8-lane vectors hold the family's channels clearly fuller. The rule
// is planned here for both kinds of CPU, whatever this one is.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "deconvjit/deconvjit.hpp"
#include "runtime/cpu.hpp"
#include "runtime/plan.hpp"
#include "support/deconv_tester.hpp"

namespace deconvjit::detail {
namespace {

using testing::DeconvTester;

Plan zen4_plan(const DeconvTester& t, const TuningHints& h = {}, Isa cap = Isa::avx512_core) {
  return make_plan(resolve(t.descriptor()), cap, h, true);
}

// 24 output channels: two 16-lane vectors 3/4 full, three 8-lane ones full (holdout s71 ho22, 1.20x).
DeconvTester direct24() {
  return DeconvTester().channels(64, 24).input({9, 4}).kernel({7, 7}).pads({3, 3}, {3, 3}).layout(DataFormat::NXC);
}

TEST(PlanIsa, AvxTwoWhereItsVectorsHoldTheChannelsFuller) {
  struct Case {
    const char* what;
    DeconvTester t;
    bool ymm;
  };
  auto nxc = [] { return DeconvTester().layout(DataFormat::NXC); };
  const Case cases[] = {
      {"direct, 24 output channels", direct24(), true},
      {"direct, 24 output channels, NCX", direct24().layout(DataFormat::NCX), true},
      {"gemm 1x1, 24 output channels", nxc().channels(320, 24).input({25, 25}).kernel({1, 1}), true},
      {"direct, 8 output channels", nxc().channels(12, 8).input({9, 9}).kernel({5, 5}).stride({2, 2}), true},
      {"dot, 8 input channels",
       nxc().rank(3).channels(8, 3).input({8, 8, 8}).kernel({3, 3, 3}).stride({2, 2, 2}), true},
      {"f16, 24 output channels", direct24().dtype(DType::f16), true},
      {"16 output channels: both full", nxc().channels(64, 16).input({9, 9}).kernel({3, 3}), false},
      {"40 output channels: 5/6 against full, below 1.3x", nxc().channels(32, 40).input({9, 9}).kernel({3, 3}),
       false},
      {"one output channel: 8 lanes mostly empty",
       nxc().channels(1, 1).input({16, 16}).kernel({4, 4}).stride({2, 2}), false},
      {"dot, 64 input channels: both full", nxc().channels(64, 3).input({16, 16}).kernel({4, 4}).stride({2, 2}),
       false},
      {"depthwise: loads, not broadcasts",
       nxc().channels(24, 24).groups(24).input({16, 16}).kernel({4, 4}).stride({2, 2}), false},
      {"sums in f16", direct24().dtype(DType::f16).accumulation(DType::f16), false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const Plan pl = zen4_plan(c.t);
    EXPECT_EQ(pl.isa, c.ymm ? Isa::avx2 : Isa::avx512_core) << pl.name;
    EXPECT_EQ(pl.choices.isa, to_string(pl.isa));
    // On a CPU with AVX-512 at its full rate, and under an AVX2 cap, the cap.
    EXPECT_EQ(make_plan(resolve(c.t.descriptor()), Isa::avx512_core, {}, false).isa, Isa::avx512_core);
    EXPECT_EQ(make_plan(resolve(c.t.descriptor()), Isa::avx2, {}, true).isa, Isa::avx2);
  }
  // bf16: channel pairs, where the CPU has them, reduce at twice the rate on AVX-512 only.
  EXPECT_EQ(zen4_plan(direct24().dtype(DType::bf16)).isa, Isa::avx512_core);
}

TEST(PlanIsa, HintsChooseTheIsaAndRebuildTheChoice) {
  const Plan ymm = zen4_plan(direct24());
  ASSERT_EQ(ymm.isa, Isa::avx2);
  EXPECT_EQ(zen4_plan(direct24(), ymm.choices).name, ymm.name);  // the choices rebuild it, isa included
  EXPECT_EQ(make_plan(resolve(direct24().descriptor()), Isa::avx512_core, ymm.choices, false).name, ymm.name);
  TuningHints z;
  z.isa = "avx512_core";
  EXPECT_EQ(zen4_plan(direct24(), z).isa, Isa::avx512_core);
  // A hint that counts vectors was written for one width: the rule keeps the cap's.
  TuningHints tile;
  tile.ur_w = 4;
  EXPECT_EQ(zen4_plan(direct24(), tile).isa, Isa::avx512_core);
  TuningHints above, unknown;
  above.isa = "avx512_core";
  unknown.isa = "sse";
  for (const TuningHints& bad : {above, unknown}) {
    try {
      zen4_plan(direct24(), bad, Isa::avx2);
      ADD_FAILURE() << "isa " << bad.isa << " under an AVX2 cap was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), Error::Kind::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find("isa"), std::string::npos) << e.what();
    }
  }
}

// On this CPU: the default kernel of the best ISA is AVX2 code where the rule holds, and computes the
// reference's result.
TEST(PlanIsa, ChosenAvxTwoKernelMatchesTheReference) {
  if (!isa_available(Isa::avx512_core) || resolve_isa(Isa::best) != Isa::avx512_core)
    GTEST_SKIP() << "no AVX-512 (or capped by DECONVJIT_MAX_ISA): the cap is the kernel's ISA";
  if (!cpu_zmm_at_ymm_rate()) GTEST_SKIP() << "this CPU runs AVX-512 at its full rate: the rule does not apply";
  Options o;
  o.use_cache = false;
  EXPECT_EQ(compile(direct24().descriptor(), o).isa(), Isa::avx2);
  direct24().Test();
  direct24().layout(DataFormat::NCX).Test();
  direct24().dtype(DType::f16).Test();
}

// col's inner GEMM kernel is the col plan's own ISA's code: asked for AVX2 under an AVX-512 cap, the same
// kernel, with the same packed weights, as under an AVX2 cap (not AVX-512 code under an AVX2 name).
TEST(PlanIsa, ColInnerKernelIsTheColPlansIsa) {
  if (resolve_isa(Isa::avx512_core) != Isa::avx512_core)
    GTEST_SKIP() << "no AVX-512 (or capped by DECONVJIT_MAX_ISA): nothing to tell the two caps apart";
  const Descriptor d = DeconvTester().channels(64, 32).input({4, 4}).kernel({4, 4}).stride({2, 2})
                           .layout(DataFormat::NXC).descriptor();
  Options under_z, under_y;
  under_z.max_isa = Isa::avx512_core;
  under_y.max_isa = Isa::avx2;
  under_z.use_cache = under_y.use_cache = false;
  under_z.use_disk_cache = under_y.use_disk_cache = false;
  under_z.hints.algorithm = under_y.hints.algorithm = "col";
  under_z.hints.isa = "avx2";
  const Kernel kz = compile(d, under_z), ky = compile(d, under_y);
  EXPECT_EQ(kz.isa(), Isa::avx2);
  EXPECT_EQ(kz.name(), ky.name());
  std::vector<float> w(static_cast<size_t>(64 * 32 * 16));
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 7) - 3.0f;
  const PackedWeights pz = kz.pack_weights(w), py = ky.pack_weights(w);
  ASSERT_EQ(pz.size_bytes(), py.size_bytes());
  EXPECT_EQ(std::memcmp(pz.data(), py.data(), pz.size_bytes()), 0) << "packed for another inner kernel";
}

TEST(PlanIsa, PlanSpaceOffersBothUnderAnAvx512Cap) {
  if (resolve_isa(Isa::avx512_core) != Isa::avx512_core)
    GTEST_SKIP() << "no AVX-512 (or capped by DECONVJIT_MAX_ISA): the space holds AVX2 plans only";
  const Problem p = resolve(direct24().descriptor());
  int ymm = 0, zmm = 0;
  for (const PlanCandidate& c : enumerate_plans(p, Isa::avx512_core, 2)) {
    EXPECT_FALSE(c.hints.isa.empty()) << c.kernel;
    (c.hints.isa == "avx2" ? ymm : zmm) += 1;
    EXPECT_EQ(c.kernel.substr(c.kernel.size() - c.hints.isa.size()), c.hints.isa);
  }
  EXPECT_GT(ymm, 0);
  EXPECT_GT(zmm, 0);
}

}  // namespace
}  // namespace deconvjit::detail
