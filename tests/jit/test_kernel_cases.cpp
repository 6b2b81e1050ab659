// Targeted JIT cases, each on AVX-512 and AVX2, each checked against the double-precision reference:
// the seeds' worked examples, channel tails, zero phases, dilation, groups, depthwise, channel multipliers,
// 1D/3D, negative pads, output_padding >= stride, output_shape (zero tail and crop) under every auto_pad,
// both data formats, every weights format, batches (incl. blocking across images), the gemm route and
// every NCX layout path. Plus the code-size bound: K=1024, s=256 compiles in milliseconds.
//
// Every case runs in f32, bf16 and f16 (src, weights and dst in that type, f32 sums): the cases are small,
// so all of them in three types stays within the suite's time budget (a few seconds per type). Forced
// routes that exist for f32 only (col, the in_kernel layout) are left out for the 16-bit types, and
// ColumnGemm checks that they refuse col as a hint.
#include <gtest/gtest.h>

#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deconvjit/deconvjit.hpp"
#include "runtime/typed_data.hpp"
#include "support/no_disk_cache.hpp"
#include "support/deconv_tester.hpp"
#include "support/seed_examples.hpp"

namespace deconvjit {
namespace {

using testing::DeconvTester;
using V = std::vector<int64_t>;

constexpr DataFormat kFormats[] = {DataFormat::NCX, DataFormat::NXC};
constexpr WeightsFormat kWeightFormats[] = {WeightsFormat::OIX, WeightsFormat::XIO, WeightsFormat::GOIX};
constexpr AutoPad kAutoPads[] = {AutoPad::Explicit, AutoPad::Valid, AutoPad::SameUpper, AutoPad::SameLower};

using testing::NoDiskCache;

struct CaseParam {
  Isa isa;
  DType dtype;
};

class KernelCases : public ::testing::TestWithParam<CaseParam> {
 protected:
  void SetUp() override {
    if (!isa_available(isa())) GTEST_SKIP() << "ISA " << to_string(isa()) << " is not available";
    if (auto why = testing::unsupported_types(isa(), dtype())) GTEST_SKIP() << "compile: " << *why;
  }
  Isa isa() const { return GetParam().isa; }
  DType dtype() const { return GetParam().dtype; }
  DeconvTester T() const { return DeconvTester().isa(isa()).dtype(dtype()); }
  DeconvTester D(const Descriptor& d) const { return DeconvTester(d).isa(isa()).dtype(dtype()); }
  // Routes that exist for f32 data only: the NCX in_kernel layout (f32 scatters) on AVX-512, and col (its
  // col2im sums in C++). Asked of 16-bit data they are refused as hints (ColumnGemm checks that).
  bool in_kernel_layout_exists() const { return isa() == Isa::avx512_core && dtype() == DType::f32; }
  static bool cpu_bf16_dot() {
    const Descriptor d = descriptor_from_json(R"({"src":[1,2,1],"weights":[2,16,1],"dtype":"bf16"})");
    return compile(d).name().find("_icp") != std::string::npos;
  }

