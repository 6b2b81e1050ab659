// Targeted JIT cases on the register blocks (fixture: support/kernel_cases.hpp): unrolls, accumulator sets,
// one- and four-vector blocks, bf16 even/odd halves, depthwise channel blocks; the source's copies, widening
// and bands; non-temporal stores.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "deconvjit/deconvjit.hpp"
#include "support/deconv_tester.hpp"
#include "support/kernel_cases.hpp"

namespace deconvjit {
namespace {

using testing::DeconvTester;
using testing::KernelCases;
using testing::kFormats;

// ---- register blocks ------------------------------------------------------------------------------------

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

// Output channels in whole blocks of four vectors over short reductions: on AVX2 f16 the default block is
// 2 pixels x 4 vectors (PlanHeuristic.F16OnAvx2WidensOrTakesFourVectorBlocks), with the pixel's widened channels
// in stack slots; both layouts, a row that is not a whole number of blocks, an odd channel count in.
TEST_P(KernelCases, FourVectorBlocks) {
  for (DataFormat f : kFormats) {
    T().channels(13, 32).input({3, 7}).kernel({3, 3}).stride({2, 2}).pads({1, 1}, {1, 1}).layout(f).Test();
    T().rank(1).batch(2).channels(16, 64).input({9}).kernel({4}).stride({2}).pads({1}, {1}).layout(f).Test();
  }
}

// AVX2 blocks whose FMAs read some weight vectors from memory (Plan::weight_regs): the 3 x 4 tile with one
// such vector, fewer kept (down to one), a tail block of fewer vectors (which keeps all of its own) and a
// masked last vector, gemm, both layouts, an unroll remainder, narrow blocks cycling accumulator sets, the
// halo's edge blocks; f16 through the widened stack slots (three or more vectors), f32 in ic passes.
TEST_P(KernelCases, WeightsReadByTheFmas) {
  if (isa() != Isa::avx2) GTEST_SKIP() << "weight_regs is an AVX2 choice (AVX-512 keeps every weight vector)";
  auto hints = [](int nv, int wr, int ur = 0, const char* family = "direct") {
    TuningHints h;
    h.algorithm = family;
    h.oc_vectors = nv;
    h.weight_regs = wr;
    h.ur_w = ur;
    return h;
  };
  const DeconvTester k3 = T().channels(13, 32).input({4, 11}).kernel({3, 3}).stride({2, 2}).pads({1, 1}, {1, 1});
  for (DataFormat f : kFormats) {
    SCOPED_TRACE(f == DataFormat::NXC ? "NXC" : "NCX");
    DeconvTester(k3).layout(f).hints(hints(4, 3)).Test();
    DeconvTester(k3).layout(f).hints(hints(4, 1, 2)).Test();
    DeconvTester(k3).channels(13, 60).layout(f).hints(hints(4, 2)).Test();  // 4 + 4 vectors, the last masked
    DeconvTester(k3).channels(7, 44).layout(f).hints(hints(4, 3)).Test();   // 4 + 2 vectors (tail keeps 2)
    DeconvTester(k3).channels(9, 40).layout(f).hints(hints(5, 2, 2)).Test();
  }
  TuningHints narrow = hints(4, 2, 1);
  narrow.ic_unroll = 3;
  DeconvTester(k3).channels(17, 32).layout(DataFormat::NXC).hints(narrow).Test();
  TuningHints edges = hints(4, 3);
  edges.x_halo = edges.edge_blocks = 1;
  DeconvTester(k3).kernel({5, 5}).layout(DataFormat::NXC).hints(edges).Test();
  T().channels(12, 32).input({4, 7}).kernel({2, 2}).stride({2, 2}).layout(DataFormat::NXC)
      .hints(hints(4, 3, 0, "gemm")).Test();
  if (dtype() == DType::f32) {
    TuningHints passes = hints(4, 3);
    passes.ic_block = 8;
    DeconvTester(k3).channels(24, 32).layout(DataFormat::NXC).hints(passes).Test();
  }
  const nlohmann::json pl = plan_of(DeconvTester(k3).layout(DataFormat::NXC).hints(hints(4, 3)));
  EXPECT_EQ(pl.at("weight_regs").get<int>(), 3);
  EXPECT_EQ(pl.at("ur_w").get<int>(), 3);  // 12 accumulators, 3 weight vectors and a broadcast
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

// ---- the source: copies, widening and bands -------------------------------------------------------------

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

// A 16-bit source widened to f32 once before the kernel (widen_src), in every route that can take it:
// direct in NXC and through the NCX row buffer, with a halo, across images, gemm, depthwise, the NCX
// scratch route, a channel tail, the dot family (NXC, and NCX through its source copy whole and in bands,
// fused x taps, a channel tail). f32 data has nothing to widen: the hint is refused by name.
TEST_P(KernelCases, WidenedSource) {
  TuningHints h;
  h.widen_src = 1;
  auto k3 = [&](int64_t ci, int64_t co) {
    return T().channels(ci, co).kernel({3, 3}).stride({2, 2}).layout(DataFormat::NXC);
  };
  if (dtype() == DType::f32) return expect_refused(k3(4, 4).input({3, 3}).hints(h), "widen_src", "f32 widen_src");
  TuningHints halo = h, batch = h, scratch = h, dot = h, fused = h;
  halo.x_halo = 1;
  batch.batch_block = 1;
  scratch.layout = "scratch";
  dot.algorithm = fused.algorithm = "dot";
  fused.fuse_x_taps = 1;
  TuningHints dot_band = dot;
  dot_band.band_rows = 2;
  struct Case { DeconvTester t; const char* family; };
  const Case cases[] = {
      {k3(7, 20).input({5, 9}).pads({1, 1}, {1, 1}).hints(h), "direct"},
      {k3(7, 20).input({5, 9}).pads({1, 1}, {1, 1}).layout(DataFormat::NCX).hints(h), "direct"},
      {k3(33, 40).batch(2).input({6, 11}).kernel({4, 4}).pads({1, 1}, {1, 1}).hints(halo), "direct"},
      {k3(5, 3).batch(4).input({2, 3}).hints(batch), "direct"},
      {k3(16, 8).input({4, 6}).kernel({2, 2}).hints(h), "gemm"},
      {k3(32, 32).groups(32).input({5, 9}).hints(h), "depthwise"},
      {k3(6, 5).input({4, 7}).layout(DataFormat::NCX).hints(scratch), "direct"},
      {k3(40, 2).input({5, 9}).pads({1, 1}, {1, 1}).hints(dot), "dot"},
      {k3(37, 3).batch(2).input({6, 7}).kernel({5, 5}).layout(DataFormat::NCX).hints(dot), "dot"},
      {k3(33, 1).input({4, 11}).kernel({5, 5}).hints(fused), "dot"},
      {k3(35, 2).input({8, 9}).layout(DataFormat::NCX).hints(dot_band), "dot"},
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
  // The default: f16 only, not depthwise; on AVX2 where each source element feeds 128+ FLOPs (2 x output
  // channels x taps), on AVX-512 with at most 3 input channels.
  const bool f16 = dtype() == DType::f16, z = isa() == Isa::avx512_core;
  auto widened = [&](DeconvTester t) { return plan_of(t).at("widen_src").get<bool>(); };
  EXPECT_EQ(widened(k3(24, 32).kernel({5, 5}).input({4, 6})), f16 && !z);
  EXPECT_EQ(widened(k3(24, 8).input({4, 6})), f16 && !z);                    // 144 FLOPs per source element
  EXPECT_EQ(widened(k3(24, 64).kernel({1, 1}).input({4, 6})), f16 && !z);    // 128 FLOPs
  EXPECT_EQ(widened(k3(24, 64).kernel({2, 2}).input({4, 6})), f16 && !z);    // gemm, 512 FLOPs
  EXPECT_FALSE(widened(k3(24, 7).input({4, 6})));                            // 126 FLOPs
  EXPECT_EQ(widened(k3(2, 32).kernel({5, 5}).input({4, 6})), f16);
  EXPECT_FALSE(widened(k3(32, 32).groups(32).kernel({5, 5}).input({4, 6})));
}

// The NCX source transposed band by band (band_rows) rather than whole: bands of one row and of the whole
// height, a halo, pads, output rows with no taps (stride above the kernel), groups, batches on oneTBB, a
// widened 16-bit band, 3-D planes. Refused by name for NXC data not widened, 3-D rows with several z taps per
// output plane, and 1-D rows. (NXC bands of a widened source: NxcWidenedBands.)
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
  // 3-D: a band is rows of one output plane, reading the one input plane of its z tap (k = s on z, and a
  // z stride above the kernel, whose planes in between read nothing).
  auto k3d = [&](int64_t ci, int64_t co, int64_t kz, int64_t sz) {
    return T().rank(3).channels(ci, co).input({3, 7, 9}).kernel({kz, 3, 3}).stride({sz, 2, 2})
        .pads({0, 1, 1}, {0, 1, 0}).layout(DataFormat::NCX);
  };
  cases.push_back(k3d(13, 20, 2, 2).batch(2).hints(bands(3)));
  cases.push_back(k3d(6, 9, 1, 3).batch(2).hints(halo));
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
  cases.push_back(k3d(35, 3, 2, 2).hints(dot_bands(2, 1)));
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
  only.widen_src = 0;
  expect_refused(k3(4, 4).input({5, 5}).layout(DataFormat::NXC).hints(only), "band_rows",
                 "bands of NXC data not widened");
  // 3-D by default where an image's source passes 1 MiB (64 channels of 16 x 32 x 32 do in any type, 8 do
  // not) and rows are whole tiles or 24+ pixels (not 20).
  auto band_3d = [&](int64_t c, int64_t x) {
    return plan_of(T().rank(3).channels(c, 16).input({16, 32, x}).kernel({2, 2, 2}).stride({2, 2, 2})
                       .layout(DataFormat::NCX).hints(bands(-1))).at("band_rows").get<int>();
  };
  EXPECT_GT(band_3d(64, 32), 0);
  EXPECT_GT(band_3d(64, 26), 0);
  EXPECT_EQ(band_3d(8, 32), 0);
  EXPECT_EQ(band_3d(64, 20), 0);
  // The row width is the source's, without the halo: rows of 16 pixels (whole tiles) with a halo band.
  TuningHints halo_3d = bands(-1);
  halo_3d.x_halo = 1;
  const nlohmann::json haloed = plan_of(T().rank(3).channels(128, 16).input({16, 32, 16}).kernel({2, 2, 4})
                                            .stride({2, 2, 2}).pads({0, 0, 1}, {0, 0, 1})
                                            .layout(DataFormat::NCX).hints(halo_3d));
  ASSERT_GT(haloed.at("halo").at(0).get<int>() + haloed.at("halo").at(1).get<int>(), 0);
  EXPECT_GT(haloed.at("band_rows").get<int>(), 0);
  expect_refused(T().rank(3).channels(3, 3).input({3, 4, 5}).kernel({2, 2, 2}).stride({1, 1, 1})
                     .layout(DataFormat::NCX).hints(bands(2)),
                 "band_rows", "bands of 3-D rows with two z taps per output plane");
  expect_refused(T().rank(1).channels(8, 16).input({40}).kernel({3}).stride({2}).layout(DataFormat::NCX).hints(bands(2)),
                 "band_rows", "bands of 1-D rows");
}

// NXC data widened to f32 band by band (widen_src with band_rows): each band task copies the input rows its
// output rows read, widened, into L2 instead of one whole widened copy. Bands of one row and of the whole
// height, a halo, pads, rows with no taps, groups, batches on oneTBB, the channel block innermost (oc_inner,
// which a band walks per row), the gemm and dot families (fused x taps, channel tails), 3-D planes; the
// default on AVX2 f16 where an image's source spans several 256 KB bands.
TEST_P(KernelCases, NxcWidenedBands) {
  if (dtype() == DType::f32) GTEST_SKIP() << "widen_src needs 16-bit data";
  auto k3 = [&](int64_t ci, int64_t co) {
    return T().channels(ci, co).kernel({3, 3}).stride({2, 2}).layout(DataFormat::NXC);
  };
  auto bands = [](int rows) {
    TuningHints h;
    h.widen_src = 1;
    h.band_rows = rows;
    return h;
  };
  TuningHints halo = bands(3), inner = bands(2), gemm = bands(2), dot = bands(1), dot_fused = bands(2);
  halo.x_halo = 1;
  inner.oc_inner = 1, inner.oc_vectors = 1;
  gemm.algorithm = "gemm";
  dot.algorithm = dot_fused.algorithm = "dot";
  dot_fused.fuse_x_taps = 1;
  const DeconvTester cases[] = {
      k3(7, 20).input({9, 11}).hints(bands(1)),
      k3(7, 20).input({9, 11}).pads({1, 1}, {1, 1}).hints(bands(17)),
      k3(33, 40).batch(3).input({12, 21}).kernel({4, 4}).pads({1, 1}, {1, 1}).hints(halo),
      k3(6, 5).input({7, 9}).kernel({1, 1}).hints(bands(2)),  // every other row has no tap
      k3(8, 12).groups(2).input({6, 10}).hints(bands(4)),
      k3(12, 40).batch(2).input({6, 7}).pads({1, 1}, {1, 1}).hints(inner),
      k3(37, 2).batch(2).input({7, 9}).kernel({5, 5}).pads({2, 2}, {1, 1}).hints(dot),  // the dot family
      k3(33, 1).input({6, 11}).kernel({5, 5}).hints(dot_fused),
      k3(16, 24).input({6, 8}).kernel({2, 2}).hints(gemm),
      T().rank(3).channels(13, 20).batch(2).input({3, 7, 9}).kernel({2, 3, 3}).stride({2, 2, 2})
          .pads({0, 1, 1}, {0, 1, 0}).layout(DataFormat::NXC).hints(halo),
      T().rank(3).channels(6, 9).input({3, 7, 9}).kernel({1, 3, 3}).stride({3, 2, 2})  // planes with no z tap
          .layout(DataFormat::NXC).hints(bands(3)),
  };
  for (size_t i = 0; i < std::size(cases); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    DeconvTester t = cases[i];
    t.Test();
    const nlohmann::json plan = plan_of(t);
    EXPECT_EQ(plan.at("layout"), "nxc");
    EXPECT_TRUE(plan.at("widen_src").get<bool>());
    EXPECT_GT(plan.at("band_rows").get<int>(), 0);
  }
  // The default: f16 on AVX2 (widened there) bands an image of 4 x 256 KB of input rows (64 channels of
  // 128 x 64 in f32), not one of 16 rows.
  const bool taken = dtype() == DType::f16 && isa() == Isa::avx2;
  auto band_of = [&](int64_t h) {
    return plan_of(k3(64, 64).input({h, 64}).stride({1, 1})).at("band_rows").get<int>();
  };
  EXPECT_EQ(band_of(128) > 0, taken);
  EXPECT_EQ(band_of(16), 0);
}

// ---- non-temporal stores --------------------------------------------------------------------------------

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

// nt_stores through the row buffer: the flush's transposes (AVX-512 tiles; AVX2 tiles of a line's rows by 8
// channels) send each channel's run of a line (16 f32, 32 16-bit outputs) out non-temporally where it
// starts a line (NCX, output rows a whole number of lines). Parts of a row that start mid-line (x_split 3
// of 64), bands, blocks across images, 1-D and 3-D rows (17 and 9 channels: a ragged last tile of
// channels), tails after dst that shift every run off alignment. Refused by name for rows of 17.
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
    EXPECT_TRUE(plan_of(cases[i]).at("nt_stores").get<bool>());
    EXPECT_EQ(plan_of(cases[i]).at("layout"), "ncx_row_buffer");
    for (int64_t tail : {0, 1, 3, 8}) {
      SCOPED_TRACE("elements after dst: " + std::to_string(tail));
      DeconvTester(cases[i]).dst_tail(tail).Test();
    }
  }
  expect_refused(DeconvTester(k2).input({5, 8}).kernel({3, 3}).hints(rows(0, 0, 0)), "nt_stores", "rows of 17");
  // The default: from 4 MB of output (128 channels of 128 x 128: 8 MB in f32, 4 MB in 16 bits), not below.
  auto layer = [&](int64_t side) {
    return plan_of(T().channels(128, 128).input({side, side}).kernel({3, 3}).stride({2, 2}).pads({1, 1}, {0, 0}));
  };
  const nlohmann::json big = layer(64), small = layer(32);
  ASSERT_EQ(big.at("layout"), "ncx_row_buffer");
  EXPECT_TRUE(big.at("nt_stores").get<bool>());
  EXPECT_FALSE(small.at("nt_stores").get<bool>());
}

}  // namespace
}  // namespace deconvjit
