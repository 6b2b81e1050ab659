// Software prefetch of the next block's source (Plan::prefetch_src) on every path of the row families that
// honour it (fixture: support/kernel_cases.hpp), checked against the double-precision reference; and the
// routes that refuse it.
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

TuningHints prefetch(const char* family = "", int ur_w = 0, int oc_vectors = 0) {
  TuningHints h;
  h.algorithm = family;
  h.prefetch_src = 1;
  h.ur_w = ur_w;
  h.oc_vectors = oc_vectors;
  return h;
}

// The direct family (f32 broadcasts; bf16 pairs on CPUs with avx512_bf16, else widened by a shift; f16
// widened a pixel's channels at a time) with blocks wider than the unroll (pixels asked for in turn), an
// unroll remainder, edge blocks, a tail block; gemm; dot with its tap loop, fused x
// taps and bf16 even/odd halves; 1-D and 3-D. Each must ask for the prefetch in its plan and match the
// reference: the asks read nothing into registers, and past a row's end they touch memory the kernel never
// reads (the last row's asks past the buffer do not fault).
TEST_P(KernelCases, PrefetchNextBlock) {
  const int64_t lanes = isa() == Isa::avx512_core ? 16 : 8;
  const DeconvTester k3 = T().channels(13, 32).input({4, 11}).kernel({3, 3}).stride({2, 2}).pads({1, 1}, {1, 1})
                              .layout(DataFormat::NXC);
  TuningHints unroll = prefetch("direct", 6, 2);
  unroll.ic_unroll = 3;
  TuningHints edges = prefetch("direct");
  edges.x_halo = edges.edge_blocks = 1;
  TuningHints fused = prefetch("dot");
  fused.fuse_x_taps = 1;
  if (dtype() == DType::bf16) fused.ic_pairs = 0;  // (fused taps: not on pairs, nor on even/odd halves)
  TuningHints halves = prefetch("dot");
  if (dtype() == DType::bf16) halves.ic_pairs = 0;
  std::vector<DeconvTester> cases{
      DeconvTester(k3).hints(prefetch("direct")),
      DeconvTester(k3).channels(17, 16).hints(unroll),
      DeconvTester(k3).kernel({5, 5}).hints(edges),
      DeconvTester(k3).channels(7, 5 * lanes - 4).hints(prefetch("direct")),  // a tail block of fewer vectors
      T().channels(12, 32).input({4, 7}).kernel({2, 2}).stride({2, 2}).layout(DataFormat::NXC).hints(prefetch("gemm")),
      DeconvTester(k3).channels(37, 3).hints(prefetch("dot")),
      DeconvTester(k3).channels(lanes + 5, 2).kernel({4, 4}).hints(fused),
      DeconvTester(k3).channels(4 * lanes + 3, 2).hints(halves),
      T().rank(1).batch(2).channels(24, 16).input({19}).kernel({4}).stride({2}).pads({1}, {1})
          .layout(DataFormat::NXC).hints(prefetch()),
      T().rank(3).channels(9, 8).input({2, 3, 5}).kernel({2, 2, 2}).stride({2, 2, 2}).layout(DataFormat::NXC)
          .hints(prefetch()),
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    cases[i].Test();
    const nlohmann::json plan = plan_of(cases[i]);
    EXPECT_TRUE(plan.at("prefetch_src").get<bool>());
    EXPECT_NE(plan.at("name").get<std::string>().find("_pf"), std::string::npos) << plan.at("name");
  }
  EXPECT_TRUE(plan_of(cases[2]).contains("edges"));
  EXPECT_EQ(plan_of(cases[6]).at("fused_x_taps").get<int>(), 2);
  EXPECT_EQ(plan_of(cases[7]).at("name").get<std::string>().find("_eo") != std::string::npos,
            dtype() == DType::bf16);
  // The asks are in the code: prefetcht0 (0F 18 with ModRM reg 1) in each family's kernel with the hint,
  // more often than such bytes occur without it.
  auto prefetches = [](const Kernel& k) {
    int n = 0;
    for (size_t i = 0; i + 2 < k.code_size(); ++i)
      n += k.code()[i] == 0x0F && k.code()[i + 1] == 0x18 && (k.code()[i + 2] >> 3 & 7) == 1;
    return n;
  };
  for (const char* family : {"direct", "gemm", "dot"}) {
    TuningHints on = prefetch(family), off = prefetch(family);
    off.prefetch_src = 0;
    const DeconvTester t = T().channels(16, family == std::string("dot") ? 2 : 32).input({4, 8}).kernel({2, 2})
                               .stride({2, 2}).layout(DataFormat::NXC);
    const DeconvTester with = DeconvTester(t).hints(on), without = DeconvTester(t).hints(off);
    EXPECT_GT(prefetches(compile(with.descriptor(), with.options())),
              prefetches(compile(without.descriptor(), without.options()))) << family;
  }
}

// Only the row families reading NXC data where it lies ask for it: not the row buffer's NCX rows (a copy
// already in cache), not depthwise (whole vectors of channels, its own streams).
TEST_P(KernelCases, PrefetchRefusedElsewhere) {
  const DeconvTester k3 = T().channels(13, 32).input({4, 11}).kernel({3, 3}).stride({2, 2}).pads({1, 1}, {1, 1});
  TuningHints row_buffer = prefetch("direct");
  row_buffer.layout = "row_buffer";
  expect_refused(DeconvTester(k3).layout(DataFormat::NCX).hints(row_buffer), "prefetch_src", "NCX row buffer");
  expect_refused(DeconvTester(k3).groups(13).channels(13, 13).layout(DataFormat::NXC).hints(prefetch()),
                 "prefetch_src", "depthwise");
  TuningHints col = prefetch("col");
  if (dtype() == DType::f32) expect_refused(DeconvTester(k3).layout(DataFormat::NXC).hints(col), "col", "col");
  // col_x honours it both ways: a row of one tile asked to prefetch runs (its asks reach past the row).
  TuningHints col_x = prefetch("col_x");
  const DeconvTester one_tile = T().channels(24, 3).input({5, 3}).kernel({3, 3}).stride({2, 2})
                                    .pads({1, 1}, {1, 1}).layout(DataFormat::NCX).hints(col_x);
  one_tile.Test();
  EXPECT_TRUE(plan_of(one_tile).at("prefetch_src").get<bool>());
  TuningHints off = prefetch("direct");
  off.prefetch_src = 0;
  const nlohmann::json plan = plan_of(DeconvTester(k3).layout(DataFormat::NXC).hints(off));
  EXPECT_FALSE(plan.at("prefetch_src").get<bool>());
  EXPECT_EQ(plan.at("name").get<std::string>().find("_pf"), std::string::npos);
}

}  // namespace
}  // namespace deconvjit