  // The plan the library makes for this tester's problem (to check that a case reaches the route it is
  // meant to cover).
  static nlohmann::json plan_of(const DeconvTester& t) {
    return nlohmann::json::parse(compile(t.descriptor(), t.options()).plan_text());
  }
  // Compiling t must be refused with an error naming `word`; `what` is the case, for the failure message.
  static void expect_refused(const DeconvTester& t, const std::string& word, const std::string& what) {
    try {
      compile(t.descriptor(), t.options());
      ADD_FAILURE() << what << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
    }
  }
  NoDiskCache no_disk_cache_;
};

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

// ---- channels -------------------------------------------------------------------------------------------

TEST_P(KernelCases, OutputChannelTails) {
  for (int64_t c_out : {1, 3, 15, 17, 33, 47})
    for (int64_t c_in : {5, 9})  // 9 input channels reach the few-output-channel (dot) family
      for (DataFormat f : kFormats) {
        SCOPED_TRACE("C_IN " + std::to_string(c_in) + " C_OUT " + std::to_string(c_out));
        T().channels(c_in, c_out).input({5, 6}).kernel({3, 3}).stride({2, 2}).pads({1, 0}, {0, 1}).layout(f)
            .Test();
      }
}

// Long 1-D NCX rows copied to NXC for the dot family: the copy splits each row into pieces of whole output
// lines (40 channels x 1000 pixels: pieces of 408, the last ragged), with and without a zero halo.
TEST_P(KernelCases, LongNcxRowsThroughTheSourceCopy) {
  for (int halo : {0, 1}) {
    SCOPED_TRACE("x_halo " + std::to_string(halo));
    TuningHints h;
    h.algorithm = "dot", h.layout = "src_copy", h.x_halo = halo;
    DeconvTester t = T().rank(1).batch(2).channels(40, 1).input({1000}).kernel({16}).stride({8}).pads({3}, {5})
                         .hints(h);
    t.Test();
    EXPECT_EQ(plan_of(t).at("algorithm"), "dot");
  }
}

// dot_x: 1-4 output channels on NCX data with the vector along output x. Strides 1-8 (8 needs AVX-512's
// 16 lanes... and divides AVX2's 8), pads that cut into the first vector, rows whose blocks run as loops
// and rows that end in a masked vector, input channels that leave a remainder after the accumulator sets.
TEST_P(KernelCases, DotX) {
  struct Case {
    int rank;
    int64_t c_in, c_out;
    std::vector<int64_t> in, k, s, pb, pe;
    int sets, ur;
  };
  const std::vector<Case> cases = {
      {1, 13, 1, {200}, {16}, {8}, {3}, {5}, 0, 0},
      {1, 9, 2, {70}, {2}, {1}, {0}, {0}, 2, 2},
      {2, 7, 3, {5, 40}, {4, 4}, {2, 2}, {1, 1}, {1, 1}, 0, 0},
      {2, 5, 4, {3, 9}, {3, 5}, {1, 2}, {0, 2}, {1, 1}, 2, 1},
      {3, 6, 1, {2, 3, 20}, {2, 3, 4}, {2, 1, 4}, {0, 1, 0}, {1, 0, 2}, 0, 3},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE("case C_IN " + std::to_string(c.c_in) + " C_OUT " + std::to_string(c.c_out));
    TuningHints h;
    h.algorithm = "dot_x";
    h.ic_unroll = c.sets;
    h.ur_w = c.ur;
    DeconvTester t = T().rank(c.rank).batch(2).channels(c.c_in, c.c_out).input(c.in).kernel(c.k).stride(c.s)
                         .pads(c.pb, c.pe).hints(h);
    t.Test();
    EXPECT_EQ(plan_of(t).at("algorithm"), "dot_x");
  }
  // An infinite weight on the first tap, which the pads cut off at the row's start: outputs with no such
  // term must stay finite (a masked lane's 0 * inf would be NaN).
  TuningHints h;
  h.algorithm = "dot_x";
  T().rank(1).channels(8, 2).input({40}).kernel({5}).stride({2}).pads({2}, {2}).hints(h)
      .edit([](verify::TypedOperands& o) { o.weights.set(0, std::numeric_limits<double>::infinity()); })
      .Test();
}

// col_x: NCX, AVX-512 (groups: test_col_x_groups.cpp); a GEMM along input x with col2im in registers.
// Strides 1-16, kernels narrower and wider than the stride (up to 27 x taps), pads that cut into the first tile and pads wide enough that
// the row's first tile is not tile 0, output padding, channel blocks with a tail, 1-4 vectors per tile,
// accumulator sets with a remainder, rows cut into parts (each starts from the tile before it), 3-D. On
// AVX2 the hint is refused by name.
TEST_P(KernelCases, ColX) {
  struct Case {
    int rank;
    int64_t c_in, c_out;
    std::vector<int64_t> in, k, s, pb, pe, op;
    int oc, ur, sets, parts;
  };
  const std::vector<Case> cases = {
      {1, 13, 1, {200}, {16}, {8}, {3}, {5}, {0}, 0, 0, 0, 0},
      {1, 9, 2, {70}, {2}, {1}, {0}, {0}, {0}, 0, 2, 2, 0},
      {1, 3, 2, {100}, {15}, {1}, {18}, {1}, {0}, 0, 1, 1, 0},
      {1, 4, 1, {45}, {27}, {16}, {30}, {2}, {9}, 0, 0, 1, 0},
      {1, 5, 3, {500}, {8}, {4}, {2}, {2}, {1}, 1, 2, 0, 3},
      {2, 7, 3, {5, 40}, {4, 4}, {2, 2}, {1, 1}, {1, 1}, {0, 0}, 0, 0, 0, 0},
      {2, 5, 15, {3, 37}, {3, 5}, {1, 2}, {0, 2}, {1, 1}, {0, 1}, 4, 0, 0, 0},
      {2, 6, 4, {4, 70}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {0, 0}, 1, 4, 2, 2},
      {3, 6, 2, {2, 3, 20}, {2, 3, 4}, {2, 1, 4}, {0, 1, 0}, {1, 0, 2}, {0, 0, 1}, 0, 3, 0, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE("case C_IN " + std::to_string(c.c_in) + " C_OUT " + std::to_string(c.c_out) + " K " +
                 std::to_string(c.k.back()) + " s " + std::to_string(c.s.back()));
    TuningHints h;
    h.algorithm = "col_x";
    h.oc_vectors = c.oc, h.ur_w = c.ur, h.ic_unroll = c.sets, h.x_split = c.parts;
    if (dtype() == DType::bf16 && h.ur_w == 4) h.ur_w = 3;  // (bf16 channel pairs hold at most 3 vectors)
    DeconvTester t = T().rank(c.rank).batch(2).channels(c.c_in, c.c_out).input(c.in).kernel(c.k).stride(c.s)
                         .pads(c.pb, c.pe).output_padding(c.op).hints(h);
    if (isa() != Isa::avx512_core) {
      try {
        compile(t.descriptor(), t.options());
        ADD_FAILURE() << "col_x accepted on " << to_string(isa());
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), Error::Kind::InvalidArgument) << e.what();
        EXPECT_NE(std::string(e.what()).find("col_x needs AVX-512"), std::string::npos) << e.what();
      }
      continue;
    }
    t.Test();
    EXPECT_EQ(plan_of(t).at("algorithm"), "col_x");
  }
  if (isa() != Isa::avx512_core) return;
  // Tiles across images (batch_block) for rows of one vector: 2 and 4 images per tile on a ragged 11-pixel
  // row under pads, and a row of two tiles (the kernel reaches past a 16-pixel row) cut into two parts.
  for (int images : {2, 4}) {
    if (images == 4 && dtype() == DType::bf16) continue;  // (bf16 channel pairs hold at most 3 vectors)
    TuningHints h;
    h.algorithm = "col_x", h.batch_block = 1, h.ur_w = images, h.oc_vectors = 1;
    SCOPED_TRACE("images per tile " + std::to_string(images));
    DeconvTester t = T().batch(4).channels(9, 2).input({3, 11}).kernel({3, 5}).stride({2, 2}).pads({1, 1}, {1, 2})
                         .hints(h);
    t.Test();
    EXPECT_TRUE(plan_of(t).at("block_over_batch").get<bool>());
  }
  TuningHints two;
  two.algorithm = "col_x", two.batch_block = 1, two.ur_w = 2, two.x_split = 2;
  T().batch(4).channels(5, 1).input({2, 16}).kernel({2, 13}).stride({1, 1}).pads({0, 2}, {1, 0}).hints(two).Test();
  // An output far wider than the input reaches (output_shape): the tiles past the input share their masks
  // and run as one loop, so the code stays small and every such output is zero.
  {
    TuningHints h;
    h.algorithm = "col_x";
    DeconvTester t = T().rank(1).channels(8, 2).input({40}).kernel({5}).stride({2}).output_shape({8000}).hints(h);
    t.Test();
    EXPECT_EQ(plan_of(t).at("algorithm"), "col_x");
  }
  // An infinite weight at kernel x 0: output 78 has terms from inputs 38 and 39 only, but the lane of
  // input 40 (past the row, a zeroed load) would give it 0 * inf = NaN unless that lane's FMA is masked.
  // And an infinite input, which must reach exactly the outputs it feeds.
  TuningHints h;
  h.algorithm = "col_x";
  T().rank(1).channels(8, 2).input({40}).kernel({5}).stride({2}).pads({2}, {0}).output_padding({1}).hints(h)
      .edit([](verify::TypedOperands& o) { o.weights.set(0, std::numeric_limits<double>::infinity()); })
      .Test();
  T().rank(1).channels(8, 2).input({40}).kernel({5}).stride({2}).pads({2}, {2}).hints(h)
      .edit([](verify::TypedOperands& o) { o.src.set(17, std::numeric_limits<double>::infinity()); })
      .Test();
}

// Non-temporal stores (nt_stores) in the families that have them: direct, depthwise and gemm on NXC data
// (f32 on AVX2 and 16-bit data on AVX-512, whose vectors are half lines: with blocks of whole lines),
// depthwise_x and dot_x on NCX (f32, AVX-512). With no tail after
// dst it starts line-aligned and whole vectors go out non-temporally; tails of 1, 3, 4 and 8 elements shift
// it off alignment (by less than a vector, so a too-small alignment test would let a vmovntps fault).
// Within one run blocks differ too: the grouped case's second group starts off alignment while the first
// does not, so the test must be made per store block. Elsewhere (16-bit data on AVX2, channels off the
// vector grid, NCX rows off it, NCX in the row families, half-line vectors in odd numbers per block) the
// hint is refused by name.
TEST_P(KernelCases, NonTemporalStores) {
  const int lanes = 16;
  const int64_t c = 2 * lanes;
  struct Case {
    DeconvTester t;
    const char* algorithm;
    int oc_vectors, parallel;
    bool halves;  // possible where a vector is half a line too (f32 on AVX2, 16-bit data on AVX-512)
  };
  const std::vector<Case> cases = {
      {T().layout(DataFormat::NXC).batch(2).channels(8, c).input({5, 7}).kernel({3, 3}).stride({2, 2}).pads({1, 1}, {0, 1}),
       "", 2, 1, true},  // (on oneTBB, so each range fences)
      {T().layout(DataFormat::NXC).channels(c, c).groups(c).input({6, 9}).kernel({4, 4}).stride({2, 2}).pads({1, 1}, {1, 1}),
       "", 1, -1, false},  // (one vector per block: each call walks both channel blocks, oc_loop)
      {T().layout(DataFormat::NXC).channels(5, c).input({4, 11}).kernel({2, 2}).stride({2, 2}), "", 4, -1, true},
      {T().layout(DataFormat::NXC).rank(1).channels(3, 2 * c).input({40}).kernel({1}).stride({2}).output_padding({1}),
       "", 2, -1, true},
      // Two groups of 1.5 vectors each: the second group starts half a vector off alignment.
      {T().layout(DataFormat::NXC).groups(2).channels(6, 3 * lanes).input({4, 6}).kernel({3, 3}).stride({2, 2}),
       "", 0, -1, false},
      // NCX: depthwise_x on planes of 4 x 128 and 4 x 32, dot_x on 6 x 128.
      {T().channels(c, c).groups(c).input({3, 64}).kernel({4, 4}).stride({2, 2}).pads({2, 1}, {2, 1}),
       "depthwise_x", 0, -1, false},
      {T().channels(c, c).groups(c).input({3, 16}).kernel({4, 4}).stride({2, 2}).pads({2, 1}, {2, 1}),
       "depthwise_x", 0, -1, false},
      {T().channels(24, 2).input({3, 64}).kernel({3, 4}).stride({2, 2}).pads({1, 1}, {0, 1}), "dot_x", 0, -1, false},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    DeconvTester t = cases[i].t;
    TuningHints h;
    h.nt_stores = 1;
    h.algorithm = cases[i].algorithm;
    h.oc_vectors = cases[i].oc_vectors;
    h.parallel = cases[i].parallel;
    t.hints(h);
    SCOPED_TRACE("case " + std::to_string(i));
    const bool half_line = isa() != Isa::avx512_core || dtype() != DType::f32;
    if ((dtype() != DType::f32 && isa() != Isa::avx512_core) || (half_line && !cases[i].halves)) {
      try {
        compile(t.descriptor(), t.options());
        ADD_FAILURE() << "nt_stores accepted for " << to_string(dtype()) << " on " << to_string(isa());
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), Error::Kind::InvalidArgument) << e.what();
        EXPECT_NE(std::string(e.what()).find("nt_stores"), std::string::npos) << e.what();
      }
      continue;
    }
    const nlohmann::json plan = plan_of(t);
    EXPECT_TRUE(plan.at("nt_stores").get<bool>());
    if (cases[i].oc_vectors == 1) EXPECT_GT(plan.at("oc_loop").get<int>(), 1);
    for (int64_t tail : {0, 1, 3, lanes / 4, lanes / 2}) {
      SCOPED_TRACE("elements after dst: " + std::to_string(tail));
      DeconvTester(t).dst_tail(tail).Test();
    }
  }
  if (dtype() != DType::f32 || isa() != Isa::avx512_core) return;
  for (DeconvTester t : {T().channels(8, 32).input({5, 7}).kernel({3, 3}).stride({2, 2}),                   // NCX
                         T().layout(DataFormat::NXC).channels(8, 20).input({5, 7}).kernel({3, 3}).stride({2, 2}),
                         T().channels(c, c).groups(c).input({3, 7}).kernel({4, 4}).stride({2, 2}).pads({2, 2}, {2, 2})}) {
    TuningHints h;
    h.nt_stores = 1;
    t.hints(h);
    try {
      compile(t.descriptor(), t.options());
      ADD_FAILURE() << "nt_stores accepted for " << to_json(t.descriptor());
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("nt_stores"), std::string::npos) << e.what();
    }
  }
}

