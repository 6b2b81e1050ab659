// The plan: kernel names, the register budget of every heuristic plan, hints honoured or rejected with
// InvalidArgument, Plan::to_json. The routes: test_plan_routes.cpp; the schedule: test_schedule.cpp.
#include <gtest/gtest.h>

#include <random>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deconvjit/deconvjit.hpp"
#include "runtime/cpu.hpp"
#include "runtime/plan.hpp"
#include "support/deconv_tester.hpp"
#include "support/plan_helpers.hpp"

namespace deconvjit::detail {
namespace {

using testing::DeconvTester;
using testing::random_descriptor;
using V = std::vector<int64_t>;


std::string join_x(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "x" : "") + std::to_string(v[i]);
  return s;
}


// ---- names ----------------------------------------------------------------------------------------------

TEST(PlanName, IssueExampleNxcStride2Kernel4OnAvx512) {
  const DeconvTester t = DeconvTester().layout(DataFormat::NXC).channels(64, 64).input({16, 16}).kernel({4, 4})
                             .stride({2, 2}).pads({1, 1}, {1, 1});
  const Plan pl = plan_for(t, Isa::avx512_core);
  EXPECT_EQ(pl.name.rfind("deconv_f32_nxc_s2x2_k4x4_", 0), 0u) << pl.name;
  const std::string tail = "_ur" + std::to_string(pl.ur_w) + "x" + std::to_string(pl.oc_vectors) + "__avx512_core";
  ASSERT_GE(pl.name.size(), tail.size());
  EXPECT_EQ(pl.name.substr(pl.name.size() - tail.size()), tail) << pl.name;
  EXPECT_TRUE(std::regex_match(pl.name, std::regex("deconv_f32_nxc_s2x2_k4x4(_[a-z0-9]+)*_ur[0-9]+x[0-9]+__avx512_core")))
      << pl.name;
  const Plan p2 = plan_for(DeconvTester(t).layout(DataFormat::NCX).rank(3).input({4, 4, 4}).kernel({3, 2, 1})
                               .stride({1, 2, 3}).pads({}, {}), Isa::avx2);
  EXPECT_EQ(p2.name.rfind("deconv_f32_ncx_s1x2x3_k3x2x1_", 0), 0u) << p2.name;
  EXPECT_NE(p2.name.find("__avx2"), std::string::npos) << p2.name;
}

TEST(PlanName, NamesFollowThePlanOnRandomProblems) {
  std::mt19937 rng(4242);
  for (int i = 0; i < 400; ++i) {
    const Problem p = resolve(random_descriptor(rng));
    for (Isa isa : kIsas) {
      const Plan pl = make_plan(p, isa, {});
      SCOPED_TRACE(p.canonical + " -> " + pl.name);
      const std::string head = std::string("deconv_f32_") + (p.data_format == DataFormat::NXC ? "nxc" : "ncx") +
                               "_s" + join_x(p.stride) + "_k" + join_x(p.kernel);
      EXPECT_EQ(pl.name.rfind(head, 0), 0u);
      // (under an AVX-512 cap the plan may choose AVX2: runtime/plan_isa.cpp)
      EXPECT_TRUE(pl.isa == isa || (isa == Isa::avx512_core && pl.isa == Isa::avx2));
      const std::string tail = "_ur" + std::to_string(pl.ur_w) + "x" + std::to_string(pl.oc_vectors) + "__" +
                               to_string(pl.isa);
      EXPECT_EQ(pl.name.size() > tail.size() ? pl.name.substr(pl.name.size() - tail.size()) : "", tail);
      const bool direct = pl.algorithm == Algorithm::direct;
      EXPECT_EQ(pl.name.find(std::string("_") + to_string(pl.algorithm) + "_") != std::string::npos, !direct);
      EXPECT_EQ(pl.name.find("_nblk") != std::string::npos, pl.block_over_batch);
    }
  }
}

// ---- register budget and hints --------------------------------------------------------------------------

// Accumulators ur_w * vectors, the weight vectors, and the broadcast registers (2 of 32 on AVX-512, 1 of 16
// on AVX2); the dot family holds ur_w * C_OUT accumulators, C_OUT weight vectors and one input vector.
void expect_fits_registers(const Plan& pl) {
  const int regs = pl.isa == Isa::avx512_core ? 32 : 16;
  EXPECT_GE(pl.ur_w, 1);
  EXPECT_GE(pl.oc_vectors, 1);
  if (pl.algorithm == Algorithm::dot) {
    EXPECT_LE(pl.ur_w * pl.oc_vectors + pl.oc_vectors + 1, regs) << pl.to_json();
    return;
  }
  if (pl.algorithm == Algorithm::gemm_x) {
    // ur_w x rows_per_block input vectors (at most 3) x oc_vectors channels x kernel positions: at most
    // 24 accumulators; the channel blocks cover C_OUT exactly.
    const int64_t positions = pl.axes[0].kernel * pl.axes[1].kernel * pl.axes[2].kernel;
    const int vectors = pl.flat_plane ? pl.ur_w : pl.ur_w * pl.rows_per_block;  // flat: along the plane
    EXPECT_LE(vectors, 3) << pl.to_json();
    EXPECT_LE(vectors * pl.oc_vectors * positions, 24) << pl.to_json();
    EXPECT_EQ((pl.oc_blocks - 1) * pl.main.vectors + pl.last.vectors, pl.dst_channels) << pl.to_json();
    return;
  }
  if (pl.algorithm == Algorithm::col_x) {
    // Accumulator sets x ur_w input vectors x oc_vectors channels x kernel x in registers 0-27, the input
    // vectors (at most 4) above them; the channel blocks cover a group's C_OUT exactly.
    // (AVX2: registers 0-11 and at most 2 vectors)
    EXPECT_LE(pl.ic_unroll * pl.ur_w * pl.oc_vectors * pl.axes[2].kernel, regs == 32 ? 28 : 12) << pl.to_json();
    EXPECT_LE(pl.ur_w, regs == 32 ? 4 : 2) << pl.to_json();
    EXPECT_EQ((pl.oc_blocks - 1) * pl.main.vectors + pl.last.vectors, pl.oc_per_group) << pl.to_json();
    return;
  }
  if (pl.algorithm == Algorithm::depthwise_x) {
    // ur_w x vectors of oc_vectors channels, a weight vector per channel, the permutation index, two
    // temporaries, and on AVX2 a lane mask. Calls cover the channels in whole register blocks.
    EXPECT_LE(pl.ur_w * pl.oc_vectors + pl.oc_vectors + (regs == 32 ? 3 : 4), regs) << pl.to_json();
    EXPECT_EQ(pl.channels_per_call % pl.oc_vectors, 0) << pl.to_json();
    EXPECT_GE(pl.channels_per_call * pl.oc_blocks, pl.dst_channels) << pl.to_json();
    EXPECT_LT(pl.channels_per_call * (pl.oc_blocks - 1), pl.dst_channels) << pl.to_json();
    return;
  }
  // Accumulators, the weight vectors kept in registers (the FMAs read the others: AVX2 direct and gemm
  // only) and the broadcasts.
  const int bcast = pl.isa == Isa::avx512_core ? 2 : 1;
  const int weights = weights_in_registers(pl, pl.oc_vectors);
  if (!weight_regs_possible(pl)) EXPECT_EQ(weights, pl.oc_vectors) << pl.to_json();
  EXPECT_GE(weights, 1);
  EXPECT_LE(pl.ur_w * pl.oc_vectors + weights + bcast, regs) << pl.to_json();
  EXPECT_GE(pl.last.vectors, 1);
  EXPECT_LE(pl.last.vectors, pl.oc_vectors);
  // The blocks cover the vector dimension exactly: (oc_blocks - 1) full blocks and the last one.
  const int64_t vectors = (pl.oc_blocks - 1) * pl.main.vectors + pl.last.vectors;
  EXPECT_EQ(vectors, (pl.oc_per_group + pl.lanes - 1) / pl.lanes) << pl.to_json();
  EXPECT_EQ(pl.last.mask_lanes, pl.oc_per_group % pl.lanes);
}

TEST(PlanHeuristic, EveryPlanFitsTheRegisterFile) {
  std::mt19937 rng(777);
  testing::RandomLimits big;
  big.max_macs = 2000000;
  big.max_dst_elements = 1000000;
  for (int i = 0; i < 600; ++i) {
    const Problem p = resolve(random_descriptor(rng, i % 2 ? big : testing::RandomLimits{}));
    for (Isa isa : kIsas) {
      SCOPED_TRACE(p.canonical + " on " + to_string(isa));
      expect_fits_registers(make_plan(p, isa, {}));
    }
  }
  // Wide channel counts, where the widest tiles are chosen.
  for (int64_t c_out : {16, 48, 64, 96, 128, 256, 1000})
    for (Isa isa : kIsas)
      expect_fits_registers(plan_for(DeconvTester().channels(32, c_out).input({8, 40}).stride({2, 2}), isa));
}

// dot_x at x stride 1 (no permute) with several output channels: up to 9 taps per output (a 3x3 kernel),
// not a 7x7 one, which dot's copy of the source repays (holdout s197 ho14: 1.61x in dot on AVX2).
TEST(PlanHeuristic, DotXAtStrideOneStopsAtNineTapsPerOutput) {
  auto layer = [](int k, int pad) {
    return resolve(descriptor_from_json(R"({"src":[1,24,95,95],"weights":[24,4,)" + std::to_string(k) + "," +
                                        std::to_string(k) + R"(],"strides":[1,1],"pads_begin":[)" +
                                        std::to_string(pad) + "," + std::to_string(pad) + R"(],"pads_end":[)" +
                                        std::to_string(pad) + "," + std::to_string(pad) + "]}"));
  };
  for (Isa isa : {Isa::avx2, Isa::avx512_core}) {
    EXPECT_FALSE(detail::dot_x_preferred(layer(7, 3), isa)) << to_string(isa);
    EXPECT_NE(detail::make_plan(layer(7, 3), isa, {}).algorithm, detail::Algorithm::dot_x) << to_string(isa);
  }
  EXPECT_TRUE(detail::dot_x_preferred(layer(3, 1), Isa::avx512_core));
}

// A 1x1 input whose pads crop 3 of every 4 taps: col would compute 4 products for each one used, and a
// halo would make 2 of 3 source columns zeros; the direct family without a halo runs it. The layer col
// was made for (sbl_deconv1: 8x6 pixels, most taps used) keeps col.
TEST(PlanHeuristic, TinyCroppedInputsTakeNeitherColNorHalo) {
  const Problem tiny = resolve(descriptor_from_json(
      R"({"src":[1,512,1,1],"weights":[512,512,4,4],"strides":[2,2],"pads_begin":[1,1],"pads_end":[1,1]})"));
  EXPECT_FALSE(detail::col_preferred(tiny));
  const detail::Plan pl = detail::make_plan(tiny, Isa::avx512_core, {});
  EXPECT_EQ(pl.algorithm, detail::Algorithm::direct);
  EXPECT_FALSE(pl.has_halo());
  const Problem sbl = resolve(descriptor_from_json(
      R"({"src":[1,2048,8,6],"weights":[2048,256,4,4],"strides":[2,2],"pads_begin":[1,1],"pads_end":[1,1]})"));
  EXPECT_TRUE(detail::col_preferred(sbl));
}

// col runs in every type with sums in f32 (its GEMM reads 16-bit data widened). By default for big weights
// over few pixels in every type but bf16 where channel pairs run; for lanes filled by taps x channels in f32
// only (16-bit sources of many pixels are cheaper to read in the row families); never for sums in halves.
TEST(PlanHeuristic, ColByTypeAndAccumulation) {
  const char* const sbl =
      R"({"src":[1,2048,8,6],"weights":[2048,256,4,4],"strides":[2,2],"pads_begin":[1,1],"pads_end":[1,1])";
  const char* const lanes =  // keypointrcnn_b8: 17 outputs, 17 x 16 taps fill lanes (NXC)
      R"({"src":[8,14,14,512],"weights":[512,17,4,4],"strides":[2,2],"pads_begin":[1,1],"pads_end":[1,1],"data_format":"NXC")";
  auto plan = [](const char* layer, const std::string& types, const TuningHints& h, Isa isa = Isa::avx512_core) {
    return detail::make_plan(resolve(descriptor_from_json(layer + types + "}")), isa, h);
  };
  TuningHints col;
  col.algorithm = "col";
  const auto is_col = [](const Plan& pl) { return pl.algorithm == detail::Algorithm::col; };
  EXPECT_TRUE(is_col(plan(sbl, "", {})));
  EXPECT_TRUE(is_col(plan(sbl, R"(,"dtype":"f16")", {})));
  EXPECT_TRUE(is_col(plan(sbl, R"(,"dtype":"f16")", {}, Isa::avx2)));
  EXPECT_TRUE(is_col(plan(sbl, R"(,"dtype":"bf16")", {}, Isa::avx2)));
  EXPECT_EQ(is_col(plan(sbl, R"(,"dtype":"bf16")", {})), !detail::cpu_has_avx512_bf16());  // pairs
  EXPECT_TRUE(is_col(plan(lanes, "", {})));
  for (const char* t : {R"(,"dtype":"f16")", R"(,"dtype":"bf16")"}) {
    EXPECT_FALSE(is_col(plan(lanes, t, {}))) << t;
    EXPECT_TRUE(is_col(plan(lanes, t, col))) << t;
    EXPECT_TRUE(is_col(plan(sbl, t, col))) << t;
  }
  EXPECT_FALSE(is_col(plan(sbl, R"(,"dtype":"f16","accumulation":"f16")", {})));
  EXPECT_THROW(plan(sbl, R"(,"dtype":"f16","accumulation":"f16")", col), Error);
}

// Weights past 24 MB: col up to 128 input pixels (sbl_r50_384_deconv1, 12x9 = 108, measured 1.27x), the
// row families from there on (flownets_deconv4, 12x16 = 192, where col measured 0.93x); and not over 4+
// images of rows short enough for the row families to block over images (sbl_r50_256_deconv1_b16: 0.86x).
TEST(PlanHeuristic, ColForBigWeightsOverFewPixels) {
  auto layer = [](int h, int w, int c_in, int batch = 1) {
    return resolve(descriptor_from_json(R"({"src":[)" + std::to_string(batch) + "," + std::to_string(c_in) + "," +
                                        std::to_string(h) + "," +
                                        std::to_string(w) +
                                        R"(],"weights":[)" + std::to_string(c_in) +
                                        R"(,256,4,4],"strides":[2,2],"pads_begin":[1,1],"pads_end":[1,1]})"));
  };
  EXPECT_TRUE(detail::col_preferred(layer(12, 9, 2048)));
  EXPECT_TRUE(detail::col_preferred(layer(16, 8, 2048)));   // 128 pixels
  EXPECT_FALSE(detail::col_preferred(layer(17, 8, 2048)));  // 136
  EXPECT_FALSE(detail::col_preferred(layer(12, 16, 1026)));
  EXPECT_FALSE(detail::col_preferred(layer(12, 9, 512)));   // 8 MB of weights
  EXPECT_FALSE(detail::col_preferred(layer(12, 9, 1280)));  // 21 MB: the row families keep them in L3
  EXPECT_TRUE(detail::col_preferred(layer(8, 6, 2048, 3)));
  EXPECT_FALSE(detail::col_preferred(layer(8, 6, 2048, 4)));   // 12 outputs per row: blocks over images
  EXPECT_TRUE(detail::col_preferred(layer(4, 12, 2048, 16)));  // 24 outputs per row: along x
}

// Output channels that leave vectors empty where col's taps x channels fill them, over 256+ input channels:
// on NXC data from a fifth better (21 channels fill 21 of 32 lanes, 21 x 10 taps 210 of 224), on NCX
// from half again better (col_x fills vectors along x there).
TEST(PlanHeuristic, ColWhereTapsTimesChannelsFillLanes) {
  auto layer = [](int64_t c_in, int64_t c_out, int64_t k, const std::string& layout) {
    const std::string c = std::to_string(c_in), src = layout == "NXC" ? "[1,600," + c + "]" : "[1," + c + ",600]";
    return resolve(descriptor_from_json(
        R"({"src":)" + src + R"(,"weights":[)" + c + "," +
        std::to_string(c_out) + "," + std::to_string(k) + R"(],"strides":[5],"pads_begin":[3],"pads_end":[3],)" +
        R"("data_format":")" + layout + R"("})"));
  };
  EXPECT_TRUE(detail::col_preferred(layer(512, 21, 10, "NXC")));   // 1.43x the lanes
  EXPECT_FALSE(detail::col_preferred(layer(512, 21, 10, "NCX")));
  EXPECT_TRUE(detail::col_preferred(layer(512, 21, 16, "NCX")));   // 336 of 336 lanes: 1.52x
  EXPECT_FALSE(detail::col_preferred(layer(512, 32, 10, "NXC")));  // channels fill their vectors
  EXPECT_FALSE(detail::col_preferred(layer(128, 21, 10, "NXC")));  // a short reduction
  EXPECT_FALSE(detail::col_preferred(layer(512, 4, 10, "NXC")));   // the dot family's
  // AVX2 counts its own 8 lanes: 21 channels fill 21 of 24 already; 17 fill 17 of 24, 17 x 16 taps all.
  EXPECT_FALSE(detail::col_preferred(layer(512, 21, 10, "NXC"), Isa::avx2));
  EXPECT_TRUE(detail::col_preferred(layer(512, 17, 16, "NXC"), Isa::avx2));
  // Where gemm applies to NXC data its folded x phases fill lanes too (8 channels x a stride of 2: 16).
  auto folded = [](const std::string& layout) {
    const std::string src = layout == "NXC" ? "[1,600,320]" : "[1,320,600]";
    return resolve(descriptor_from_json(R"({"src":)" + src + R"(,"weights":[320,8,2],"strides":[2],"data_format":")" +
                                        layout + R"("})"));
  };
  EXPECT_FALSE(detail::col_preferred(folded("NXC")));
  EXPECT_FALSE(detail::col_preferred(folded("NXC"), Isa::avx2));
  EXPECT_TRUE(detail::col_preferred(folded("NCX")));  // 8 of 16 lanes, 16 of 16 in col (2x)
}

