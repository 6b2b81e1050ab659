// Targeted JIT cases on the NCX families with vectors along x (fixture: support/kernel_cases.hpp): dot_x,
// col_x, depthwise_x and gemm_x, with their strides, pads, ragged rows, packed tiles and bf16 pairs.
#include <gtest/gtest.h>

#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "deconvjit/deconvjit.hpp"
#include "runtime/typed_data.hpp"
#include "support/deconv_tester.hpp"
#include "support/kernel_cases.hpp"

namespace deconvjit {
namespace {

using testing::DeconvTester;
using testing::KernelCases;
using V = std::vector<int64_t>;

// ---- dot_x and col_x ------------------------------------------------------------------------------------

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

// col_x: NCX (groups: test_col_x_groups.cpp); a GEMM along input x with col2im in registers. Strides 1-16,
// kernels narrower and wider than the stride (up to 27 x taps), pads that cut into the first tile and
// pads wide enough that the row's first tile is not tile 0, output padding, channel blocks with a tail,
// 1-4 vectors per tile, accumulator sets with a remainder, rows cut into parts (each starts from the tile
// before it), 3-D. AVX2 has 8 lanes and 12 accumulators: its tiles hold at most 2 vectors (hints beyond
// that are left to the plan), and a stride of 16 or more than 12 x taps is refused by name.
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
      {1, 10, 3, {61}, {12}, {8}, {5}, {3}, {2}, 0, 0, 0, 2},      // AVX2: a stride of all 8 lanes
      {2, 20, 10, {9, 43}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, 0, 0, 0, 0},  // ov_spec_ex1's shape
  };
  const bool ymm = isa() != Isa::avx512_core;
  for (const Case& c : cases) {
    SCOPED_TRACE("case C_IN " + std::to_string(c.c_in) + " C_OUT " + std::to_string(c.c_out) + " K " +
                 std::to_string(c.k.back()) + " s " + std::to_string(c.s.back()));
    TuningHints h;
    h.algorithm = "col_x";
    h.oc_vectors = c.oc, h.ur_w = c.ur, h.ic_unroll = c.sets, h.x_split = c.parts;
    if (dtype() == DType::bf16 && h.ur_w == 4) h.ur_w = 3;  // (bf16 channel pairs hold at most 3 vectors)
    if (ymm) {
      h.ur_w = std::min(h.ur_w, 2);
      const int64_t oc = h.oc_vectors ? h.oc_vectors : std::min<int64_t>(c.c_out, 12 / c.k.back());
      if (std::max(1, h.ic_unroll) * oc * c.k.back() * std::max(1, h.ur_w) > 12) h.ic_unroll = 0;
      if (oc * c.k.back() * std::max(1, h.ur_w) > 12) h.oc_vectors = 0, h.ur_w = 0;
    }
    DeconvTester t = T().rank(c.rank).batch(2).channels(c.c_in, c.c_out).input(c.in).kernel(c.k).stride(c.s)
                         .pads(c.pb, c.pe).output_padding(c.op).hints(h);
    if (ymm && (8 % c.s.back() != 0 || c.k.back() >= 8 * c.s.back() || c.k.back() > 12)) {
      try {
        compile(t.descriptor(), t.options());
        ADD_FAILURE() << "col_x accepted on " << to_string(isa());
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), Error::Kind::InvalidArgument) << e.what();
        EXPECT_NE(std::string(e.what()).find("col_x needs NCX data"), std::string::npos) << e.what();
      }
      continue;
    }
    t.Test();
    EXPECT_EQ(plan_of(t).at("algorithm"), "col_x");
  }
  // Tiles across images (batch_block) for rows of one vector: 2 and 4 images per tile on a ragged 11-pixel
  // row under pads (AVX2: 7 pixels), and a row of two tiles (the kernel reaches past a 16-pixel row) cut
  // into two parts.
  for (int images : {2, 4}) {
    if (images == 4 && (dtype() == DType::bf16 || ymm)) continue;  // (bf16 pairs: 3 vectors; AVX2: 2)
    TuningHints h;
    h.algorithm = "col_x", h.batch_block = 1, h.ur_w = images, h.oc_vectors = 1;
    SCOPED_TRACE("images per tile " + std::to_string(images));
    DeconvTester t = T().batch(4).channels(9, 2).input({3, ymm ? 7 : 11}).kernel({3, 5}).stride({2, 2})
                         .pads({1, 1}, {1, 2})
                         .hints(h);
    t.Test();
    EXPECT_TRUE(plan_of(t).at("block_over_batch").get<bool>());
  }
  TuningHints two;
  two.algorithm = "col_x", two.batch_block = 1, two.ur_w = 2, two.x_split = 2;
  T().batch(4).channels(5, 1).input({2, ymm ? 8 : 16}).kernel({2, ymm ? 5 : 13}).stride({1, 1}).pads({0, 2}, {1, 0})
      .hints(two).Test();
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
  // input 40 (past the row, a zeroed load) would give it 0 * inf = NaN unless that lane's FMA is masked
  // (AVX2: unless the lane is cleared after the reduction; 36 inputs leave half of the last vector).
  // And an infinite input, which must reach exactly the outputs it feeds.
  TuningHints h;
  h.algorithm = "col_x";
  T().rank(1).channels(8, 2).input({ymm ? 36 : 40}).kernel({5}).stride({2}).pads({2}, {0}).output_padding({1})
      .hints(h)
      .edit([](verify::TypedOperands& o) { o.weights.set(0, std::numeric_limits<double>::infinity()); })
      .Test();
  T().rank(1).channels(8, 2).input({40}).kernel({5}).stride({2}).pads({2}, {2}).hints(h)
      .edit([](verify::TypedOperands& o) { o.src.set(17, std::numeric_limits<double>::infinity()); })
      .Test();
}

