// The schedule of a plan: exact coverage of every output pixel by its segments, and axis_taps against a
// brute-force enumeration.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "deconvjit/deconvjit.hpp"
#include "runtime/plan.hpp"
#include "runtime/schedule.hpp"
#include "support/deconv_tester.hpp"
#include "support/plan_helpers.hpp"

namespace deconvjit::detail {
namespace {

using testing::DeconvTester;
using testing::random_descriptor;

// ---- schedule -------------------------------------------------------------------------------------------

// Every output x of a row (every (image, x) when blocks run across images) is computed by exactly one pixel
// of one segment, inside the part that owns it; each pixel's tap pattern is the one its segment claims.
void expect_exact_cover(const Plan& pl) {
  const Schedule s = build_schedule(pl);
  const Axis& x = pl.axes[2];
  const int64_t images = pl.block_over_batch ? pl.batch : 1;
  std::vector<int> hits(static_cast<size_t>(images * x.out), 0);
  int64_t expected_x0 = 0;
  for (const RowPart& part : s.parts) {
    EXPECT_EQ(part.x0, expected_x0) << "row parts are contiguous";
    EXPECT_LT(part.x0, part.x1);
    expected_x0 = part.x1;
    for (const Segment& g : part.segments) {
      ASSERT_GE(g.width, 1);
      ASSERT_LE(g.width, pl.ur_w);
      ASSERT_GE(g.nblocks, 1);
      for (int64_t i = 0; i < g.width * g.nblocks; ++i) {
        const int64_t o = pl.block_over_batch ? g.o_first : g.o_first + i * x.stride;
        const int64_t n = pl.block_over_batch ? g.n_first + i : 0;
        ASSERT_TRUE(o >= part.x0 && o < part.x1 && n >= 0 && n < images)
            << "pixel " << i << " of a segment at x " << o << ", image " << n << " lies outside its part ["
            << part.x0 << ", " << part.x1 << ")";
        ++hits[static_cast<size_t>(n * x.out + o)];
        const AxisTaps t = axis_taps(x, o);
        ASSERT_EQ(t.count, g.ntaps) << "x " << o;
        if (t.count) {
          ASSERT_EQ(t.k0, g.kx0) << "x " << o;
          ASSERT_EQ(t.i0, g.ix0 + (pl.block_over_batch ? 0 : i)) << "x " << o;
        }
      }
    }
  }
  EXPECT_EQ(expected_x0, x.out) << "the parts end at the row's end";
  if (row_buffered(pl.layout))  // every part fits the row buffer the plan sized
    for (const RowPart& part : s.parts) EXPECT_LE((part.x1 - part.x0) * pl.dst_x * images, pl.row_buffer_floats);
  for (size_t e = 0; e < hits.size(); ++e)
    ASSERT_EQ(hits[e], 1) << "image " << e / x.out << ", x " << e % x.out << " covered " << hits[e] << " times";
  ASSERT_EQ(s.z.size(), static_cast<size_t>(pl.axes[0].out));
  ASSERT_EQ(s.y.size(), static_cast<size_t>(pl.axes[1].out));
}

TEST(Schedule, SegmentsCoverEveryOutputExactlyOnce) {
  std::mt19937 rng(2024);
  int batch_plans = 0, split_plans = 0, halo_plans = 0;
  for (int i = 0; i < 800; ++i) {
    const Descriptor d = random_descriptor(rng);
    const Problem p = resolve(d);
    const Isa isa = kIsas[i % 2];
    TuningHints h;
    if (i % 3 == 0) h.x_split = std::uniform_int_distribution<int>(1, 7)(rng);
    if (i % 4 == 1) h.ur_w = std::uniform_int_distribution<int>(1, 5)(rng);
    if (i % 4 == 1) h.oc_vectors = 1;
    if (i % 5 == 2) h.x_halo = 1;  // zero columns around the source: the x axis grows
    Plan pl;
    try {
      pl = make_plan(p, isa, h);
    } catch (const Error& e) {
      ASSERT_EQ(e.kind(), Error::Kind::InvalidArgument) << e.what();
      continue;
    }
    SCOPED_TRACE(p.canonical + " " + pl.to_json());
    // The NCX-native families resolve x inside the kernel: no segments.
    if (pl.layout == LayoutPath::ncx_native) continue;
    batch_plans += pl.block_over_batch;
    split_plans += pl.x_split > 1;
    halo_plans += pl.has_halo();
    expect_exact_cover(pl);
    if (HasFatalFailure()) return;
  }
  // Batch blocking needs N >= 4 (random problems have N <= 3): covered explicitly.
  for (int64_t n : {4, 5, 7})
    for (Isa isa : kIsas)
      for (int split : {0, 2, 3}) {
        TuningHints h;
        h.x_split = split;
        const Plan pl = plan_for(DeconvTester().batch(n).channels(8, 20).input({3, 4}).kernel({3, 2})
                                     .stride({2, 3}).pads({0, 1}, {1, 0}), isa, h);
        ASSERT_TRUE(pl.block_over_batch) << pl.to_json();
        SCOPED_TRACE(pl.to_json());
        expect_exact_cover(pl);
        ++batch_plans;
      }
  EXPECT_GT(split_plans, 50);
  EXPECT_GT(halo_plans, 20);
  EXPECT_GT(batch_plans, 0);
}

// Through the row buffer on AVX-512 with rows of whole lines, each part's flush stores 16 x 16 tiles (32 x
// 16 in 16-bit types): parts are whole lines wide so its stores start lines (Plan::row_part_width). 1-D
// 8 -> 128 channels, kernel 4, stride 2, 512 -> 1024 outputs, NCX.
DeconvTester lines_1d(DType t) {
  return DeconvTester().rank(1).channels(8, 128).input({512}).kernel({4}).stride({2}).pads({1}, {1})
      .layout(DataFormat::NCX).dtype(t);
}

TEST(Schedule, RowBufferPartsStartOnLinesWhereTheFlushRunsInTiles) {
  TuningHints seven;
  seven.x_split = 7;  // 147 outputs each, off the lines
  for (DType t : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(to_string(t));
    const int64_t line = t == DType::f32 ? 16 : 32;
    const Plan pl = plan_for(lines_1d(t), Isa::avx512_core, seven);
    ASSERT_TRUE(row_buffered(pl.layout) && flush_in_tiles(pl)) << pl.name;
    EXPECT_EQ(pl.row_part_width(), 160);  // 147 rounded up to 10 lines (bf16: 5)
    const Schedule s = build_schedule(pl);
    EXPECT_EQ(s.parts.size(), 7u);
    for (const RowPart& part : s.parts) EXPECT_EQ(part.x0 % line, 0) << part.x0;
    expect_exact_cover(pl);
  }
  // AVX2 flushes in 8 x 8 tiles, and parts under 4 lines would lose their balance: both as split.
  EXPECT_EQ(plan_for(lines_1d(DType::f32), Isa::avx2, seven).row_part_width(), 147);
  TuningHints many;
  many.x_split = 32;
  EXPECT_EQ(plan_for(lines_1d(DType::f32), Isa::avx512_core, many).row_part_width(), 32);
}

// The same plans against the double-precision reference (the last part is 64 outputs wide).
TEST(Schedule, RowBufferPartsOnLinesMatchTheReference) {
  TuningHints seven;
  seven.x_split = 7;
  for (DType t : {DType::f32, DType::bf16, DType::f16})
    DeconvTester(lines_1d(t)).batch(2).isa(Isa::avx512_core).hints(seven).Test();
}

// ---- axis_taps ------------------------------------------------------------------------------------------

TEST(AxisTaps, AgreesWithBruteForce) {
  std::mt19937 rng(31337);
  const auto uni = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int iter = 0; iter < 3000; ++iter) {
    Axis a;
    a.in = uni(1, 12);
    a.kernel = uni(1, 9);
    a.stride = uni(1, 6);
    a.dilation = uni(1, 5);
    a.pad_begin = uni(-4, 8);
    const int64_t g = std::gcd(a.stride, a.dilation);
    a.tap_k_step = a.stride / g;
    a.tap_i_step = a.dilation / g;
    a.out = std::max<int64_t>(1, a.stride * (a.in - 1) + a.dilation * (a.kernel - 1) + 1 - a.pad_begin + uni(0, 6));
    for (int64_t o = 0; o < a.out; ++o) {
      std::vector<std::pair<int64_t, int64_t>> taps;  // (k, i), k ascending
      for (int64_t k = 0; k < a.kernel; ++k) {
        const int64_t num = o + a.pad_begin - k * a.dilation;
        if (num % a.stride != 0) continue;
        const int64_t i = num / a.stride;
        if (i >= 0 && i < a.in) taps.emplace_back(k, i);
      }
      const AxisTaps t = axis_taps(a, o);
      ASSERT_EQ(t.count, static_cast<int64_t>(taps.size()))
          << "in " << a.in << " K " << a.kernel << " s " << a.stride << " d " << a.dilation << " pb "
          << a.pad_begin << " o " << o;
      for (int64_t j = 0; j < t.count; ++j) {
        ASSERT_EQ(t.k0 + j * a.tap_k_step, taps[j].first) << "tap " << j << " at o " << o;
        ASSERT_EQ(t.i0 - j * a.tap_i_step, taps[j].second) << "tap " << j << " at o " << o;
      }
    }
  }
}

}  // namespace
}  // namespace deconvjit::detail