// bf16 channel pairs: the dot family's shape with at most 12 input channels per group (6 of its 16 pair
// lanes) takes the direct family's pairs from 3 output channels per group on; f32, AVX2 (no pairs), 16
// input channels, two output channels, or pairs turned off keep dot.
TEST(PlanHeuristic, FewInputChannelsInBf16PairsTakeTheDirectFamily) {
  auto layer = [](int64_t groups, int64_t ci, int64_t co, DType t) {
    return DeconvTester().layout(DataFormat::NXC).groups(groups).channels(groups * ci, groups * co).dtype(t)
        .input({6, 40}).kernel({4, 4}).stride({2, 2}).pads({1, 1}, {1, 1});
  };
  const Algorithm pairs_family = detail::cpu_has_avx512_bf16() ? Algorithm::direct : Algorithm::dot;
  EXPECT_EQ(plan_for(layer(1, 12, 3, DType::bf16), Isa::avx512_core).algorithm, pairs_family);
  EXPECT_EQ(plan_for(layer(8, 8, 4, DType::bf16), Isa::avx512_core).algorithm, pairs_family);
  EXPECT_EQ(plan_for(layer(1, 12, 3, DType::f32), Isa::avx512_core).algorithm, Algorithm::dot);
  EXPECT_EQ(plan_for(layer(1, 12, 3, DType::bf16), Isa::avx2).algorithm, Algorithm::dot);
  EXPECT_EQ(plan_for(layer(1, 16, 3, DType::bf16), Isa::avx512_core).algorithm, Algorithm::dot);
  EXPECT_EQ(plan_for(layer(1, 12, 2, DType::bf16), Isa::avx512_core).algorithm, Algorithm::dot);
  TuningHints no_pairs;
  no_pairs.ic_pairs = 0;
  EXPECT_EQ(plan_for(layer(1, 12, 3, DType::bf16), Isa::avx512_core, no_pairs).algorithm, Algorithm::dot);
}