// nt_stores through the row buffer: the flush's AVX-512 transposes send each channel's run of a line (16
// f32, 32 16-bit outputs) out non-temporally where it starts a line (NCX, output rows a whole number of
// lines). Parts of a row that start mid-line (x_split 3 of 64), bands, blocks across images, 1-D and 3-D
// rows, tails after dst that shift every run off alignment. Refused by name elsewhere (AVX2, rows of 17).
TEST_P(KernelCases, NonTemporalFlush) {
  auto rows = [](int x_split, int band_rows, int batch_block) {
    TuningHints h;
    h.layout = "row_buffer";
    h.algorithm = "direct";
    h.nt_stores = 1;
    h.x_split = x_split;
    h.band_rows = band_rows;
    h.batch_block = batch_block;
    return h;
  };
  const DeconvTester k2 = T().channels(8, 40).input({5, 16}).kernel({2, 2}).stride({2, 2});
  const std::vector<DeconvTester> cases = {
      DeconvTester(k2).hints(rows(0, 0, 0)),
      DeconvTester(k2).input({4, 32}).hints(rows(3, 0, 0)),
      DeconvTester(k2).input({6, 16}).hints(rows(0, 2, 0)),
      DeconvTester(k2).batch(4).input({3, 16}).hints(rows(0, 0, 1)),
      T().rank(1).channels(5, 17).input({32}).kernel({4}).stride({2}).pads({1}, {1}).hints(rows(0, 0, 0)),
      T().rank(3).channels(4, 9).input({2, 3, 16}).kernel({2, 2, 2}).stride({2, 2, 2}).hints(rows(0, 0, 0)),
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    if (isa() != Isa::avx512_core) {
      expect_refused(cases[i], "nt_stores", "a non-temporal flush off AVX-512");
      continue;
    }
    EXPECT_TRUE(plan_of(cases[i]).at("nt_stores").get<bool>());
    EXPECT_EQ(plan_of(cases[i]).at("layout"), "ncx_row_buffer");
    for (int64_t tail : {0, 1, 3, 8}) {
      SCOPED_TRACE("elements after dst: " + std::to_string(tail));
      DeconvTester(cases[i]).dst_tail(tail).Test();
    }
  }
  expect_refused(DeconvTester(k2).input({5, 8}).kernel({3, 3}).hints(rows(0, 0, 0)), "nt_stores", "rows of 17");
  // The default: from 4 MB of output (128 channels of 128 x 128: 8 MB in f32, 4 MB in 16 bits), not below.
  if (isa() != Isa::avx512_core) return;
  auto layer = [&](int64_t side) {
    return plan_of(T().channels(128, 128).input({side, side}).kernel({3, 3}).stride({2, 2}).pads({1, 1}, {0, 0}));
  };
  const nlohmann::json big = layer(64), small = layer(32);
  ASSERT_EQ(big.at("layout"), "ncx_row_buffer");
  EXPECT_TRUE(big.at("nt_stores").get<bool>());
  EXPECT_FALSE(small.at("nt_stores").get<bool>());
}

TEST_P(KernelCases, LongReductionWithUnrollRemainder) {
  for (int64_t c_in : {1, 7, 37, 64})
    for (DataFormat f : kFormats) T().channels(c_in, 24).input({4, 5}).kernel({2, 3}).stride({2, 1}).layout(f).Test();
}

// Unrolls of 2, 4, 8 and 16 channels (f16 on AVX-512, and on AVX2 with three vectors per block, widens each
// in one instruction into a stack slot), with remainders, in both layouts. The default unrolls 8 for f16 on
// AVX-512 with two output vectors per pixel, 4 otherwise.
TEST_P(KernelCases, UnrolledChannelGroups) {
  for (int u : {2, 4, 8, 16})
    for (int64_t c_in : {int64_t{u}, int64_t{2 * u + 3}})
      for (DataFormat f : kFormats) {
        SCOPED_TRACE("unroll " + std::to_string(u) + ", " + std::to_string(c_in) + " channels");
        TuningHints h;
        h.ic_unroll = u;
        h.oc_vectors = 2;
        T().channels(c_in, 40).input({3, 7}).kernel({3, 3}).stride({2, 2}).layout(f).hints(h).Test();
      }
  // Three vectors per block (the gemm tile): f16 on AVX2 widens through the stack slot there too (16
  // channels, past a ymm register, one at a time).
  for (int u : {2, 4, 8, 16})
    for (int64_t c_in : {int64_t{u}, int64_t{2 * u + 3}}) {
      SCOPED_TRACE("gemm, unroll " + std::to_string(u) + ", " + std::to_string(c_in) + " channels");
      TuningHints h;
      h.algorithm = "gemm";
      h.ic_unroll = u;
      h.oc_vectors = 3;
      T().channels(c_in, 24).input({3, 7}).kernel({2, 2}).stride({2, 2}).layout(DataFormat::NXC).hints(h)
          .Test();
    }
  const nlohmann::json two = plan_of(T().channels(24, 32).input({8, 8}).kernel({3, 3}).stride({2, 2}));
  if (isa() == Isa::avx512_core) ASSERT_EQ(two.at("oc_vectors").get<int>(), 2);
  const bool unroll8 = dtype() == DType::f16 && isa() == Isa::avx512_core;
  EXPECT_EQ(two.at("ic_unroll").get<int>(), unroll8 ? 8 : 4);
  const nlohmann::json four = plan_of(T().channels(24, 64).input({8, 8}).kernel({3, 3}).stride({2, 2}));
  EXPECT_EQ(four.at("ic_unroll").get<int>(), 4);
}

