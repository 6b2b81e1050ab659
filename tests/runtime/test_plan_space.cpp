// The plan space (enumerate_plans): every candidate of a set of small problems compiles, matches the
// double-precision reference, and its hints round-trip: the plan's printed choices, parsed back, build the
// same kernel (same name, same code bytes).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <iostream>
#include <iterator>
#include <limits>
#include <set>
#include <utility>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/plan.hpp"
#include "runtime/tolerance.hpp"
#include "support/deconv_tester.hpp"

namespace deconvjit {
namespace {

using testing::DeconvTester;

struct SpaceCase {
  const char* name;
  DeconvTester t;
};

// Small enough that the whole space runs in seconds, varied enough that every family appears.
std::vector<SpaceCase> space_cases() {
  return {
      {"direct_nxc", DeconvTester().batch(2).channels(4, 10).input({2, 3}).kernel({3, 3}).stride({2, 2})
                         .pads({1, 0}, {0, 1}).layout(DataFormat::NXC)},
      {"gemm_ncx", DeconvTester().batch(1).channels(8, 12).input({2, 3}).kernel({2, 2}).stride({2, 2})},
      // NXC depthwise: its x taps fused or not (fuse_x_taps).
      {"depthwise_nxc", DeconvTester().batch(1).channels(16, 16).groups(16).input({2, 5}).kernel({4, 4})
                            .stride({2, 2}).pads({1, 1}, {1, 1}).layout(DataFormat::NXC)},
      {"depthwise_ncx", DeconvTester().batch(1).channels(8, 8).groups(8).input({2, 5}).kernel({3, 3})
                            .stride({2, 2}).pads({1, 1}, {1, 1})},
      // Plane tiles of 1-4 blocks (channels_per_call), each block a call or the tile's blocks one (oc_loop).
      {"depthwise_ncx_tiles", DeconvTester().batch(2).channels(64, 64).groups(64).input({2, 3}).kernel({3, 3})
                                  .stride({2, 2}).pads({1, 1}, {1, 1})},
      // One channel in and out without groups: the depthwise families apply as well as direct and gemm.
      {"one_channel_ncx", DeconvTester().batch(2).channels(1, 1).input({3, 5}).kernel({4, 4}).stride({2, 2})
                              .pads({1, 1}, {1, 1})},
      {"dot_1d", DeconvTester().rank(1).batch(2).channels(8, 2).input({3}).kernel({3}).stride({2})},
      {"gemm_x_3d", DeconvTester().rank(3).batch(1).channels(4, 3).input({1, 2, 3}).kernel({2, 2, 2})
                        .stride({2, 2, 2})},
  };
}

// Runs the kernel on seeded data and compares with the oracle's bound.
void expect_exact(const Kernel& k, const Problem& p, const std::string& what) {
  const verify::Operands ops = verify::random_operands(p, 5);
  std::vector<float> got(static_cast<size_t>(p.dst_elements()), std::numeric_limits<float>::quiet_NaN());
  k.execute(ops.src, ops.weights, got);
  std::vector<double> want(got.size()), mag(got.size());
  reference_with_bound(p, ops.src, ops.weights, want.data(), mag.data());
  const verify::Comparison c = verify::compare(p, got, want.data(), mag.data(), p.dst_elements());
  EXPECT_TRUE(c.ok) << what << ": " << c.failures << " elements outside tolerance";
}

class PlanSpace : public ::testing::TestWithParam<Isa> {};

// Where the default fuses a dot layer's x taps and narrows its block for the taps' weights (5 taps: AVX-512
// two channels 14 -> 9 pixels, AVX2 one channel 12 -> 9), the space still holds the wider blocks without
// fusion, up to the registers' limit, as well as fused blocks.
TEST(PlanSpaceTiles, FusedDefaultKeepsTheWiderUnfusedTiles) {
  for (Isa isa : {Isa::avx512_core, Isa::avx2}) {
    const int64_t oc = isa == Isa::avx2 ? 1 : 2;
    const Problem p = resolve(DeconvTester().channels(16, oc).input({4, 40}).kernel({9, 9}).stride({2, 2})
                                  .pads({4, 4}, {4, 4}).layout(DataFormat::NXC).descriptor());
    ASSERT_EQ(detail::make_plan(p, isa, {}).fused_x_taps, 5) << to_string(isa);
    int widest_unfused = 0, fused = 0;
    for (const PlanCandidate& c : enumerate_plans(p, isa, 2)) {
      if (c.hints.algorithm != "dot" || c.hints.isa != to_string(isa)) continue;
      if (c.hints.fuse_x_taps == 1) ++fused;
      if (c.hints.fuse_x_taps != 1) widest_unfused = std::max(widest_unfused, c.hints.ur_w);  // 0, or -1: no room
    }
    EXPECT_GT(fused, 0) << to_string(isa);
    EXPECT_GE(widest_unfused, isa == Isa::avx2 ? 12 : 14) << to_string(isa);
  }
}

TEST_P(PlanSpace, EveryCandidateCompilesMatchesTheReferenceAndRoundTrips) {
  const Isa isa = GetParam();
  if (!isa_available(isa)) GTEST_SKIP() << "ISA " << to_string(isa) << " is not available on this CPU";
  std::set<std::string> families;
  size_t total = 0;
  for (const SpaceCase& c : space_cases()) {
    const Descriptor d = c.t.descriptor();
    const Problem p = resolve(d);
    const std::vector<PlanCandidate> all = enumerate_plans(p, isa, 2);
    ASSERT_GT(all.size(), 1u) << c.name;
    total += all.size();
    std::set<std::string> distinct;
    for (size_t i = 0; i < all.size(); ++i) {
      const PlanCandidate& cand = all[i];
      const std::string what = std::string(c.name) + " #" + std::to_string(i) + " " + to_json(cand.hints);
      EXPECT_TRUE(distinct.insert(to_json(cand.hints)).second) << "listed twice: " << what;
      if (i > 0) EXPECT_LE(all[i - 1].model_ms, cand.model_ms) << what;
      Options o;
      o.max_isa = isa;
      o.use_cache = false;
      o.use_disk_cache = false;
      o.hints = cand.hints;
      const Kernel k = compile(d, o);
      ASSERT_EQ(k.name(), cand.kernel) << what;
      EXPECT_EQ(to_json(k.choices()), to_json(cand.hints)) << what;
      families.insert(nlohmann::json::parse(k.plan_text()).at("algorithm").get<std::string>());
      // The printed plan's choices build the same code.
      o.hints = hints_from_json(nlohmann::json::parse(k.plan_text()).at("choices").dump());
      const Kernel again = compile(d, o);
      ASSERT_EQ(again.name(), k.name()) << what;
      ASSERT_EQ(again.code_size(), k.code_size()) << what;
      EXPECT_EQ(std::memcmp(again.code(), k.code(), k.code_size()), 0) << what;
      expect_exact(k, p, what);
      if (HasFailure()) return;  // one broken plan is enough to read
    }
  }
  std::cout << total << " plans walked on " << to_string(isa) << "\n";
  for (const char* f : {"direct", "gemm", "depthwise", "dot"}) EXPECT_TRUE(families.count(f)) << f;
  if (isa == Isa::avx512_core)
    for (const char* f : {"depthwise_x", "gemm_x"}) EXPECT_TRUE(families.count(f)) << f;
}

// A time limit (the tuner's quarter of its budget): every register tile's own plan still comes, so every
// family and layout route the full space has is there; past the limit the numeric variants stop, each plan
// listed is one of the full space's, in the model's order; a limit never reached lists the full space in
// the same order. enumerate_variants gives a candidate's own tile's variants, the candidate among them.
TEST_P(PlanSpace, ATimeLimitKeepsEveryFamilyAndRoute) {
  const Isa isa = GetParam();
  if (!isa_available(isa)) GTEST_SKIP() << "ISA " << to_string(isa) << " is not available on this CPU";
  auto routes = [](const std::vector<PlanCandidate>& v) {
    std::set<std::string> r;
    for (const PlanCandidate& c : v) r.insert(c.hints.isa + "/" + c.hints.algorithm + "/" + c.hints.layout);
    return r;
  };
  auto keys = [](const std::vector<PlanCandidate>& v) {
    std::set<std::string> k;
    for (const PlanCandidate& c : v) k.insert(to_json(c.hints));
    return k;
  };
  for (const SpaceCase& c : space_cases()) {
    SCOPED_TRACE(c.name);
    const Problem p = resolve(c.t.descriptor());
    bool complete = false;
    const std::vector<PlanCandidate> all = enumerate_plans(p, isa, 2, 0, &complete);
    EXPECT_TRUE(complete);
    const std::vector<PlanCandidate> cut = enumerate_plans(p, isa, 2, 1e-9, &complete);
    EXPECT_FALSE(complete);
    EXPECT_LT(cut.size(), all.size());
    EXPECT_EQ(routes(cut), routes(all));
    const std::set<std::string> every = keys(all);
    for (size_t i = 0; i < cut.size(); ++i) {
      EXPECT_TRUE(every.count(to_json(cut[i].hints))) << to_json(cut[i].hints);
      if (i > 0) EXPECT_LE(cut[i - 1].model_ms, cut[i].model_ms);
    }
    const std::vector<PlanCandidate> unhurried = enumerate_plans(p, isa, 2, 1e6, &complete);
    EXPECT_TRUE(complete);
    ASSERT_EQ(unhurried.size(), all.size());
    for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(to_json(unhurried[i].hints), to_json(all[i].hints));
    const PlanCandidate& last = all.back();
    const std::vector<PlanCandidate> variants = enumerate_variants(p, isa, 2, last.hints);
    EXPECT_TRUE(keys(variants).count(to_json(last.hints))) << to_json(last.hints);
    for (const PlanCandidate& v : variants) {
      EXPECT_TRUE(every.count(to_json(v.hints))) << to_json(v.hints);
      EXPECT_EQ(v.hints.algorithm + "/" + v.hints.layout + "/" + v.hints.isa,
                last.hints.algorithm + "/" + last.hints.layout + "/" + last.hints.isa);
      EXPECT_EQ(v.hints.ur_w, last.hints.ur_w);
      EXPECT_EQ(v.hints.oc_vectors, last.hints.oc_vectors);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, PlanSpace, ::testing::Values(Isa::avx2, Isa::avx512_core),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// A row family's layer, and (on AVX-512) col_x blocks of 9 output channels with 3 x taps: col_x counts
// channels in oc_vectors, past the row families' 8 vectors.
TEST(PlanSpace, TheDefaultPlanIsACandidate) {
  // (the third: on AVX2 the 3 x 4 tile with one weight vector read by the FMAs, hybrid_tile_pays)
  const std::pair<DeconvTester, Isa> cases[] = {
      {DeconvTester().batch(1).channels(32, 48).input({6, 6}).kernel({4, 4}).stride({2, 2}).pads({1, 1}, {1, 1}),
       Isa::best},
      {DeconvTester().batch(1).channels(8, 9).input({4, 40}).kernel({3, 3}).stride({2, 2}).pads({1, 1}, {1, 1}),
       Isa::best},
      {DeconvTester().batch(1).channels(64, 32).input({3, 40}).kernel({3, 3}).stride({2, 2}).pads({1, 1}, {1, 1})
           .layout(DataFormat::NXC),
       Isa::avx2},
      // (and a 16 MB source that the default asks for ahead of the FMAs: prefetch_src_pays)
      {DeconvTester().batch(1).channels(16, 8).input({256, 1024}).kernel({1, 1}).layout(DataFormat::NXC), Isa::best},
      // (and depthwise over tiles of whole planes: plane_tiles_preferred)
      {DeconvTester().batch(2).groups(64).channels(64, 64).input({7, 7}).kernel({5, 5}).stride({2, 2})
           .pads({2, 2}, {2, 2}), Isa::best}};
  for (size_t i = 0; i < std::size(cases); ++i) {
    const auto& [t, isa] = cases[i];
    const Descriptor d = t.descriptor();
    Options o;
    o.use_disk_cache = false;
    o.max_isa = isa;
    const Kernel dflt = compile(d, o);
    if (isa == Isa::avx2) EXPECT_EQ(dflt.choices().weight_regs, 3) << dflt.name();
    if (i == 3) EXPECT_EQ(dflt.choices().prefetch_src, 1) << dflt.name();
    if (i == 4) EXPECT_EQ(dflt.choices().layout, "plane_tiles") << dflt.name();
    bool found = false;
    for (const PlanCandidate& c : enumerate_plans(resolve(d), resolve_isa(isa), 2))
      found = found || to_json(c.hints) == to_json(dflt.choices());
    EXPECT_TRUE(found) << "the heuristic's plan " << to_json(dflt.choices()) << " is outside the space";
  }
}

// col_x's tiles across images (batch_block) reach the space with 2 and 4 images per tile on one-vector
// rows, so the tuner can weigh them (they are off by default).
TEST(PlanSpace, ColXTilesAcrossImagesAreCandidates) {
  const Descriptor d = DeconvTester().batch(8).channels(16, 1).input({6, 14}).kernel({5, 5}).stride({2, 2})
                           .pads({1, 1}, {2, 2}).descriptor();
  if (!isa_available(Isa::avx512_core)) GTEST_SKIP() << "col_x needs AVX-512, which this CPU lacks";
  std::set<int> images;
  for (const PlanCandidate& c : enumerate_plans(resolve(d), Isa::avx512_core, 2))
    if (c.hints.algorithm == "col_x" && c.hints.batch_block == 1) images.insert(c.hints.ur_w);
  EXPECT_TRUE(images.count(2) && images.count(4)) << "images per tile in the space: " << images.size();
}

// NXC bands need a widened source: where the default reads bf16 as it is (AVX2), the space still holds the
// widened source in bands as well as whole (an image of 16 rows, one band: the default would not band it).
TEST(PlanSpace, WidenedNxcBandsAreCandidates) {
  const Descriptor d = DeconvTester().dtype(DType::bf16).batch(1).channels(64, 64).input({16, 64})
                           .kernel({3, 3}).layout(DataFormat::NXC).descriptor();
  const Problem p = resolve(d);
  bool banded = false, whole = false;
  for (const PlanCandidate& c : enumerate_plans(p, Isa::avx2, 2)) {
    if (c.hints.widen_src != 1) continue;
    banded = banded || c.hints.band_rows > 0;
    whole = whole || c.hints.band_rows == 0;
  }
  EXPECT_TRUE(banded);
  EXPECT_TRUE(whole);
}

TEST(TuningHints, JsonRoundTripAndErrorsNameTheField) {
  TuningHints h;
  EXPECT_TRUE(h.empty());
  EXPECT_EQ(to_json(h), "{}");
  h.algorithm = "gemm_x", h.ur_w = 2, h.flat_plane = 1, h.row_chunk = 3, h.parallel = 0;
  EXPECT_FALSE(h.empty());
  EXPECT_EQ(to_json(hints_from_json(to_json(h))), to_json(h));
  EXPECT_EQ(hints_from_json("{\"parallel\": false, \"x_halo\": true}").parallel, 0);
  for (const char* bad : {"{\"ur\": 4}", "{\"ur_w\": \"4\"}", "[1]", "{\"ur_w\": 1.5}", "{", "{\"x_split\": -2}"}) {
    try {
      hints_from_json(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), Error::Kind::InvalidArgument) << bad;
    }
  }
  try {
    hints_from_json("{\"ur\": 4}");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'ur'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace deconvjit