// depthwise_x over outputs of 12 MB or more: calls of the fewest whole register blocks that write 512
// elements of output rows (fewer write streams), where the default gave a call 8+ channels; smaller
// outputs, and calls of fewer channels, keep theirs.
TEST(PlanHeuristic, DepthwiseXCallsFewChannelsOverBigOutputs) {
  auto dw = [](int64_t n, int64_t c, V in, DType t = DType::f32) {
    return DeconvTester().dtype(t).layout(DataFormat::NCX).batch(n).groups(c).channels(c, c).input(std::move(in))
        .kernel({3, 3}).stride({2, 2}).pads({1, 1}, {1, 1});
  };
  auto expected = [](int64_t row, int cb) { return (512 / row + 1 + cb - 1) / cb * cb; };  // (512 % row != 0)
  for (Isa isa : {Isa::avx512_core, Isa::avx2}) {
    SCOPED_TRACE(to_string(isa));
    const Plan big = plan_for(dw(16, 64, {108, 108}), isa);  // 189 MB over rows of 215: 3 channels
    ASSERT_EQ(big.algorithm, Algorithm::depthwise_x);
    EXPECT_EQ(big.channels_per_call, expected(215, big.oc_vectors));
    const Plan half = plan_for(dw(16, 64, {108, 108}, DType::f16), isa);  // 95 MB: still 3
    EXPECT_EQ(half.channels_per_call, expected(215, half.oc_vectors));
    const Plan small = plan_for(dw(1, 64, {60, 60}), isa);  // 3.6 MB over rows of 119
    ASSERT_EQ(small.algorithm, Algorithm::depthwise_x);
    EXPECT_GT(small.channels_per_call, expected(119, small.oc_vectors));
    TuningHints all;
    all.channels_per_call = 64;
    EXPECT_EQ(plan_for(dw(16, 64, {108, 108}), isa, all).channels_per_call, 64);
  }
}

