// Targeted JIT cases on the layer's shape (fixture: support/kernel_cases.hpp): the seeds' worked examples,
// channel tails, groups, depthwise, channel multipliers, zero phases, dilation, negative pads, output_padding,
// output_shape under every auto_pad, 1D/3D, batches, the gemm and col routes, every NCX layout, code size.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "deconvjit/deconvjit.hpp"
#include "support/deconv_tester.hpp"
#include "support/kernel_cases.hpp"
#include "support/seed_examples.hpp"

namespace deconvjit {
namespace {

using testing::CaseParam;
using testing::DeconvTester;
using testing::KernelCases;
using testing::kFormats;
using V = std::vector<int64_t>;

constexpr WeightsFormat kWeightFormats[] = {WeightsFormat::OIX, WeightsFormat::XIO, WeightsFormat::GOIX};
constexpr AutoPad kAutoPads[] = {AutoPad::Explicit, AutoPad::Valid, AutoPad::SameUpper, AutoPad::SameLower};

// f32 cases keep their names from before the types were added ("avx2"); the others say their type.
std::string case_name(const ::testing::TestParamInfo<CaseParam>& info) {
  const std::string isa = to_string(info.param.isa);
  return info.param.dtype == DType::f32 ? isa : isa + "_" + to_string(info.param.dtype);
}

std::vector<CaseParam> all_cases() {
  std::vector<CaseParam> v;
  for (DType t : {DType::f32, DType::bf16, DType::f16})
    for (Isa isa : {Isa::avx512_core, Isa::avx2}) v.push_back({isa, t});
  return v;
}

// ---- the seeds' worked examples -------------------------------------------------------------------------

TEST_P(KernelCases, SeedExamples) {
  for (const testing::SeedExample& e : testing::seed_examples()) {
    SCOPED_TRACE(to_json(e.desc));
    EXPECT_EQ(resolve(e.desc).dst_shape, e.dst);
    D(e.desc).Test();
  }
}

// The second example again in every layout combination (it is tiny).
TEST_P(KernelCases, SeedExampleTwoInEveryLayout) {
  for (DataFormat f : kFormats)
    for (WeightsFormat w : kWeightFormats)
      T().channels(20, 10).input({2, 2}).kernel({3, 3}).stride({3, 3}).output_padding({2, 2}).layout(f)
          .weights_format(w).Test();
}

// ---- channels and groups --------------------------------------------------------------------------------

TEST_P(KernelCases, OutputChannelTails) {
  for (int64_t c_out : {1, 3, 15, 17, 33, 47})
    for (int64_t c_in : {5, 9})  // 9 input channels reach the few-output-channel (dot) family
      for (DataFormat f : kFormats) {
        SCOPED_TRACE("C_IN " + std::to_string(c_in) + " C_OUT " + std::to_string(c_out));
        T().channels(c_in, c_out).input({5, 6}).kernel({3, 3}).stride({2, 2}).pads({1, 0}, {0, 1}).layout(f)
            .Test();
      }
}

TEST_P(KernelCases, LongReductionWithUnrollRemainder) {
  for (int64_t c_in : {1, 7, 37, 64})
    for (DataFormat f : kFormats) T().channels(c_in, 24).input({4, 5}).kernel({2, 3}).stride({2, 1}).layout(f).Test();
}

TEST_P(KernelCases, Groups) {
  for (DataFormat f : kFormats)
    for (WeightsFormat w : kWeightFormats) {
      T().groups(2).channels(6, 10).input({4, 5}).kernel({3, 3}).stride({2, 2}).layout(f).weights_format(w)
          .Test();  // 3 in, 5 out per group
      T().groups(3).channels(9, 21).input({5, 4}).kernel({2, 3}).stride({1, 2}).layout(f).weights_format(w)
          .Test();  // 3 in, 7 out per group
      T().groups(3).channels(3, 51).input({4, 4}).kernel({3, 3}).stride({2, 2}).layout(f).weights_format(w)
          .Test();  // 1 in, 17 out per group: a channel tail inside every group
    }
}

TEST_P(KernelCases, Depthwise) {
  for (int64_t c : {7, 16, 37})
    for (DataFormat f : kFormats)
      for (WeightsFormat w : kWeightFormats) {
        SCOPED_TRACE("C = G = " + std::to_string(c));
        DeconvTester t = T().groups(c).channels(c, c).input({5, 6}).kernel({3, 3}).stride({2, 2})
                             .pads({1, 1}, {1, 1}).layout(f).weights_format(w);
        t.Test();
        // NCX data: vectors along x (depthwise_x), or channel vectors over tiles of whole planes; no copies
        // of whole tensors.
        const nlohmann::json plan = plan_of(t);
        if (f == DataFormat::NCX && plan.at("layout") == "ncx_plane_tiles")
          EXPECT_EQ(plan.at("algorithm"), "depthwise");
        else
          EXPECT_EQ(plan.at("algorithm"), f == DataFormat::NCX ? "depthwise_x" : "depthwise");
      }
  T().rank(1).groups(19).channels(19, 19).input({17}).kernel({5}).stride({3}).dilation({2}).Test();
  T().rank(3).groups(5).channels(5, 5).input({3, 4, 3}).kernel({2, 3, 2}).stride({2, 1, 3}).batch(2)
      .layout(DataFormat::NXC).Test();
}

TEST_P(KernelCases, ChannelMultiplier) {
  for (int64_t g : {4, 8, 13})
    for (DataFormat f : kFormats)
      T().groups(g).channels(g, 2 * g).input({5, 5}).kernel({3, 3}).stride({2, 2}).layout(f).Test();
}

// ---- taps and phases ------------------------------------------------------------------------------------

TEST_P(KernelCases, KernelSmallerThanStrideLeavesZeroPhases) {
  for (DataFormat f : kFormats) {
    T().channels(6, 11).input({4, 5}).kernel({1, 1}).stride({3, 3}).layout(f).Test();
    T().channels(6, 11).input({4, 5}).kernel({2, 2}).stride({5, 5}).layout(f).Test();
    T().channels(6, 11).input({4, 5}).kernel({2, 1}).stride({5, 3}).output_padding({4, 2}).layout(f).Test();
    T().rank(1).channels(3, 20).input({9}).kernel({2}).stride({5}).pads({-2}, {3}).layout(f).Test();
  }
}

TEST_P(KernelCases, Dilation) {
  for (DataFormat f : kFormats) {
    T().channels(5, 18).input({5, 6}).kernel({3, 3}).stride({2, 2}).dilation({2, 2}).layout(f).Test();  // gcd 2
    T().channels(5, 18).input({5, 6}).kernel({3, 2}).stride({2, 4}).dilation({4, 2}).layout(f).Test();  // gcd 2
    T().channels(5, 18).input({5, 6}).kernel({3, 3}).stride({3, 2}).dilation({2, 3}).layout(f).Test();  // gcd 1
    T().channels(5, 18).input({5, 6}).kernel({4, 2}).stride({2, 3}).dilation({3, 6}).pads({2, 1}, {0, 3})
        .layout(f).Test();
  }
}

TEST_P(KernelCases, NegativePads) {
  for (DataFormat f : kFormats) {
    T().channels(4, 9).input({4, 5}).kernel({3, 3}).stride({2, 2}).pads({-1, -2}, {-2, -1}).layout(f).Test();
    T().channels(4, 9).input({4, 5}).kernel({3, 3}).stride({2, 2}).pads({-2, 2}, {3, -3}).layout(f).Test();
    T().rank(1).channels(4, 17).input({6}).kernel({4}).stride({3}).pads({-4}, {-4}).layout(f).Test();
  }
}

TEST_P(KernelCases, OutputPaddingAtOrPastTheStride) {
  for (DataFormat f : kFormats) {
    T().channels(4, 9).input({3, 4}).kernel({3, 3}).stride({2, 2}).output_padding({2, 3}).layout(f).Test();
    T().channels(4, 9).input({3, 4}).kernel({2, 2}).stride({3, 1}).output_padding({4, 1}).pads({1, 0}, {0, 0})
        .layout(f).Test();
  }
}

TEST_P(KernelCases, OutputShapeLargerAndSmallerUnderEveryAutoPad) {
  for (AutoPad a : kAutoPads)
    for (DataFormat f : kFormats) {
      SCOPED_TRACE(to_string(a));
      const DeconvTester base = T().channels(5, 13).input({4, 5}).kernel({3, 3}).stride({2, 2})
                                    .pads({1, 0}, {0, 2}).auto_pad(a).layout(f);
      const Problem natural = resolve(DeconvTester(base).descriptor());
      const int64_t ny = natural.out[0], nx = natural.out[1];
      DeconvTester(base).output_shape({ny + 3, nx + 5}).Test();  // zeros beyond the full result
      DeconvTester(base).output_shape({ny - 2, nx - 3}).Test();  // crop
      DeconvTester(base).output_shape({ny + 1, nx - 1}).Test();
      DeconvTester(base).output_shape({3, 1}).Test();
    }
  // Full-rank output_shape (oneDNN Graph dst_shape), with the seeds' third example's zero tail in 1D.
  T().rank(1).channels(6, 10).input({12}).kernel({3}).stride({1}).auto_pad(AutoPad::Valid).output_shape({1, 10, 30})
      .Test();
  T().rank(1).channels(6, 10).input({12}).kernel({3}).stride({1}).auto_pad(AutoPad::Valid)
      .layout(DataFormat::NXC).output_shape({1, 30, 10}).Test();
}

// ---- ranks, batches and routes --------------------------------------------------------------------------

TEST_P(KernelCases, OneAndThreeDimensions) {
  for (DataFormat f : kFormats)
    for (WeightsFormat w : kWeightFormats) {
      T().rank(1).channels(7, 19).input({23}).kernel({4}).stride({3}).pads({1}, {2}).layout(f).weights_format(w)
          .Test();
      T().rank(3).channels(5, 9).input({3, 4, 5}).kernel({3, 2, 3}).stride({2, 2, 1}).pads({1, 0, 1}, {0, 1, 1})
          .dilation({1, 2, 1}).layout(f).weights_format(w).Test();
    }
  T().rank(3).groups(2).channels(6, 10).input({4, 3, 3}).kernel({2, 2, 2}).stride({2, 2, 2}).batch(2).Test();
}

TEST_P(KernelCases, Batches) {
  for (int64_t n = 1; n <= 5; ++n)
    for (DataFormat f : kFormats) {
      SCOPED_TRACE("N = " + std::to_string(n));
      T().batch(n).channels(6, 20).input({5, 7}).kernel({3, 3}).stride({2, 2}).layout(f).Test();
    }
}

// Several images and rows too short to fill a register block: the blocks run across images.
TEST_P(KernelCases, BlockingAcrossImages) {
  for (DataFormat f : kFormats)
    for (int64_t c_out : {16, 21}) {
      TuningHints blocked;  // (NCX with 16 output channels would otherwise take col_x on AVX-512)
      blocked.batch_block = 1;
      DeconvTester t = T().batch(5).channels(8, c_out).input({4, 4}).kernel({3, 3}).stride({1, 1}).layout(f)
                           .hints(blocked);
      t.Test();
      EXPECT_TRUE(plan_of(t).at("block_over_batch").get<bool>()) << "the case no longer reaches the route";
      T().batch(7).channels(3, c_out).input({3, 2}).kernel({2, 3}).stride({2, 2}).pads({0, 1}, {1, 0}).layout(f)
          .Test();
      T().batch(4).rank(1).channels(5, c_out).input({2}).kernel({4}).stride({3}).output_padding({1}).layout(f)
          .Test();
    }
  for (const char* layout : {"row_buffer", "in_kernel", "scratch", "src_in_place"}) {
    if (std::string(layout) == "in_kernel" && !in_kernel_layout_exists()) continue;
    TuningHints h;
    h.layout = layout;
    T().batch(6).channels(8, 20).input({3, 4}).kernel({3, 3}).stride({2, 1}).hints(h).Test();
  }
}

// kernel == stride, no padding: the x taps fold into the channels (one GEMM per row).
TEST_P(KernelCases, KernelEqualsStrideGemmRoute) {
  const auto expect_gemm = [&](const DeconvTester& t) {
    t.Test();
    EXPECT_EQ(plan_of(t).at("algorithm"), "gemm") << to_json(t.descriptor());
  };
  expect_gemm(T().channels(8, 16).input({5, 6}).kernel({2, 2}).stride({2, 2}).layout(DataFormat::NXC));
  expect_gemm(T().channels(7, 13).input({5, 6}).kernel({3, 3}).stride({3, 3}).layout(DataFormat::NXC));
  expect_gemm(T().batch(3).channels(12, 24).input({4, 4}).kernel({2, 2}).stride({2, 2}).layout(DataFormat::NXC));
  expect_gemm(T().batch(5).channels(8, 16).input({3, 3}).kernel({2, 2}).stride({2, 2}).layout(DataFormat::NXC));
  expect_gemm(T().rank(3).batch(2).channels(6, 10).input({3, 3, 4}).kernel({2, 2, 2}).stride({2, 2, 2})
                  .layout(DataFormat::NXC));
  expect_gemm(T().rank(1).channels(9, 33).input({10}).kernel({4}).stride({4}).layout(DataFormat::NXC));
  TuningHints scratch;
  scratch.layout = "scratch";
  expect_gemm(T().batch(2).channels(8, 16).input({5, 6}).kernel({2, 2}).stride({2, 2}).hints(scratch));
  // The same shapes in NCX through the default path, and with XIO weights.
  T().batch(2).channels(8, 16).input({5, 6}).kernel({2, 2}).stride({2, 2}).Test();
  T().channels(8, 16).input({5, 6}).kernel({2, 2}).stride({2, 2}).weights_format(WeightsFormat::XIO)
      .layout(DataFormat::NXC).Test();
}

// col: one GEMM over all input pixels, then each output sums its taps. Forced on small problems of every
// shape class (it must be exact wherever it is asked for) in every type (16-bit data is widened for the
// GEMM; the sums round once into the type), and chosen by default for few pixels with large weights.
// Channel counts below, at and past a vector, and past the sums' chunk of 8 vectors (AVX2: 70 = 8 x 8 + 6
// lanes), so the masked last vector and a second chunk both run.
TEST_P(KernelCases, ColumnGemm) {
  TuningHints col;
  col.algorithm = "col";
  for (int64_t oc : {16, 70}) T().channels(3, oc).input({2, 3}).kernel({3, 3}).stride({2, 2}).hints(col).Test();
  for (DataFormat f : kFormats)
    for (WeightsFormat w : {WeightsFormat::OIX, WeightsFormat::XIO}) {
      T().channels(5, 7).input({3, 4}).kernel({4, 4}).stride({2, 2}).pads({1, 1}, {1, 1}).layout(f)
          .weights_format(w).hints(col).Test();
      T().batch(2).channels(3, 17).input({2, 5}).kernel({3, 5}).stride({2, 3}).dilation({2, 1})
          .pads({-1, 2}, {0, 1}).output_padding({1, 2}).layout(f).weights_format(w).hints(col).Test();
      T().rank(1).channels(4, 6).input({7}).kernel({5}).stride({1}).pads({2}, {2}).layout(f).hints(col).Test();
      T().rank(3).channels(2, 3).input({2, 2, 3}).kernel({2, 3, 2}).stride({2, 1, 2}).layout(f).hints(col).Test();
    }
  DeconvTester big = T().channels(768, 512).input({2, 3}).kernel({4, 4}).stride({2, 2}).pads({1, 1}, {1, 1});
  big.Test();  // 25 MB of weights for 6 pixels: col by default, but not against bf16 channel pairs
  const bool pairs = dtype() == DType::bf16 && isa() == Isa::avx512_core && cpu_bf16_dot();
  EXPECT_EQ(plan_of(big).at("algorithm") == "col", !pairs);
  Options o = testing::isa_options(isa());
  o.use_cache = false;
  const std::string pin = o.hints.isa;  // (kept as the hints change below)
  o.hints = col;
  o.hints.isa = pin;
  const Kernel k = compile(big.descriptor(), o);
  EXPECT_GT(k.code_size(), 0u);
  TuningHints bad = col;
  bad.ur_w = 2;
  o.hints = bad;
  o.hints.isa = pin;
  EXPECT_THROW(compile(big.descriptor(), o), Error);
  TuningHints tile;  // a tile hint without an algorithm keeps the family that can honour it
  tile.ur_w = 2;
  o.hints = tile;
  o.hints.isa = pin;
  EXPECT_EQ(nlohmann::json::parse(compile(big.descriptor(), o).plan_text()).at("ur_w"), 2);
  o.hints = col;
  o.hints.isa = pin;
  EXPECT_THROW(compile(T().groups(2).channels(4, 4).input({2, 2}).kernel({2, 2}).descriptor(), o), Error);
}

TEST_P(KernelCases, EveryNcxLayoutPath) {
  const char* layouts[] = {"", "row_buffer", "in_kernel", "scratch", "src_in_place"};
  for (const char* layout : layouts) {
    if (std::string(layout) == "in_kernel" && !in_kernel_layout_exists()) continue;
    SCOPED_TRACE(std::string("layout '") + layout + "'");
    TuningHints h;
    h.layout = layout;
    T().channels(6, 20).input({5, 7}).kernel({3, 3}).stride({2, 2}).pads({1, 0}, {0, 1}).hints(h).Test();
    T().batch(2).channels(3, 35).input({4, 9}).kernel({2, 4}).stride({3, 2}).hints(h).Test();
    T().rank(1).channels(5, 17).input({19}).kernel({5}).stride({2}).output_shape({50}).hints(h).Test();
    T().rank(3).channels(4, 9).input({3, 3, 4}).kernel({2, 3, 2}).stride({2, 1, 2}).hints(h).Test();
    T().channels(37, 16).input({6, 8}).kernel({4, 4}).stride({2, 2}).pads({1, 1}, {1, 1}).hints(h).Test();
    h.x_split = 3;  // row parts: each task's buffer covers a piece of a row
    T().channels(4, 40).input({4, 11}).kernel({3, 3}).stride({2, 2}).hints(h).Test();
  }
  // src_in_place reads the caller's planes: no halo columns, no bf16 channel pairs (they need channels
  // adjacent), no depthwise (its vectors run along channels); asked for, each is refused by name.
  TuningHints in_place;
  in_place.layout = "src_in_place";
  DeconvTester t = T().channels(6, 20).input({5, 7}).kernel({3, 3}).stride({2, 2}).hints(in_place);
  EXPECT_EQ(plan_of(t).at("layout"), "ncx_src_in_place");
  EXPECT_EQ(plan_of(t).at("name").get<std::string>().find("_icp"), std::string::npos);  // no pairs
  auto refused = [&](TuningHints h, DeconvTester d, const char* field) {
    d.hints(h);
    try {
      compile(d.descriptor(), d.options());
      ADD_FAILURE() << field << " accepted with layout src_in_place";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  TuningHints halo = in_place;
  halo.x_halo = 1;
  refused(halo, t, "x_halo");
  TuningHints pairs = in_place;
  pairs.ic_pairs = 1;
  refused(pairs, t, "ic_pairs");
  refused(in_place, T().groups(8).channels(8, 8).input({5, 7}).kernel({3, 3}).stride({2, 2}), "src_in_place");
}

// ---- the code-size bound --------------------------------------------------------------------------------

// A huge kernel with a huge stride: 256 phases of 4 taps each. Code must not grow with K or s.
TEST_P(KernelCases, HugeKernelAndStrideCompilesInMilliseconds) {
  DeconvTester t = T().rank(1).channels(4, 8).input({16}).kernel({1024}).stride({256}).use_cache(false);
  Options o = t.options();
  o.use_disk_cache = false;
  const Kernel k = compile(t.descriptor(), o);
  EXPECT_EQ(k.problem().out, V{256 * 15 + 1024});
  EXPECT_GT(k.compile_ms(), 0.0);
  EXPECT_LT(k.compile_ms(), 100.0) << k.name();
  EXPECT_GT(k.code_size(), 0u);
  EXPECT_LT(k.code_size(), size_t{1} << 20) << k.name();
  t.Test();
  t.layout(DataFormat::NXC).Test();
}

// Large strides and kernels on every axis: code size stays bounded regardless.
TEST_P(KernelCases, CodeSizeDoesNotGrowWithKernelOrStride) {
  Options o = testing::isa_options(isa());
  o.use_cache = false;
  o.use_disk_cache = false;
  Descriptor small, large;
  small.src = {1, 8, 6, 6};
  small.weights = {8, 16, 3, 3};
  small.strides = {2, 2};
  large.src = {1, 8, 6, 6};
  large.weights = {8, 16, 64, 64};
  large.strides = {32, 32};
  small.dtype = small.weights_dtype = large.dtype = large.weights_dtype = dtype();
  const Kernel ks = compile(small, o), kl = compile(large, o);
  EXPECT_LT(kl.code_size(), 4 * ks.code_size() + 4096) << ks.name() << " vs " << kl.name();
  EXPECT_LT(kl.compile_ms(), 100.0);
}

// Instantiates the cases of test_kernel_cases_blocks.cpp and test_kernel_cases_along_x.cpp as well.
INSTANTIATE_TEST_SUITE_P(Isa, KernelCases, ::testing::ValuesIn(all_cases()), case_name);

}  // namespace
}  // namespace deconvjit