// Blocks of few accumulators (one pixel of one vector, a row's last pixels) cycle the unrolled input
// channels over several accumulator sets and sum them before the store (Plan::acc_chains): unrolls with
// and without a remainder, one and three pixels, a channel tail, bf16 pairs with a lone last channel, f16
// groups widened together, and (f32) a reduction in passes, whose later passes resume in the first set.
TEST_P(KernelCases, NarrowBlocksCycleAccumulatorSets) {
  for (int u : {2, 4, 8})
    for (int64_t c_in : {int64_t{u}, int64_t{3 * u + 1}})
      for (int ur : {1, 3})
        for (DataFormat f : kFormats) {
          SCOPED_TRACE("unroll " + std::to_string(u) + ", " + std::to_string(c_in) + " channels, ur_w " +
                       std::to_string(ur));
          TuningHints h;
          h.algorithm = "direct";
          h.ic_unroll = u;
          h.ur_w = ur;
          h.oc_vectors = 1;
          T().channels(c_in, 13).input({3, 7}).kernel({3, 3}).stride({2, 2}).pads({1, 1}, {0, 0}).layout(f).hints(h).Test();
        }
  const DeconvTester narrow =
      T().channels(32, 13).input({3, 5}).kernel({4, 4}).stride({2, 2}).pads({1, 1}, {1, 1}).layout(DataFormat::NXC);
  EXPECT_EQ(plan_of(narrow).at("acc_chains").get<int>(), 8);
  EXPECT_EQ(plan_of(T().groups(8).channels(8, 8).input({3, 5}).kernel({3, 3})).at("acc_chains").get<int>(), 1);
  if (dtype() != DType::f32) return;  // reductions in passes are f32 only
  TuningHints passes;
  passes.algorithm = "direct";
  passes.ic_block = 8;
  passes.ur_w = 1;
  DeconvTester(narrow).hints(passes).Test();
}

// Blocks of one channel vector (at most 16 output channels per block) read an f32 source through the FMA's
// own broadcast operand on AVX-512: every route that reaches them. NXC with a channel tail and with all 16
// lanes, one to 28 pixels, unroll remainders and accumulator sets; gemm (8 channels folded by a stride of 2);
// a halo; blocks across images; groups of 8; the NCX row buffer, bands, and the source read in place (its
// channels a plane apart); a reduction in passes (f32); a 16-bit source widened to f32. Each plan is checked
// to have one vector per block, so the case covers what it says.
TEST_P(KernelCases, OneVectorBlocks) {
  auto k3 = [&](int64_t ci, int64_t co) {
    return T().channels(ci, co).input({5, 30}).kernel({3, 3}).stride({2, 2}).pads({1, 1}, {1, 1})
        .layout(DataFormat::NXC);
  };
  auto with = [](auto set) {
    TuningHints h;
    set(h);
    return h;
  };
  const int widest = isa() == Isa::avx512_core ? 28 : 6;  // AVX2 holds 16 channels in two vectors
  const TuningHints wide = with([&](TuningHints& h) { h.ur_w = widest; h.ic_unroll = 3; });
  const TuningHints single = with([](TuningHints& h) { h.ur_w = 1; });
  const TuningHints halo = with([](TuningHints& h) { h.x_halo = 1; });
  const TuningHints images = with([](TuningHints& h) { h.batch_block = 1; });
  const TuningHints row_buffer = with([](TuningHints& h) { h.algorithm = "direct"; h.layout = "row_buffer"; });
  const TuningHints bands = with([](TuningHints& h) { h.algorithm = "direct"; h.band_rows = 3; });
  std::vector<DeconvTester> cases = {
      k3(13, 10),
      k3(16, 16).hints(wide),
      k3(5, 16).input({3, 4}).hints(single),
      T().channels(12, 8).input({4, 7}).kernel({2, 2}).stride({2, 2}).layout(DataFormat::NXC),  // gemm
      k3(9, 12).kernel({5, 5}).hints(halo),
      k3(6, 7).batch(4).input({2, 2}).hints(images),
      k3(16, 64).groups(8).input({4, 6}),
      k3(11, 14).layout(DataFormat::NCX).hints(row_buffer),
      k3(11, 14).batch(2).input({9, 12}).layout(DataFormat::NCX).hints(bands),
  };
  if (dtype() == DType::f32) {
    const TuningHints in_place = with([](TuningHints& h) { h.layout = "src_in_place"; });
    cases.push_back(k3(11, 14).layout(DataFormat::NCX).hints(in_place));
    cases.push_back(k3(40, 9).hints(with([](TuningHints& h) { h.algorithm = "direct"; h.ic_block = 8; })));
  } else {
    cases.push_back(k3(11, 14).hints(with([](TuningHints& h) { h.widen_src = 1; })));
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    cases[i].Test();
    if (isa() == Isa::avx512_core) EXPECT_EQ(plan_of(cases[i]).at("oc_vectors").get<int>(), 1);
  }
}

// A 16-bit source widened to f32 once before the kernel (widen_src), in every route that can take it:
// direct in NXC and through the NCX row buffer, with a halo, across images, gemm, depthwise, the NCX
// scratch route, a channel tail. f32 data has nothing to widen: the hint is refused by name.
TEST_P(KernelCases, WidenedSource) {
  TuningHints h;
  h.widen_src = 1;
  auto k3 = [&](int64_t ci, int64_t co) {
    return T().channels(ci, co).kernel({3, 3}).stride({2, 2}).layout(DataFormat::NXC);
  };
  if (dtype() == DType::f32) return expect_refused(k3(4, 4).input({3, 3}).hints(h), "widen_src", "f32 widen_src");
  TuningHints halo = h, batch = h, scratch = h;
  halo.x_halo = 1;
  batch.batch_block = 1;
  scratch.layout = "scratch";
  struct Case { DeconvTester t; const char* family; };
  const Case cases[] = {
      {k3(7, 20).input({5, 9}).pads({1, 1}, {1, 1}).hints(h), "direct"},
      {k3(7, 20).input({5, 9}).pads({1, 1}, {1, 1}).layout(DataFormat::NCX).hints(h), "direct"},
      {k3(33, 40).batch(2).input({6, 11}).kernel({4, 4}).pads({1, 1}, {1, 1}).hints(halo), "direct"},
      {k3(5, 3).batch(4).input({2, 3}).hints(batch), "direct"},
      {k3(16, 8).input({4, 6}).kernel({2, 2}).hints(h), "gemm"},
      {k3(32, 32).groups(32).input({5, 9}).hints(h), "depthwise"},
      {k3(6, 5).input({4, 7}).layout(DataFormat::NCX).hints(scratch), "direct"},
  };
  for (size_t i = 0; i < std::size(cases); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    DeconvTester t = cases[i].t;
    t.Test();
    const nlohmann::json plan = plan_of(t);
    EXPECT_EQ(plan.at("algorithm"), cases[i].family);
    EXPECT_TRUE(plan.at("widen_src").get<bool>());
    EXPECT_NE(plan.at("name").get<std::string>().find("_w32"), std::string::npos);
  }
  // The default: f16 only, not depthwise; on AVX2 where a block has at most two output vectors and each
  // source element feeds 1024+ FLOPs (32 channels x 25 taps x 2), on AVX-512 with at most 3 input channels.
  const bool f16 = dtype() == DType::f16, z = isa() == Isa::avx512_core;
  auto widened = [&](DeconvTester t) { return plan_of(t).at("widen_src").get<bool>(); };
  EXPECT_EQ(widened(k3(24, 32).kernel({5, 5}).input({4, 6})), f16 && !z);
  EXPECT_FALSE(widened(k3(24, 32).input({4, 6})));  // 576 FLOPs per source element
  EXPECT_EQ(widened(k3(2, 32).kernel({5, 5}).input({4, 6})), f16);
  EXPECT_FALSE(widened(k3(32, 32).groups(32).kernel({5, 5}).input({4, 6})));
}