// AVX2 tiles: pairs of channel vectors, but blocks of three where the channel vectors are an odd multiple of
// 3 (24 and 72 channels), which pairs would leave a one-vector tail block; AVX-512 keeps its own rule.
TEST(PlanHeuristic, Avx2TakesThreeVectorsForOddMultiplesOfThree) {
  auto layer = [](int64_t c_out) {
    return DeconvTester().layout(DataFormat::NXC).channels(32, c_out).input({6, 40}).kernel({3, 3})
        .stride({2, 2}).pads({1, 1}, {1, 1});
  };
  EXPECT_EQ(plan_for(layer(24), Isa::avx2).oc_vectors, 3);
  EXPECT_EQ(plan_for(layer(72), Isa::avx2).oc_vectors, 3);
  EXPECT_EQ(plan_for(layer(16), Isa::avx2).oc_vectors, 2);
  EXPECT_EQ(plan_for(layer(48), Isa::avx2).oc_vectors, 2);  // 6 vectors: pairs, no tail
  EXPECT_EQ(plan_for(layer(64), Isa::avx512_core).oc_vectors, 4);
}

// f16 on AVX2: the source widened to f32 once where each element feeds 128+ FLOPs (2 x output channels x
// taps), and then takes f32's tiles (the hybrid 3 x 4 one included), else blocks of four vectors (2 pixels)
// share each converted broadcast where the channels fill whole blocks of four.
TEST(PlanHeuristic, F16OnAvx2WidensOrTakesFourVectorBlocks) {
  auto layer = [](int64_t c_in, int64_t c_out, DType t, int64_t k = 3) {
    return DeconvTester().dtype(t).layout(DataFormat::NXC).channels(c_in, c_out).input({6, 40}).kernel({k, k})
        .stride({2, 2}).pads({1, 1}, {1, 1});
  };
  const Plan widened = plan_for(layer(64, 32, DType::f16), Isa::avx2);  // 2 x 32 x 9 = 576 FLOPs per element
  EXPECT_TRUE(widened.widen_src);
  EXPECT_EQ(widened.oc_vectors, 4);  // f32's hybrid tile: 64 x 4 taps x 128 bytes = 32 KB of weights
  EXPECT_EQ(widened.weight_regs, 3);
  EXPECT_EQ(plan_for(layer(16, 32, DType::f16), Isa::avx2).weight_regs, 2);  // widened, 8 KB: f32's 6 x 2
  TuningHints narrow;  // not widened: four-vector blocks
  narrow.widen_src = 0;
  const Plan wide = plan_for(layer(64, 32, DType::f16), Isa::avx2, narrow);
  EXPECT_FALSE(wide.widen_src);
  EXPECT_EQ(wide.oc_vectors, 4);
  EXPECT_EQ(wide.ur_w, 2);
  EXPECT_EQ(plan_for(layer(64, 40, DType::f16), Isa::avx2, narrow).oc_vectors, 2);  // 5 vectors
  const Plan thin = plan_for(layer(64, 32, DType::f16, 1), Isa::avx2);  // 64 FLOPs: not widened
  EXPECT_FALSE(thin.widen_src);
  EXPECT_EQ(thin.oc_vectors, 4);
  EXPECT_EQ(plan_for(layer(16, 32, DType::f32), Isa::avx2).oc_vectors, 2);    // (8 KB: no hybrid tile)
  EXPECT_EQ(plan_for(layer(16, 32, DType::bf16), Isa::avx2).oc_vectors, 2);
  EXPECT_EQ(plan_for(layer(64, 32, DType::f16), Isa::avx512_core).oc_vectors, 2);
}