// ---- depthwise_x ----------------------------------------------------------------------------------------

// NCX depthwise with the vector along x: strides up to the lanes (stride 3 leaves lanes idle: see
// AlongXWithIdleLanes; 16 on AVX2 is past them and falls back), kernels shorter and much longer than the
// stride, negative and large pads, rows of many vectors (the unmasked loop), channel counts that leave a
// remainder block, batches, 1D and 3D.
TEST_P(KernelCases, DepthwiseAlongX) {
  const int64_t lanes = isa() == Isa::avx512_core ? 16 : 8;
  auto dw = [&](int64_t c) { return T().groups(c).channels(c, c).layout(DataFormat::NCX); };
  for (int64_t s : {1, 2, 3, 4, 8, 16}) {
    SCOPED_TRACE("stride " + std::to_string(s));
    DeconvTester t = dw(5).input({3, 9}).kernel({3, 2 * s + 1}).stride({2, s}).pads({1, s / 2}, {0, s});
    t.Test();
    EXPECT_EQ(plan_of(t).at("algorithm"), s <= lanes ? "depthwise_x" : "depthwise");
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

// Strides that do not divide the lanes: each vector holds the largest multiple of the stride (x_vector_span;
// stride 3 on 8 lanes: 6 outputs), the lanes past it idle. Kernels shorter and longer than the stride,
// negative pads and pads past the kernel, rows of one vector and of many (the unmasked loop), a channel
// remainder block, batches, 1-D and 3-D; dot_x alike; a tapless output next to an infinite input stays
// zero. A stride above the lanes is refused by name.
TEST_P(KernelCases, AlongXWithIdleLanes) {
  const int64_t lanes = isa() == Isa::avx512_core ? 16 : 8;
  TuningHints dwx, dotx;
  dwx.algorithm = "depthwise_x";
  dotx.algorithm = "dot_x";
  auto dw = [&](int64_t c) { return T().groups(c).channels(c, c).layout(DataFormat::NCX).hints(dwx); };
  std::vector<int64_t> strides = {3, 5, 6, 7};
  if (lanes == 16) strides.insert(strides.end(), {9, 10, 12, 15});
  for (int64_t s : strides) {
    SCOPED_TRACE("stride " + std::to_string(s));
    const std::vector<DeconvTester> cases = {
        dw(5).input({3, 9}).kernel({3, 2 * s + 1}).stride({2, s}).pads({1, s / 2}, {0, s}),
        dw(3).batch(2).input({2, 70}).kernel({2, s - 1}).stride({1, s}),              // shorter than the stride
        dw(17).input({2, 40}).kernel({1, 2 * s}).stride({1, s}).pads({0, -2}, {0, 1}),  // negative pad
        dw(4).rank(1).input({33}).kernel({3 * s}).stride({s}).pads({s + 1}, {2}),     // pads past a tap
        dw(6).rank(3).input({2, 3, 11}).kernel({2, 2, s + 2}).stride({2, 1, s}).pads({0, 1, 1}, {1, 0, 0}),
        T().channels(9, 3).input({4, 23}).kernel({3, s + 1}).stride({2, s}).pads({1, 1}, {0, 2})
            .layout(DataFormat::NCX).hints(dotx),
        T().rank(1).channels(5, 1).input({90}).kernel({2 * s}).stride({s}).pads({s / 2}, {s / 2})
            .layout(DataFormat::NCX).hints(dotx),
    };
    for (size_t i = 0; i < cases.size(); ++i) {
      SCOPED_TRACE("case " + std::to_string(i));
      DeconvTester t = cases[i];
      t.Test();
      EXPECT_EQ(plan_of(t).at("algorithm"), i < 5 ? "depthwise_x" : "dot_x");
    }
  }
  // Tapless outputs (kernel 2 at stride 3) next to an infinite input stay exactly zero.
  dw(16).input({1, 20}).kernel({1, 2}).stride({1, 3})
      .edit([](verify::TypedOperands& o) { o.src.set(3 * 20 + 7, std::numeric_limits<double>::infinity()); })
      .Test();
  expect_refused(dw(4).input({3, 9}).kernel({3, 3}).stride({2, lanes + 1}), "depthwise_x", "an x stride up to");
  // By default only depthwise takes idle lanes (x_vectors_whole): the dot family's layers never dot_x, and a
  // one-channel layer the NXC family on the caller's tensors.
  const DeconvTester few = T().channels(9, 3).input({4, 64}).kernel({3, 4}).stride({2, 3}).layout(DataFormat::NCX);
  few.Test();
  EXPECT_NE(plan_of(few).at("algorithm"), "dot_x");
  const DeconvTester one = T().channels(1, 1).input({20, 30}).kernel({3, 3}).stride({3, 3}).layout(DataFormat::NCX);
  one.Test();
  EXPECT_EQ(plan_of(one).at("layout"), "nxc");
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

// ---- gemm_x ---------------------------------------------------------------------------------------------

// NCX with K == s and no pads: the GEMM along x, on both ISAs (AVX2 by hint). Rows of one vector stacked 3
// and 2 at a time, flat planes, ragged rows (masked loads, stores of half vectors), channel tails,
// 1D and 3D, tiles of row groups (an image's source larger than L2), and a forced hint with an unroll
// remainder.
TEST_P(KernelCases, GemmAlongX) {
  const bool z = isa() == Isa::avx512_core;
  const int64_t lanes = z ? 16 : 8;
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
      {3, 5, 1, {9, 6}},     // a flat plane of 6-pixel rows on both ISAs
      {2, 3, 1, {71, 8}},    // AVX2: three stacked rows and a last group of two (AVX-512: a flat plane)
      {3, 4, 1, {60, 7}},    // AVX2: 7-pixel rows stacked, the plane too big to run flat
  };
  TuningHints forced_gx;
  forced_gx.algorithm = "gemm_x";  // (9- and 12-pixel rows would take the NXC gemm by default)
  for (const Case& c : cases) {
    DeconvTester forced = k2(c.ci, c.co).batch(c.n).input(c.in).hints(forced_gx);
    forced.Test();
    EXPECT_EQ(plan_of(forced).at("algorithm"), "gemm_x");
    const bool flat = c.in[1] % lanes != 0 && c.in[1] < lanes && c.in[0] * c.in[1] <= 48 * lanes;
    EXPECT_EQ(plan_of(forced).at("flat_plane").get<bool>(), flat) << c.in[1] << "-pixel rows";
    if (!flat && c.in[1] <= lanes) EXPECT_EQ(plan_of(forced).at("rows_per_block"), std::min<int64_t>(3, c.in[0]));
    if (c.ci == 64) EXPECT_LT(plan_of(forced).at("row_chunk").get<int64_t>(), 36);  // several row tiles
    if (z || c.in[1] <= 8) continue;  // (the AVX-512 default is gemm_x; below, AVX2's for the first seven)
    // AVX2's default: the row families, or gemm through copies when folding the two x phases into the
    // channels fills vectors a third again better (3 channels fill 3 of 8 lanes, folded 6; 9 fill 9 of 16,
    // folded 18 of 24); 64 -> 8 channels over rows of 9 vectors take col_x (col_x_preferred).
    DeconvTester t = k2(c.ci, c.co).batch(c.n).input(c.in);
    t.Test();
    auto lane_use = [](int64_t c) { return static_cast<double>(c) / static_cast<double>((c + 7) / 8 * 8); };
    const bool folds = lane_use(2 * c.co) >= 1.3 * lane_use(c.co);
    EXPECT_EQ(plan_of(t).at("algorithm"), c.ci == 64 ? "col_x" : folds ? "gemm" : "direct") << c.co << " channels";
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
  EXPECT_EQ(plan_of(one_d).at("algorithm") == "gemm_x", z);
  EXPECT_EQ(plan_of(three_d).at("algorithm") == "gemm_x", z);
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

// gemm_x's wide blocks (more than three vectors along a row, each loaded into one of three input registers
// in turn): one output column (f32 reads the vector in its FMA; a ragged last vector under a mask), four
// columns of a 2x2 stride-2 kernel (the stride-2 store of each pair), five output channels, 1-D and 3-D,
// and an unroll remainder. More than five columns, or stacked rows, are refused by name.
TEST_P(KernelCases, GemmAlongXWideBlocks) {
  auto ncx = [&](int rank) { return T().rank(rank).layout(DataFormat::NCX); };
  struct Case { DeconvTester t; int ur; };
  const Case cases[] = {
      {ncx(2).batch(2).channels(7, 1).input({3, 100}).kernel({1, 1}), 7},       // 7 vectors, 4 lanes last
      {ncx(2).channels(5, 1).input({4, 70}).kernel({2, 2}).stride({2, 2}), 5},  // 4 columns
      {ncx(2).channels(9, 5).input({2, 64}).kernel({1, 1}), 4},                 // 5 columns
      {ncx(1).channels(3, 2).input({150}).kernel({2}).stride({2}), 6},           // 1-D, 4 columns
      {ncx(3).channels(4, 1).input({2, 3, 80}).kernel({1, 1, 1}), 5},            // 3-D
  };
  for (const Case& c : cases) {
    TuningHints h;
    h.algorithm = "gemm_x";
    h.ur_w = c.ur;
    h.ic_unroll = 2;
    if (dtype() == DType::bf16 && isa() == Isa::avx512_core) h.ic_pairs = 0;  // (pairs load their own way)
    DeconvTester t = DeconvTester(c.t).hints(h);
    if (isa() != Isa::avx512_core) {  // (AVX2: 16 registers, no room for the five broadcasts)
      expect_refused(t, "gemm_x", "wide blocks on AVX2");
      continue;
    }
    t.Test();
    EXPECT_EQ(plan_of(t).at("ur_w"), c.ur);
  }
  if (isa() != Isa::avx512_core) return;
  TuningHints six;
  six.algorithm = "gemm_x";
  six.ur_w = 4;
  expect_refused(ncx(2).channels(9, 6).input({2, 64}).kernel({1, 1}).hints(six), "at most 5 output channels",
                 "six columns in a wide block");
  TuningHints stacked = six;
  stacked.rows_per_block = 2;
  expect_refused(ncx(2).channels(9, 1).input({6, 16}).kernel({1, 1}).hints(stacked), "only along one row",
                 "wide blocks of stacked rows");
}

// gemm_x with each row group's source copied into a tile (pack_src), both ways on the same shapes: ragged
// rows, three stacked rows with a shorter last group, a flat plane, a channel tail, 3D, batches, and oneTBB
// tasks that each pack their own tile. The default packs planes a multiple of 8 KiB apart from 17 input
// channels on (AVX-512; AVX2 packs by hint).
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

}  // namespace
}  // namespace deconvjit