// The NCX source transposed band by band (band_rows) rather than whole: bands of one row and of the whole
// height, a halo, pads, output rows with no taps (stride above the kernel), groups, batches on oneTBB, a
// widened 16-bit band. Refused by name for NXC data, 3-D and 1-D rows.
TEST_P(KernelCases, SourceBands) {
  auto k3 = [&](int64_t ci, int64_t co) {
    return T().channels(ci, co).kernel({3, 3}).stride({2, 2}).layout(DataFormat::NCX);
  };
  auto bands = [](int rows) {
    TuningHints h;
    h.layout = "row_buffer";
    h.algorithm = "direct";
    h.band_rows = rows;
    return h;
  };
  TuningHints halo = bands(3), widened = bands(2);
  halo.x_halo = 1;
  widened.widen_src = 1;
  std::vector<DeconvTester> cases = {
      k3(7, 20).input({9, 11}).hints(bands(1)),
      k3(7, 20).input({9, 11}).pads({1, 1}, {1, 1}).hints(bands(17)),
      k3(33, 40).batch(3).input({12, 21}).kernel({4, 4}).pads({1, 1}, {1, 1}).hints(halo),
      k3(6, 5).input({7, 9}).kernel({1, 1}).stride({2, 2}).hints(bands(2)),  // every other row has no tap
      k3(8, 12).groups(2).input({6, 10}).hints(bands(4)),
  };
  if (dtype() != DType::f32) cases.push_back(k3(9, 17).input({8, 13}).hints(widened));
  // The dot family's source copy (at most 4 output channels), banded the same way: one-row bands, a halo,
  // batches, rows without taps, bf16 pairs with a lone channel where the CPU has them, channels past a
  // vector.
  auto dot_bands = [](int rows, int halo) {
    TuningHints h;
    h.algorithm = "dot";
    h.band_rows = rows;
    h.x_halo = halo;
    return h;
  };
  const size_t dots = cases.size();
  cases.push_back(k3(40, 1).input({9, 11}).hints(dot_bands(1, 0)));
  cases.push_back(k3(37, 3).batch(2).input({10, 7}).kernel({5, 5}).pads({2, 2}, {1, 1})
                      .hints(dot_bands(3, 1)));
  cases.push_back(k3(33, 4).input({7, 9}).kernel({1, 1}).hints(dot_bands(2, 0)));
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    DeconvTester t = cases[i];
    t.Test();
    const nlohmann::json plan = plan_of(t);
    EXPECT_EQ(plan.at("layout"), i < dots ? "ncx_row_buffer" : "ncx_src_copy");
    EXPECT_GT(plan.at("band_rows").get<int>(), 0);
  }
  // The dot family's default: bands where an image's source exceeds 256 KB (56 channels of 170 x 170, a
  // 9x9 kernel at stride 3), not for batches of small images (64 channels of 14 x 14).
  auto dot_band_of = [&](int64_t n, int64_t c, int64_t side, int64_t k, int64_t s) {
    const DeconvTester t = T().batch(n).channels(c, 1).input({side, side}).kernel({k, k}).stride({s, s})
                               .pads({4, 4}, {4, 4}).layout(DataFormat::NCX);
    return plan_of(t).at("band_rows").get<int>();
  };
  EXPECT_GT(dot_band_of(1, 56, 170, 9, 3), 0);
  EXPECT_EQ(dot_band_of(64, 64, 14, 5, 2), 0);
  // The default: bands where 256 KB of input rows hold 8 times the rows two bands share (k3 s1: 16
  // output rows) and make 8 or more tasks (4 images of 3 bands), else the whole copy (1 image).
  auto band_of = [&](int64_t n) {
    return plan_of(k3(8, 32).batch(n).input({40, 24}).stride({1, 1})).at("band_rows").get<int>();
  };
  EXPECT_EQ(band_of(4), 16);
  EXPECT_EQ(band_of(1), 0);
  TuningHints only;
  only.band_rows = 2;
  expect_refused(k3(4, 4).input({5, 5}).layout(DataFormat::NXC).hints(only), "band_rows", "bands of NXC data");
  expect_refused(T().rank(3).channels(3, 3).input({3, 4, 5}).kernel({2, 2, 2}).stride({1, 1, 1})
                     .layout(DataFormat::NCX).hints(bands(2)),
                 "band_rows", "bands of 3-D rows");
  expect_refused(T().rank(1).channels(8, 16).input({40}).kernel({3}).stride({2}).layout(DataFormat::NCX).hints(bands(2)),
                 "band_rows", "bands of 1-D rows");
}

// The dot family on bf16 without channel pairs splits each whole pair of input-channel vectors into even and
// odd channels (a shift and a mask): one pair, pairs followed by a single vector, by a tail, by both; 1-4
// output channels (four leave AVX2 no registers to keep both halves' weights, so the halves run one after
// the other); groups, blocks across images, NCX through the source copy. Fewer than two vectors of channels
// keep the widening route; f32 and f16 never take it.
TEST_P(KernelCases, DotBf16EvenOdd) {
  TuningHints widened;
  widened.ic_pairs = 0;
  const int64_t lanes = isa() == Isa::avx512_core ? 16 : 8;
  auto dot = [&](int64_t ci, int64_t co) {
    DeconvTester t = T().channels(ci, co).input({4, 5}).kernel({3, 3}).stride({2, 2}).pads({1, 0}, {0, 1})
                         .layout(DataFormat::NXC);
    return dtype() == DType::bf16 ? t.hints(widened) : t;
  };
  std::vector<DeconvTester> cases;
  for (int64_t ci : {2 * lanes, 3 * lanes, 2 * lanes + 5, 5 * lanes + 3, 4 * lanes})
    for (int64_t co : {1, 3, 4}) cases.push_back(dot(ci, co));
  cases.push_back(dot(4 * lanes, 2).groups(2).channels(4 * lanes, 4));
  cases.push_back(dot(2 * lanes + 1, 2).batch(5).input({1, 2}));
  cases.push_back(dot(3 * lanes, 3).layout(DataFormat::NCX).hints(dtype() == DType::bf16 ? [&] {
    TuningHints h = widened;
    h.algorithm = "dot";
    return h;
  }() : [] {
    TuningHints h;
    h.algorithm = "dot";
    return h;
  }()));
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    cases[i].Test();
    const nlohmann::json plan = plan_of(cases[i]);
    EXPECT_EQ(plan.at("algorithm"), "dot");
    EXPECT_EQ(plan.at("name").get<std::string>().find("_eo") != std::string::npos, dtype() == DType::bf16);
  }
  EXPECT_EQ(plan_of(dot(2 * lanes - 1, 2)).at("name").get<std::string>().find("_eo"), std::string::npos);
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
        EXPECT_EQ(plan_of(t).at("algorithm"), f == DataFormat::NCX ? "depthwise_x" : "depthwise");
      }
  T().rank(1).groups(19).channels(19, 19).input({17}).kernel({5}).stride({3}).dilation({2}).Test();
  T().rank(3).groups(5).channels(5, 5).input({3, 4, 3}).kernel({2, 3, 2}).stride({2, 1, 3}).batch(2)
      .layout(DataFormat::NXC).Test();
}

// bf16 depthwise with channels in whole pairs of vectors widens 2 x lanes channels by a shift and a mask
// (even and odd ones) and interleaves them back at the store: 32, 64 and 96 channels (blocks of 2 and 4
// vectors; 96 in blocks of 4 then 2), both ISAs and layouts, oc_loop on and off,
// a tile that leaves no register for the mask (back to the plain route). Special values go through it too.
TEST_P(KernelCases, DepthwiseBf16EvenOdd) {
  if (dtype() != DType::bf16) GTEST_SKIP() << "a bf16 route";
  for (int64_t c : {32, 64, 96})
    for (DataFormat f : kFormats)
      for (int oc_loop : {0, 1}) {
        SCOPED_TRACE("C = G = " + std::to_string(c) + " oc_loop hint " + std::to_string(oc_loop));
        TuningHints h;
        h.algorithm = "depthwise";
        if (f == DataFormat::NCX) h.layout = "scratch";
        h.oc_loop = oc_loop;
        if (c == 96) h.oc_vectors = 4;  // (the heuristic takes 3, odd: the plain route)
        DeconvTester t = T().groups(c).channels(c, c).input({5, 9}).kernel({4, 4}).stride({2, 2})
                             .pads({1, 1}, {1, 1}).layout(f).hints(h);
        t.Test();
        EXPECT_NE(plan_of(t).at("name").get<std::string>().find("_eo"), std::string::npos) << plan_of(t).at("name");
      }
  // AVX-512: 2 vectors x 14 pixels use 32 registers, none left for the mask: the plain route. (AVX2 reads
  // the mask from memory, and every tile with an even number of vectors leaves its two registers.)
  if (isa() != Isa::avx512_core) return;
  TuningHints wide;
  wide.algorithm = "depthwise", wide.oc_vectors = 2, wide.ur_w = 14;
  DeconvTester t = T().groups(32).channels(32, 32).input({3, 40}).kernel({3, 3}).stride({2, 2})
                       .layout(DataFormat::NXC).hints(wide);
  t.Test();
  EXPECT_EQ(plan_of(t).at("name").get<std::string>().find("_eo"), std::string::npos);
}