// f32, bf16 and widened f16 on AVX2: 3 pixels x 4 vectors with the fourth weight vector read by the FMAs,
// where channels fill whole blocks of four and a block's weights for a phase (products per output x 128
// bytes) are 16-512 KB.
TEST(PlanHeuristic, Avx2F32AndBf16TakeTheHybridTile) {
  auto layer = [](int64_t ic, int64_t oc, int64_t k) {
    return DeconvTester().channels(ic, oc).input({16, 40}).kernel({k, k}).stride({2, 2}).pads({1, 1}, {1, 1})
        .layout(DataFormat::NXC);
  };
  const Plan hybrid = plan_for(layer(64, 64, 3), Isa::avx2);  // 64 x 4 taps x 128 bytes = 32 KB
  EXPECT_EQ(hybrid.oc_vectors, 4);
  EXPECT_EQ(hybrid.weight_regs, 3);
  EXPECT_EQ(hybrid.ur_w, 3);
  EXPECT_NE(hybrid.name.find("_wr3_ur3x4"), std::string::npos) << hybrid.name;
  EXPECT_EQ(plan_for(layer(16, 64, 3), Isa::avx2).weight_regs, 2);    // 8 KB: short sums, 6 x 2
  EXPECT_EQ(plan_for(layer(32, 64, 3), Isa::avx2).weight_regs, 3);    // 16 KB
  EXPECT_EQ(plan_for(layer(1000, 64, 3), Isa::avx2).weight_regs, 3);  // 500 KB
  EXPECT_EQ(plan_for(layer(1024, 64, 3), Isa::avx2).weight_regs, 2);  // 512 KB: from beyond L2
  EXPECT_EQ(plan_for(layer(64, 40, 3), Isa::avx2).weight_regs, 2);    // 5 vectors: a tail block
  EXPECT_EQ(plan_for(layer(64, 64, 3).dtype(DType::bf16), Isa::avx2).weight_regs, 3);
  EXPECT_EQ(plan_for(layer(64, 64, 3).dtype(DType::f16), Isa::avx2).weight_regs, 3);  // widened
  TuningHints narrow;  // f16 not widened: no hybrid tile
  narrow.widen_src = 0;
  EXPECT_EQ(plan_for(layer(64, 64, 3).dtype(DType::f16), Isa::avx2, narrow).weight_regs, 4);
  EXPECT_EQ(plan_for(layer(64, 64, 3).batch(8).input({2, 2}), Isa::avx2).weight_regs, 2);  // across images
  EXPECT_EQ(plan_for(layer(64, 64, 3), Isa::avx512_core).weight_regs, 4);
  TuningHints pixels;  // a tile hint keeps the tile it named before the hybrid existed
  pixels.ur_w = 5;
  const Plan hinted = plan_for(layer(64, 64, 3), Isa::avx2, pixels);
  EXPECT_EQ(hinted.oc_vectors, 2);
  EXPECT_EQ(hinted.weight_regs, 2);
}

TEST(PlanHints, HonouredOrRejected) {
  std::mt19937 rng(99);
  int accepted = 0, rejected = 0;
  for (int i = 0; i < 600; ++i) {
    const Problem p = resolve(random_descriptor(rng));
    const Isa isa = kIsas[i % 2];
    TuningHints h;
    h.oc_vectors = std::uniform_int_distribution<int>(0, 16)(rng);
    h.ur_w = std::uniform_int_distribution<int>(0, 30)(rng);
    h.ic_unroll = std::uniform_int_distribution<int>(0, 70)(rng);
    h.x_split = std::uniform_int_distribution<int>(0, 9)(rng);
    if (i % 3 == 0) h.weight_regs = std::uniform_int_distribution<int>(0, 5)(rng);
    SCOPED_TRACE(p.canonical + " ur_w " + std::to_string(h.ur_w) + " oc_vectors " + std::to_string(h.oc_vectors) +
                 " ic_unroll " + std::to_string(h.ic_unroll) + " x_split " + std::to_string(h.x_split) +
                 " weight_regs " + std::to_string(h.weight_regs));
    Plan pl;
    try {
      pl = make_plan(p, isa, h);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), Error::Kind::InvalidArgument) << e.what();
      ++rejected;
      continue;
    }
    ++accepted;
    expect_fits_registers(pl);  // a hint never buys a plan outside the register file
    if (h.ur_w) EXPECT_EQ(pl.ur_w, h.ur_w);
    if (h.oc_vectors) EXPECT_EQ(pl.oc_vectors, h.oc_vectors);
    if (h.x_split) EXPECT_EQ(pl.x_split, h.x_split);
    if (h.weight_regs) EXPECT_EQ(pl.weight_regs, h.weight_regs);
    if (h.ic_unroll && pl.algorithm != Algorithm::dot) EXPECT_EQ(pl.ic_unroll, h.ic_unroll);
  }
  EXPECT_GT(accepted, 30);  // both outcomes occur (50 of 600 since depthwise_x, which refuses most of these
                            // hints, takes any x stride up to the lanes)
  EXPECT_GT(rejected, 50);
}

TEST(PlanHints, OutOfRangeHintsAreRejected) {
  const Problem p = resolve(DeconvTester().channels(16, 40).input({6, 7}).stride({2, 2}).descriptor());
  const Problem nxc = resolve(DeconvTester().channels(16, 40).input({6, 7}).stride({2, 2})
                                  .layout(DataFormat::NXC).descriptor());
  TuningHints h;
  h.oc_vectors = 32;
  expect_rejected(p, Isa::avx512_core, h, "oc_vectors 32");
  h.oc_vectors = 2;
  h.ur_w = 7;  // AVX2: (16 - 2 - 1) / 2 = 6 at most
  expect_rejected(p, Isa::avx2, h, "ur_w 7 x 2 vectors on AVX2");
  h.ur_w = 6;
  EXPECT_EQ(make_plan(p, Isa::avx2, h).ur_w, 6);
  h.ur_w = 15;  // AVX-512: (32 - 2 - 2) / 2 = 14 at most
  expect_rejected(p, Isa::avx512_core, h, "ur_w 15 x 2 vectors on AVX-512");
  h.ur_w = 14;
  EXPECT_EQ(make_plan(p, Isa::avx512_core, h).ur_w, 14);
  // weight_regs: AVX2 direct and gemm only, at most the block's vectors; the registers it frees widen the
  // block (4 vectors: 2 pixels with all weights kept, 3 with one read by the FMAs).
  TuningHints wr;
  wr.algorithm = "direct";
  wr.oc_vectors = 4;
  wr.weight_regs = 3;
  wr.ur_w = 3;
  EXPECT_EQ(make_plan(nxc, Isa::avx2, wr).weight_regs, 3);
  expect_rejected(nxc, Isa::avx512_core, wr, "weight_regs on AVX-512", "weight_regs");
  wr.ur_w = 4;
  expect_rejected(nxc, Isa::avx2, wr, "ur_w 4 x 4 vectors next to 3 weight vectors", "ur_w 4");
  wr.ur_w = 0;
  wr.weight_regs = 5;
  expect_rejected(nxc, Isa::avx2, wr, "weight_regs 5 of 4 vectors", "weight_regs 5");
  wr.weight_regs = 4;
  EXPECT_EQ(make_plan(nxc, Isa::avx2, wr).ur_w, 2);
  const Problem dw = resolve(DeconvTester().groups(32).channels(32, 32).input({6, 7}).stride({2, 2})
                                 .layout(DataFormat::NXC).descriptor());
  TuningHints dw_wr;
  dw_wr.weight_regs = 1;
  expect_rejected(dw, Isa::avx2, dw_wr, "weight_regs on the depthwise family", "weight_regs");

  TuningHints bad;
  bad.ic_unroll = 65;
  expect_rejected(p, Isa::avx2, bad, "ic_unroll 65");
  bad = {};
  bad.x_split = 5000;
  expect_rejected(p, Isa::avx2, bad, "x_split 5000");
  bad = {};
  bad.algorithm = "winograd";
  expect_rejected(p, Isa::avx2, bad, "algorithm winograd");
  bad = {};
  bad.algorithm = "depthwise";
  expect_rejected(p, Isa::avx2, bad, "depthwise on a dense problem");
  bad = {};
  bad.algorithm = "gemm";
  expect_rejected(p, Isa::avx2, bad, "gemm with K=3, s=2 and the row buffer");
  bad = {};
  bad.layout = "bogus";
  expect_rejected(p, Isa::avx512_core, bad, "layout bogus");
  bad.layout = "in_kernel";
  expect_rejected(p, Isa::avx2, bad, "in_kernel on AVX2");
  bad.layout = "scratch";
  expect_rejected(nxc, Isa::avx2, bad, "an NCX layout for NXC data");
}