// NXC depthwise with many channel blocks: one call walks them all for each pixel block (oc_loop), through
// the copying NCX path as well.
TEST_P(KernelCases, DepthwiseWalksChannelBlocksInOneCall) {
  for (int64_t c : {64, 256}) {
    DeconvTester t = T().groups(c).channels(c, c).input({5, 7}).kernel({4, 4}).stride({2, 2}).pads({1, 1}, {1, 1})
                         .layout(DataFormat::NXC);
    t.Test();
    const int64_t vectors = c / (isa() == Isa::avx512_core ? 16 : 8);
    EXPECT_EQ(plan_of(t).at("oc_loop").get<int64_t>() * plan_of(t).at("oc_vectors").get<int64_t>(), vectors);
    TuningHints scratch;
    scratch.layout = "scratch";
    T().groups(c).channels(c, c).input({3, 4}).kernel({3, 3}).stride({2, 2}).batch(2).layout(DataFormat::NCX)
        .hints(scratch).Test();
  }
}

// NCX depthwise with the vector along x: every stride that divides the lanes (and one that does not, which
// must fall back), kernels shorter and much longer than the stride, negative and large pads, rows of many
// vectors (the unmasked loop), channel counts that leave a remainder block, batches, 1D and 3D.
TEST_P(KernelCases, DepthwiseAlongX) {
  const int64_t lanes = isa() == Isa::avx512_core ? 16 : 8;
  auto dw = [&](int64_t c) { return T().groups(c).channels(c, c).layout(DataFormat::NCX); };
  for (int64_t s : {1, 2, 3, 4, 8, 16}) {
    SCOPED_TRACE("stride " + std::to_string(s));
    DeconvTester t = dw(5).input({3, 9}).kernel({3, 2 * s + 1}).stride({2, s}).pads({1, s / 2}, {0, s});
    t.Test();
    EXPECT_EQ(plan_of(t).at("algorithm"), lanes % s == 0 ? "depthwise_x" : "depthwise");
  }
  struct Case { int64_t c, n; V in, k, s, pb, pe; };
  const Case cases[] = {
      {7, 1, {4, 6}, {1, 1}, {4, 4}, {0, 0}, {0, 0}},          // kernel shorter than the stride
      {9, 2, {3, 5}, {3, 20}, {1, 2}, {1, 9}, {1, 9}},         // ten x taps
      {6, 1, {5, 7}, {3, 3}, {2, 2}, {-1, -2}, {-2, -1}},      // negative pads
      {5, 1, {4, 6}, {4, 4}, {2, 2}, {3, 5}, {2, 6}},          // pads past the kernel
      {11, 2, {3, 150}, {4, 4}, {2, 2}, {1, 1}, {1, 1}},       // 300 outputs per row
      {37, 1, {8, 33}, {3, 5}, {2, 4}, {1, 2}, {0, 3}},        // 37 channels: a remainder block
      {3, 1, {2, 1}, {2, 3}, {2, 2}, {0, 0}, {0, 0}},          // one input column
  };
  for (const Case& c : cases) {
    DeconvTester t = dw(c.c).batch(c.n).input(c.in).kernel(c.k).stride(c.s).pads(c.pb, c.pe);
    t.Test();
    EXPECT_EQ(plan_of(t).at("algorithm"), "depthwise_x");
  }
  DeconvTester one_d = dw(19).rank(1).input({41}).kernel({6}).stride({2}).pads({2}, {1});
  one_d.Test();
  EXPECT_EQ(plan_of(one_d).at("algorithm"), "depthwise_x");
  DeconvTester three_d = dw(5).rank(3).batch(2).input({3, 4, 5}).kernel({2, 3, 4}).stride({2, 1, 2})
                             .dilation({2, 2, 1}).pads({1, 0, 1}, {0, 1, 2});
  three_d.Test();
  EXPECT_EQ(plan_of(three_d).at("algorithm"), "depthwise_x");
  // Negative x pads whose remainder modulo the stride is not zero (floor and truncating division differ).
  for (const Case& c : {Case{5, 1, {4, 9}, {3, 5}, {2, 4}, {0, -1}, {0, -3}},
                        Case{4, 2, {3, 11}, {2, 3}, {1, 2}, {1, -1}, {0, -1}},
                        Case{3, 1, {2, 40}, {2, 7}, {2, 4}, {0, -3}, {0, 2}}}) {
    DeconvTester t = dw(c.c).batch(c.n).input(c.in).kernel(c.k).stride(c.s).pads(c.pb, c.pe);
    t.Test();
    EXPECT_EQ(plan_of(t).at("algorithm"), "depthwise_x");
  }
  // Dilation along x has no fixed lane pattern: the copying depthwise path takes it.
  DeconvTester dilated = dw(5).input({4, 6}).kernel({3, 3}).stride({2, 2}).dilation({1, 2});
  dilated.Test();
  EXPECT_EQ(plan_of(dilated).at("algorithm"), "depthwise");
}