// The dot family (few output channels) once ignored ic_block and ic_unroll silently; an autotuner would
// have believed it measured them. Every hint must be honoured or rejected with InvalidArgument.
TEST(PlanHints, DotFamilyHonoursOrRejectsEveryHint) {
  const Problem p = resolve(DeconvTester().layout(DataFormat::NXC).channels(16, 2).input({6, 6}).stride({2, 2})
                                .descriptor());
  for (Isa isa : kIsas) {
    ASSERT_EQ(make_plan(p, isa, {}).algorithm, Algorithm::dot) << "the repro no longer reaches the dot family";
    TuningHints h;
    h.ic_block = 8;
    try {
      EXPECT_EQ(make_plan(p, isa, h).ic_block, 8) << "ic_block=8 was neither honoured nor rejected";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), Error::Kind::InvalidArgument) << e.what();
    }
    h = {};
    h.ic_unroll = 4;
    try {
      EXPECT_EQ(make_plan(p, isa, h).ic_unroll, 4) << "ic_unroll=4 was neither honoured nor rejected";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), Error::Kind::InvalidArgument) << e.what();
    }
  }
}

// A block's pixels each read a line at the same channel offset; where they are a multiple of 2 KiB apart
// those lines share one or two L1 sets, and a block holds no more of them per set than 8 ways keep (16
// for f16 widened in groups).
TEST(PlanHeuristic, BlocksKeepTheirSourceLinesWithinEightL1Ways) {
  const DeconvTester base = DeconvTester().layout(DataFormat::NXC).input({28, 28}).kernel({4, 4}).stride({2, 2})
                                .pads({1, 1}, {1, 1});
  auto ur = [](const DeconvTester& t, Isa isa = Isa::avx512_core) { return plan_for(t, isa).ur_w; };
  EXPECT_EQ(ur(DeconvTester(base).channels(512, 15)), 14);  // 2 KiB apart: 2 sets, 7 lines each
  EXPECT_EQ(ur(DeconvTester(base).channels(1024, 15)), 7);  // 4 KiB: one set
  TuningHints direct;
  direct.algorithm = "direct";
  EXPECT_EQ(plan_for(DeconvTester(base).channels(1024, 8), Isa::avx2, direct).ur_w, 7);  // 12 would fit
  EXPECT_EQ(ur(DeconvTester(base).channels(500, 15)), 28);  // spread over the sets
  EXPECT_EQ(ur(DeconvTester(base).channels(512, 15).dtype(DType::bf16)), 28);  // 1 KiB: 4 sets
  TuningHints row;  // (one channel each way defaults to depthwise_x, vectors along x)
  row.algorithm = "direct";
  EXPECT_EQ(plan_for(DeconvTester(base).channels(1, 1), Isa::avx512_core, row).ur_w, 28);  // pixels in one line
  // f16 widening a pixel's channels in groups reads each line a quarter as often: 16 lines per set.
  EXPECT_EQ(ur(DeconvTester(base).channels(1024, 15).dtype(DType::f16)), 28);  // 2 KiB: 14 per set
  EXPECT_EQ(ur(DeconvTester(base).channels(2048, 15).dtype(DType::f16)), 14);  // 4 KiB: one set
  TuningHints h;
  h.ur_w = 28;
  EXPECT_EQ(plan_for(DeconvTester(base).channels(1024, 15), Isa::avx512_core, h).ur_w, 28);
}