// NCX with K == s and no pads: the GEMM along x (AVX-512). Rows of one vector stacked 3 and 2 at a time,
// ragged rows (masked loads, stores of half vectors), channel tails, 1D and 3D, tiles of row groups (an
// image's source larger than L2), and a forced hint with an unroll remainder.
TEST_P(KernelCases, GemmAlongX) {
  const bool z = isa() == Isa::avx512_core;
  auto k2 = [&](int64_t ci, int64_t co) {
    return T().channels(ci, co).kernel({2, 2}).stride({2, 2}).layout(DataFormat::NCX);
  };
  struct Case { int64_t ci, co, n; V in; };
  const Case cases[] = {
      {5, 7, 2, {6, 14}},    // small plane of 14-pixel rows: vectors across rows; 7 channels: a tail block
      {3, 9, 1, {4, 9}},     // the same with 9-pixel rows, several rows per vector
      {2, 3, 1, {70, 12}},   // a larger plane: three rows per block and a last group of one, 12 lanes
      {4, 5, 1, {5, 16}},    // three rows and a last group of two
      {4, 5, 1, {2, 16}},    // a plane shorter than a row group
      {2, 10, 1, {3, 110}},  // seven vectors in balanced blocks, 110 of 112 lanes
      {64, 8, 1, {72, 72}},  // 1.3 MB of source per image: channel blocks innermost
  };
  TuningHints forced_gx;
  if (z) forced_gx.algorithm = "gemm_x";  // (9- and 12-pixel rows would take the NXC gemm by default)
  for (const Case& c : cases) {
    DeconvTester t = k2(c.ci, c.co).batch(c.n).input(c.in).hints(forced_gx);
    t.Test();
    // AVX2 has no gemm_x: the row families, or gemm through copies when folding the two x phases into
    // the channels fills vectors a third again better (3 channels fill 3 of 8 lanes, folded 6; 9 fill
    // 9 of 16, folded 18 of 24).
    auto lane_use = [](int64_t c) { return static_cast<double>(c) / static_cast<double>((c + 7) / 8 * 8); };
    const bool folds = lane_use(2 * c.co) >= 1.3 * lane_use(c.co);
    EXPECT_EQ(plan_of(t).at("algorithm"), z ? "gemm_x" : folds ? "gemm" : "direct") << c.co << " channels";
    if (c.ci == 64 && z) EXPECT_LT(plan_of(t).at("row_chunk").get<int64_t>(), 36);  // several row tiles
    if (z) EXPECT_EQ(plan_of(t).at("flat_plane").get<bool>(), c.in[1] < 16 && c.in[0] * c.in[1] <= 48 * 16);
  }
  // Rows of one vector that fill less than 7/8 of gemm_x's lanes (9 of 16 in a flat plane of 36 pixels,
  // 12 of 16 in stacked rows) take the NXC gemm through copies by default; 14-pixel rows in a flat plane
  // of 84 (7/8 exactly) keep gemm_x.
  if (z && !(dtype() == DType::bf16 && cpu_bf16_dot())) {
    for (const Case& c : {Case{3, 9, 1, {4, 9}}, Case{2, 3, 1, {70, 12}}}) {
      DeconvTester t = k2(c.ci, c.co).batch(c.n).input(c.in);
      t.Test();
      EXPECT_EQ(plan_of(t).at("algorithm"), "gemm") << c.in[1] << "-pixel rows";
      EXPECT_EQ(plan_of(t).at("layout"), "ncx_via_scratch");
    }
    EXPECT_EQ(plan_of(k2(5, 7).batch(2).input({6, 14})).at("algorithm"), "gemm_x");
  }
  // Rows that leave much of their last vector empty stay with the row buffer unless asked.
  TuningHints gx;
  gx.algorithm = "gemm_x";
  for (const Case& c : {Case{6, 3, 1, {2, 37}}, Case{3, 4, 2, {3, 52}}}) {  // 37 of 48, 52 of 64 lanes
    DeconvTester t = k2(c.ci, c.co).batch(c.n).input(c.in);
    t.Test();
    EXPECT_NE(plan_of(t).at("algorithm"), "gemm_x");
    if (!z) continue;
    DeconvTester forced = k2(c.ci, c.co).batch(c.n).input(c.in).hints(gx);  // partial half-vector stores
    forced.Test();
    EXPECT_EQ(plan_of(forced).at("algorithm"), "gemm_x");
  }
  DeconvTester one_d = T().rank(1).channels(6, 5).input({47}).kernel({2}).stride({2}).layout(DataFormat::NCX);
  one_d.Test();
  DeconvTester three_d = T().rank(3).batch(2).channels(4, 3).input({3, 4, 16}).kernel({2, 2, 2}).stride({2, 2, 2})
                             .layout(DataFormat::NCX);
  three_d.Test();
  T().rank(3).channels(3, 2).input({2, 3, 5}).kernel({1, 3, 2}).stride({1, 3, 2}).layout(DataFormat::NCX).Test();
  if (!z) return;
  EXPECT_EQ(plan_of(one_d).at("algorithm"), "gemm_x");
  EXPECT_EQ(plan_of(three_d).at("algorithm"), "gemm_x");
  TuningHints h;
  h.algorithm = "gemm_x";
  h.oc_vectors = 1;
  h.ic_unroll = 3;
  DeconvTester forced = k2(300, 20).input({3, 30}).hints(h);
  forced.Test();
  EXPECT_EQ(plan_of(forced).at("algorithm"), "gemm_x");
  // Pads or a kernel other than the stride: not this family.
  DeconvTester padded = k2(4, 4).input({5, 6}).pads({0, 1}, {0, 1});
  padded.Test();
  EXPECT_NE(plan_of(padded).at("algorithm"), "gemm_x");
}

// gemm_x with a 1x1 kernel on x (stride 1 there): the vectors are stored as they are, one store per input
// row their lanes cross. Rows of whole vectors and ragged ones, a flat plane of 7-pixel rows, stacked
// rows, 1-D, a y stride of 2, 3-D, bf16 pairs with an odd channel count; whole-vector rows take it by
// default (a pointwise layer: the source read where it lies, no row buffer), ragged ones keep the row buffer
// where the reduction is long enough to repay the lanes they leave empty (gemm_x_preferred).
TEST_P(KernelCases, GemmAlongXStrideOne) {
  const bool z = isa() == Isa::avx512_core;
  TuningHints gx;
  gx.algorithm = "gemm_x";
  auto ncx = [&](int rank) { return T().rank(rank).layout(DataFormat::NCX); };
  const std::vector<DeconvTester> cases = {
      ncx(2).batch(2).channels(9, 21).input({3, 32}).kernel({1, 1}),
      ncx(2).channels(5, 7).input({4, 37}).kernel({1, 1}),
      ncx(2).channels(3, 4).input({5, 7}).kernel({1, 1}),
      ncx(2).channels(4, 6).input({20, 12}).kernel({1, 1}),
      ncx(1).channels(7, 5).input({100}).kernel({1}),
      ncx(2).channels(6, 5).input({3, 30}).kernel({2, 1}).stride({2, 1}),
      ncx(3).channels(4, 3).input({2, 3, 16}).kernel({2, 2, 1}).stride({2, 2, 1}),
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    if (!z) {
      expect_refused(DeconvTester(cases[i]).hints(gx), "gemm_x", "gemm_x on AVX2");
      continue;
    }
    DeconvTester forced = DeconvTester(cases[i]).hints(gx);
    forced.Test();
    EXPECT_EQ(plan_of(forced).at("algorithm"), "gemm_x");
  }
  DeconvTester whole = ncx(2).batch(2).channels(24, 40).input({6, 64}).kernel({1, 1});
  DeconvTester ragged = ncx(2).channels(96, 40).input({6, 37}).kernel({1, 1});  // 9.3 lanes empty per output
  whole.Test();
  ragged.Test();
  EXPECT_EQ(plan_of(whole).at("algorithm") == "gemm_x", z);
  EXPECT_NE(plan_of(ragged).at("algorithm"), "gemm_x");
}

// gemm_x with each row group's source copied into a tile (pack_src), both ways on the same shapes: ragged
// rows, three stacked rows with a shorter last group, a flat plane, a channel tail, 3D, batches, and oneTBB
// tasks that each pack their own tile. The default packs planes a multiple of 8 KiB apart from 17 input
// channels on. AVX2 has no gemm_x: the hint is refused by name.
TEST_P(KernelCases, GemmAlongXPackedSource) {
  auto k2 = [&](int64_t ci, int64_t co) {
    return T().channels(ci, co).kernel({2, 2}).stride({2, 2}).layout(DataFormat::NCX);
  };
  const std::vector<DeconvTester> cases = {
      k2(5, 7).batch(2).input({6, 14}),     // flat plane, a tail block of channels
      k2(2, 3).input({70, 12}),             // three rows per block, a last group of one
      k2(3, 9).input({5, 110}),             // seven vectors in balanced blocks, 110 of 112 lanes
      k2(40, 24).batch(2).input({9, 33}),   // oneTBB tasks, unroll remainder, two channel tiles
      T().rank(3).batch(2).channels(4, 3).input({3, 4, 16}).kernel({2, 2, 2}).stride({2, 2, 2}).layout(DataFormat::NCX),
  };
  for (int pack : {0, 1})
    for (size_t i = 0; i < cases.size(); ++i) {
      SCOPED_TRACE("case " + std::to_string(i) + ", pack_src " + std::to_string(pack));
      TuningHints h;
      h.algorithm = "gemm_x";
      h.pack_src = pack;
      DeconvTester t = cases[i];
      t.hints(h);
      if (isa() != Isa::avx512_core) {
        expect_refused(t, "gemm_x", "gemm_x on AVX2");
        continue;
      }
      t.Test();
      EXPECT_EQ(plan_of(t).at("pack_src").get<bool>(), pack == 1);
    }
  if (isa() != Isa::avx512_core) return;
  // The default: 64 x 64 (f32) or 64 x 128 (16-bit) planes are 16 KiB apart; 4 KiB apart they are not
  // packed, nor 12 KiB apart, nor with 16 input channels, nor for one output channel (one block reads
  // the tile).
  const int64_t w = dtype() == DType::f32 ? 64 : 128;
  TuningHints gx;
  gx.algorithm = "gemm_x";
  auto packed = [&](DeconvTester t) {
    const nlohmann::json plan = plan_of(t.hints(gx));
    EXPECT_EQ(plan.at("algorithm"), "gemm_x");
    return plan.at("pack_src").get<bool>();
  };
  DeconvTester sixteen_k = k2(24, 40).input({64, w});
  sixteen_k.Test();
  EXPECT_EQ(plan_of(sixteen_k).at("algorithm"), "gemm_x");
  EXPECT_TRUE(plan_of(sixteen_k).at("pack_src").get<bool>());
  // bf16 pairs pack from 8 channel blocks per task on (20 here, with 16 images the tasks keep them all;
  // GemmAlongXBf16Pairs), a single block never; one image's 16 rows are cut into tasks of fewer blocks.
  const bool pairs = dtype() == DType::bf16 && cpu_bf16_dot();
  EXPECT_EQ(packed(k2(24, 40).batch(16).input({16, w})), pairs);
  EXPECT_EQ(packed(k2(24, 40).batch(16).input({48, w})), pairs);
  EXPECT_EQ(packed(k2(16, 40).batch(16).input({64, w})), pairs);
  EXPECT_FALSE(packed(k2(24, 40).input({16, w})));
  EXPECT_FALSE(packed(k2(24, 1).input({64, w})));
  TuningHints direct;
  direct.algorithm = "direct";
  direct.pack_src = 1;
  expect_refused(k2(24, 40).input({4, 16}).hints(direct), "pack_src", "pack_src for the direct family");
}

// gemm_x on bf16 channel pairs (vdpbf16ps), with and without a packed tile, against the same shapes
// without pairs: odd channel counts (a last single channel), an unroll remainder, ragged rows (masked
// halves of each pair register), a flat plane, stacked rows with a shorter last group, 1D and 3D.
TEST_P(KernelCases, GemmAlongXBf16Pairs) {
  if (dtype() != DType::bf16) GTEST_SKIP() << "a bf16 route";
  if (isa() != Isa::avx512_core || !cpu_bf16_dot()) GTEST_SKIP() << "needs AVX-512 and avx512_bf16";
  auto k2 = [&](int64_t ci, int64_t co) {
    return T().channels(ci, co).kernel({2, 2}).stride({2, 2}).layout(DataFormat::NCX);
  };
  const std::vector<DeconvTester> cases = {
      k2(5, 7).batch(2).input({6, 14}),   // flat plane, an odd last channel, a tail block of channels
      k2(7, 3).input({70, 12}),           // three rows per block, a last group of one; 3 pairs + 1
      k2(2, 9).input({5, 110}),           // one pair; seven vectors, 110 of 112 lanes
      k2(40, 24).batch(2).input({9, 33}), // oneTBB tasks, two channel tiles
      T().rank(1).channels(9, 5).input({47}).kernel({2}).stride({2}).layout(DataFormat::NCX),
      T().rank(3).batch(2).channels(3, 3).input({3, 4, 16}).kernel({2, 2, 2}).stride({2, 2, 2})
          .layout(DataFormat::NCX),
  };
  for (int pairs : {0, 1})
    for (int pack : {0, 1})
      for (size_t i = 0; i < cases.size(); ++i) {
        SCOPED_TRACE("case " + std::to_string(i) + ", ic_pairs " + std::to_string(pairs) + ", pack_src " +
                     std::to_string(pack));
        TuningHints h;
        h.algorithm = "gemm_x";
        h.ic_pairs = pairs;
        h.pack_src = pack;
        h.ic_unroll = i == 1 ? 2 : 0;
        DeconvTester t = cases[i];
        t.hints(h).Test();
        const nlohmann::json plan = plan_of(t);
        EXPECT_EQ(plan.at("algorithm"), "gemm_x");
        EXPECT_EQ(plan.at("choices").at("ic_pairs").get<int>(), pairs);
      }
  // The default: pairs where gemm_x takes the layer in f32 too; a packed tile from 8 channel blocks per
  // task on (3 channels per block: 8 output channels in 3 blocks, 40 in 14; 16 images keep them in one task).
  for (int64_t co : {8, 40}) {
    DeconvTester by_default = k2(6, co).batch(16).input({10, 32});
    by_default.Test();
    const nlohmann::json plan = plan_of(by_default);
    EXPECT_EQ(plan.at("algorithm"), "gemm_x");
    EXPECT_EQ(plan.at("choices").at("ic_pairs").get<int>(), 1);
    EXPECT_EQ(plan.at("pack_src").get<bool>(), co == 40) << co << " output channels";
  }
}

// A kernel shorter than the stride leaves outputs with no term at all: they must be exactly zero even
// next to an infinite input (the zero-weight lanes must not see it: 0 * inf is NaN).
TEST_P(KernelCases, DepthwiseAlongXKeepsInfinitiesOutOfTaplessOutputs) {
  Descriptor d = descriptor_from_json(
      R"({"src":[1,16,1,20],"weights":[16,1,1,3],"groups":16,"strides":[1,4],"data_format":"NCX"})");
  d.dtype = d.weights_dtype = dtype();
  Options o = testing::isa_options(isa());
  o.use_cache = false;
  const Kernel k = compile(d, o);
  ASSERT_EQ(nlohmann::json::parse(k.plan_text()).at("algorithm"), "depthwise_x");
  const Problem p = resolve(d);
  verify::TypedData src(dtype(), p.src_elements()), wei(dtype(), p.weights_elements()), dst(dtype(), p.dst_elements());
  for (int64_t i = 0; i < src.count; ++i) src.set(i, 1);
  for (int64_t i = 0; i < wei.count; ++i) wei.set(i, 0.5);
  for (int64_t i = 0; i < dst.count; ++i) dst.set(i, -1);
  src.set(3 * 20 + 7, std::numeric_limits<double>::infinity());
  k.execute(src.view(), k.pack_weights(wei.view()), dst.view());
  const int64_t ow = p.out.back();  // (20 - 1) * 4 + 3 = 79
  for (int64_t c = 0; c < 16; ++c)
    for (int64_t x = 0; x < ow; ++x) {
      const double want = x % 4 == 3 ? 0 : (c == 3 && x / 4 == 7 ? std::numeric_limits<double>::infinity() : 0.5);
      ASSERT_EQ(dst.at(c * ow + x), want) << "channel " << c << ", x " << x;
    }
}

// gemm_x with many kernel positions per vector: the block shrinks to fit 24 accumulators, and beyond 24
// positions the row buffer takes over.
TEST_P(KernelCases, GemmAlongXFitsItsAccumulators) {
  const bool z = isa() == Isa::avx512_core;
  DeconvTester two_d =
      T().channels(4, 4).input({8, 16}).kernel({5, 2}).stride({5, 2}).layout(DataFormat::NCX);
  two_d.Test();
  DeconvTester three_d = T().rank(3).channels(4, 4).input({4, 4, 16}).kernel({3, 2, 2}).stride({3, 2, 2})
                             .layout(DataFormat::NCX);
  three_d.Test();
  DeconvTester too_many = T().rank(3).channels(3, 2).input({2, 3, 16}).kernel({4, 4, 2}).stride({4, 4, 2})
                              .layout(DataFormat::NCX);
  too_many.Test();
  if (!z) return;
  EXPECT_EQ(plan_of(two_d).at("algorithm"), "gemm_x");
  EXPECT_EQ(plan_of(three_d).at("algorithm"), "gemm_x");
  EXPECT_NE(plan_of(too_many).at("algorithm"), "gemm_x");
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

// Output channels in whole blocks of four vectors over short reductions: on AVX2 f16 the default block is
// 2 pixels x 4 vectors (PlanHeuristic.F16OnAvx2TakesFourVectorBlocks), with the pixel's widened channels
// in stack slots; both layouts, a row that is not a whole number of blocks, an odd channel count in.
TEST_P(KernelCases, FourVectorBlocks) {
  for (DataFormat f : kFormats) {
    T().channels(13, 32).input({3, 7}).kernel({3, 3}).stride({2, 2}).pads({1, 1}, {1, 1}).layout(f).Test();
    T().rank(1).batch(2).channels(16, 64).input({9}).kernel({4}).stride({2}).pads({1}, {1}).layout(f).Test();
  }
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

INSTANTIATE_TEST_SUITE_P(Isa, KernelCases, ::testing::ValuesIn(all_cases()), case_name);

}  // namespace
}  // namespace deconvjit