// Narrow direct blocks keep 8 chains as the unroll and the registers allow; wide ones one set.
TEST(PlanHeuristic, NarrowBlocksGetAccumulatorSets) {
  const DeconvTester t = DeconvTester().layout(DataFormat::NXC).channels(64, 15).input({8, 8}).kernel({3, 3});
  TuningHints h;
  h.algorithm = "direct";
  h.ic_unroll = 4;
  const Plan a = plan_for(t, Isa::avx512_core, h);
  ASSERT_EQ(a.acc_chains, 8);
  EXPECT_EQ(accumulator_sets(a, 1, 1), 4);  // the unroll caps it
  EXPECT_EQ(accumulator_sets(a, 3, 1), 3);
  EXPECT_EQ(accumulator_sets(a, 4, 2), 1);
  EXPECT_EQ(accumulator_sets(a, 14, 1), 1);
  h.ic_unroll = 8;
  const Plan b = plan_for(t, Isa::avx512_core, h);
  EXPECT_EQ(accumulator_sets(b, 1, 1), 8);
  const Plan c = plan_for(t, Isa::avx2, h);
  EXPECT_EQ(accumulator_sets(c, 1, 1), 8);  // 8 + a weight + a broadcast of 16 registers
  EXPECT_EQ(accumulator_sets(c, 1, 4), 2);  // 8 + 4 + 1
  EXPECT_EQ(accumulator_sets(c, 1, 5), 2);  // 10 + 5 + 1
  EXPECT_EQ(accumulator_sets(c, 1, 6), 1);  // 12 + 6 + 1 would not fit
  h.ic_unroll = 1;
  EXPECT_EQ(accumulator_sets(plan_for(t, Isa::avx512_core, h), 1, 1), 1);  // no unrolled channels to cycle
  TuningHints dw;
  dw.algorithm = "depthwise";
  EXPECT_EQ(plan_for(DeconvTester(t).groups(16).channels(16, 16), Isa::avx512_core, dw).acc_chains, 1);
}

// Zero columns merge the narrow runs of border pixels into whole blocks where those runs hold 8%+ of the
// FMAs, the zeros add no more FMAs than the data has and the arithmetic per source element pays for the copy.
TEST(PlanHeuristic, HaloMergesNarrowBorderRuns) {
  auto halo = [](const DeconvTester& t) { return plan_for(t, Isa::avx512_core).has_halo(); };
  const DeconvTester k7 = DeconvTester().layout(DataFormat::NXC).channels(80, 40).input({7, 7}).kernel({7, 7})
                              .pads({3, 3}, {3, 3});
  EXPECT_TRUE(halo(k7));                                     // every pixel a border pixel
  EXPECT_TRUE(halo(DeconvTester(k7).input({14, 14})));       // 6 of 14
  // 1176 FLOPs per source element: a halo small next to the row alone does not pay, merging runs does.
  EXPECT_TRUE(halo(DeconvTester(k7).channels(80, 12)));
  EXPECT_FALSE(halo(DeconvTester(k7).channels(80, 12).input({7, 200})));  // 6 of 200: blocks stay whole
  EXPECT_FALSE(halo(DeconvTester(k7).channels(80, 2)));      // 196 FLOPs per source element
  EXPECT_FALSE(halo(DeconvTester(k7).input({1, 1})));        // 6 of 7 taps on zeros
  // Rows of 4 under the 7 taps: 16 FMAs on data, 12 on zeros (holdout s71 ho22); of 3: 9 and 12.
  EXPECT_TRUE(halo(DeconvTester(k7).channels(512, 24).input({9, 4})));
  EXPECT_FALSE(halo(DeconvTester(k7).channels(160, 19).input({7, 3})));
  EXPECT_FALSE(halo(DeconvTester(k7).batch(8).input({4, 4})));  // blocks across images
  // Border runs of one tap per pixel (4 taps at stride 2, no pads) cost little without it.
  TuningHints direct;
  direct.algorithm = "direct";
  EXPECT_FALSE(plan_for(DeconvTester().layout(DataFormat::NXC).channels(33, 33).input({8, 8}).kernel({4, 4})
                            .stride({2, 2}), Isa::avx512_core, direct).has_halo());
}

// A halo small next to the row is taken on 2048+ FLOPs per source element only where it merges a border run
// of 1-3 pixels: a 3x3 kernel at dilation 4 leaves runs of 4 border pixels, which the zeros would not merge
// (they would add 10% of FMAs on zeros to a 28-pixel row); at dilation 2 the runs are 2 pixels.
TEST(PlanHeuristic, HaloOnlyWhereItMergesShortBorderRuns) {
  auto halo = [](int64_t dilation) {
    const DeconvTester t = DeconvTester().layout(DataFormat::NXC).channels(256, 256).input({28, 28}).kernel({3, 3})
                               .dilation({dilation, dilation}).pads({dilation, dilation}, {dilation, dilation});
    return plan_for(t, Isa::avx512_core).has_halo();
  };
  EXPECT_TRUE(halo(1));
  EXPECT_TRUE(halo(2));
  EXPECT_FALSE(halo(4));
  EXPECT_FALSE(halo(8));
}

TEST(PlanJson, ParsesAndAgreesWithThePlan) {
  std::mt19937 rng(5);
  for (int i = 0; i < 100; ++i) {
    const Plan pl = make_plan(resolve(random_descriptor(rng)), kIsas[i % 2], {});
    nlohmann::json j;
    ASSERT_NO_THROW(j = nlohmann::json::parse(pl.to_json())) << pl.to_json();
    EXPECT_EQ(j.at("name"), pl.name);
    EXPECT_EQ(j.at("isa"), to_string(pl.isa));
    EXPECT_EQ(j.at("algorithm"), to_string(pl.algorithm));
    EXPECT_EQ(j.at("layout"), to_string(pl.layout));
    EXPECT_EQ(j.at("ur_w"), pl.ur_w);
    EXPECT_EQ(j.at("oc_vectors"), pl.oc_vectors);
    EXPECT_EQ(j.at("x_split"), pl.x_split);
    ASSERT_EQ(j.at("axes").size(), 3u);
    for (int a = 0; a < 3; ++a) EXPECT_EQ(j.at("axes")[a].at("out"), pl.axes[a].out);
  }
}

}  // namespace
}  // namespace deconvjit::detail
