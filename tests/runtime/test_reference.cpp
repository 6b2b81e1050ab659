// The oracle's own tests: hand-derived numbers for tiny cases, then properties that relate the reference to
// independently written computations (a scatter-form loop, re-layouts, per-group splits).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <random>

#include "runtime/reference.hpp"
#include "runtime/tolerance.hpp"
#include "support/deconv_tester.hpp"
#include "support/layouts.hpp"
#include "support/seed_examples.hpp"

namespace deconvjit::testing {
namespace {

std::vector<float> run_reference(const Problem& p, const std::vector<float>& src, const std::vector<float>& w) {
  EXPECT_EQ(static_cast<int64_t>(src.size()), p.src_elements());
  EXPECT_EQ(static_cast<int64_t>(w.size()), p.weights_elements());
  std::vector<float> dst(static_cast<size_t>(p.dst_elements()), std::nanf(""));
  reference(p, src, w, dst);
  return dst;
}

std::vector<float> run_reference(const Descriptor& d, const std::vector<float>& src,
                                 const std::vector<float>& w) {
  return run_reference(resolve(d), src, w);
}

// ---- shapes and hand-checked values ----

// The tuner's oracle on a sample of rows and x positions computes exactly those elements, with the
// values and bounds of the whole reference (NCX and NXC: the indices follow the layout).
TEST(Reference, RowsAndPositionsAreTheWholeReferenceThere) {
  for (DataFormat f : {DataFormat::NCX, DataFormat::NXC}) {
    const Problem p = resolve(DeconvTester().batch(2).channels(3, 5).input({4, 6}).kernel({3, 3}).stride({2, 2})
                                  .pads({1, 0}, {0, 1}).layout(f).descriptor());
    const verify::Operands ops = verify::random_operands(p, 9);
    std::vector<double> all(p.dst_elements()), all_mag(all.size());
    reference_with_bound(p, ops.src, ops.weights, all.data(), all_mag.data());
    std::vector<double> part(all.size(), -1e300), part_mag(all.size(), -1e300);
    const std::vector<int64_t> at =
        detail::reference_rows(p, ops.src.data(), ops.weights.data(), {0, 5, 7}, {0, 3, 10}, part.data(), part_mag.data());
    EXPECT_EQ(at.size(), 3u * 3u * 5u);  // rows x positions x channels
    for (int64_t e : at) {
      EXPECT_EQ(part[e], all[e]) << e;
      EXPECT_EQ(part_mag[e], all_mag[e]) << e;
    }
    const size_t written = std::count_if(part.begin(), part.end(), [](double v) { return v != -1e300; });
    EXPECT_EQ(written, at.size()) << "elements outside the sample were written";
  }
}

TEST(Reference, SeedExampleShapes) {
  for (const SeedExample& e : seed_examples()) {
    const Problem p = resolve(e.desc);
    EXPECT_EQ(p.dst_shape, e.dst);
    EXPECT_EQ(p.pads_begin, e.pads_begin);  // example 3: valid ignores the given pads
    EXPECT_EQ(p.pads_end, e.pads_end);
  }
}

// Seed example 2: with K == s each input pixel scatters its own copy of the 3x3 kernel into a disjoint
// block, out[3*iy+ky, 3*ix+kx] = sum_ci x[ci,iy,ix]*w[ci,co,ky,kx]; rows/columns 6 and 7 exist only through
// output_padding and receive nothing.
TEST(Reference, SeedExample2DisjointBlocks) {
  const Problem p = resolve(seed_examples()[1].desc);
  const auto src = verify::uniform_data(p.src_elements(), 3);
  const auto w = verify::uniform_data(p.weights_elements(), 4);
  const auto dst = run_reference(p, src, w);
  for (int64_t co = 0; co < 10; ++co) {
    for (int64_t oy = 0; oy < 8; ++oy) {
      for (int64_t ox = 0; ox < 8; ++ox) {
        double want = 0;
        if (oy < 6 && ox < 6) {
          for (int64_t ci = 0; ci < 20; ++ci) {
            want += double(src[(ci * 2 + oy / 3) * 2 + ox / 3]) * w[((ci * 10 + co) * 3 + oy % 3) * 3 + ox % 3];
          }
        }
        EXPECT_NEAR(dst[(co * 8 + oy) * 8 + ox], want, 1e-5) << "co " << co << " oy " << oy << " ox " << ox;
      }
    }
  }
}

Descriptor one_d(int64_t x, int64_t k, int64_t s) {
  return DeconvTester().rank(1).channels(1, 1).input({x}).kernel({k}).stride({s}).descriptor();
}

TEST(Reference, Hand1DStrideEqualsKernel) {
  // X=2, K=2, s=2: out[2i+k] = x[i]*w[k], so each input scatters a scaled copy of the kernel:
  // x0*w = 1*[3,5], x1*w = 2*[3,5] -> [3, 5, 6, 10].
  EXPECT_EQ(run_reference(one_d(2, 2, 2), {1, 2}, {3, 5}), (std::vector<float>{3, 5, 6, 10}));
}

TEST(Reference, Hand1DOverlapWithPads) {
  // X=3, K=3, s=1, pads 1/1: Y = 1*2 + 3 - 2 = 3 and o = i + k - 1.
  //   o=0: (i0,k1) 1*10 + (i1,k0) 2*1                   = 12
  //   o=1: (i0,k2) 1*100 + (i1,k1) 2*10 + (i2,k0) 3*1    = 123
  //   o=2: (i1,k2) 2*100 + (i2,k1) 3*10                  = 230
  Descriptor d = one_d(3, 3, 1);
  d.pads_begin = {1}, d.pads_end = {1};
  EXPECT_EQ(run_reference(d, {1, 2, 3}, {1, 10, 100}), (std::vector<float>{12, 123, 230}));
}

TEST(Reference, Hand1DDilation) {
  // X=2, K=2, d=3, s=1: dk = 4, Y = 1 + 4 = 5, o = i + 3k:
  //   o0 = x0*w0 = 3, o1 = x1*w0 = 6, o2 unreached = 0, o3 = x0*w1 = 5, o4 = x1*w1 = 10.
  Descriptor d = one_d(2, 2, 1);
  d.dilations = {3};
  EXPECT_EQ(run_reference(d, {1, 2}, {3, 5}), (std::vector<float>{3, 6, 0, 5, 10}));
}

TEST(Reference, Hand1DKernelSmallerThanStrideLeavesGaps) {
  // X=2, K=1, s=3: Y = 3 + 1 = 4, o = 3i: [x0*w0, 0, 0, x1*w0] = [2, 0, 0, -2].
  EXPECT_EQ(run_reference(one_d(2, 1, 3), {1, -1}, {2}), (std::vector<float>{2, 0, 0, -2}));
}

TEST(Reference, Hand1DNegativePadBeginGrowsOutput) {
  // pads_begin = -1: Y = 2 + 2 + 1 = 5 and o = 2i + k + 1, so [3,5,6,10] moves right behind a zero.
  Descriptor d = one_d(2, 2, 2);
  d.pads_begin = {-1}, d.pads_end = {0};
  EXPECT_EQ(run_reference(d, {1, 2}, {3, 5}), (std::vector<float>{0, 3, 5, 6, 10}));
}

TEST(Reference, Hand1DOutputPaddingExposesCroppedValue) {
  // pads_end = 1 crops the full [3,5,6,10] to [3,5,6]; output_padding = 2 (>= s) makes Y = 4 - 1 + 2 = 5:
  // the cropped 10 comes back, and the last position lies beyond the full result, so it is 0.
  Descriptor d = one_d(2, 2, 2);
  d.pads_end = {1};
  EXPECT_EQ(run_reference(d, {1, 2}, {3, 5}), (std::vector<float>{3, 5, 6}));
  d.output_padding = {2};
  EXPECT_EQ(run_reference(d, {1, 2}, {3, 5}), (std::vector<float>{3, 5, 6, 10, 0}));
}

TEST(Reference, HandChannelsInEveryLayout) {
  // C_IN=2, C_OUT=3, X=2, K=1: out[co][o] = x[0][o]*w[0][co] + x[1][o]*w[1][co] with
  // x[0] = [1, 0], x[1] = [2, 1], w[0] = [1, 2, 3], w[1] = [4, 5, 6]:
  //   o=0: [1+8, 2+10, 3+12] = [9, 12, 15];  o=1: w[1] = [4, 5, 6].
  const std::vector<float> x_ncx{1, 0, 2, 1}, x_nxc{1, 2, 0, 1};
  const std::vector<float> w_oix{1, 2, 3, 4, 5, 6}, w_xio{1, 4, 2, 5, 3, 6};
  const std::vector<float> want_ncx{9, 4, 12, 5, 15, 6}, want_nxc{9, 12, 15, 4, 5, 6};
  auto t = DeconvTester().rank(1).channels(2, 3).input({2}).kernel({1});
  EXPECT_EQ(run_reference(t.descriptor(), x_ncx, w_oix), want_ncx);
  EXPECT_EQ(run_reference(t.weights_format(WeightsFormat::XIO).descriptor(), x_ncx, w_xio), want_ncx);
  EXPECT_EQ(run_reference(t.layout(DataFormat::NXC).descriptor(), x_nxc, w_xio), want_nxc);
  EXPECT_EQ(run_reference(t.weights_format(WeightsFormat::GOIX).descriptor(), x_nxc, w_oix), want_nxc);
}

TEST(Reference, HandGroupsDoNotMix) {
  // C_IN = C_OUT = G = 2, K=1: out[g] = x[g]*w[g] = [1*3, 2*5]; without groups each output would be
  // the sum over both inputs.
  auto t = DeconvTester().rank(1).channels(2, 2).groups(2).input({1}).kernel({1});
  EXPECT_EQ(run_reference(t.descriptor(), {1, 2}, {3, 5}), (std::vector<float>{3, 10}));
}

TEST(Reference, HandAxisOrder2DAnd3D) {
  // 2D: X = (1, 2), K = (2, 1), s = (2, 1): out[k][ix] = x[ix]*w[k] -> [[3, 6], [5, 10]].
  auto t2 = DeconvTester().rank(2).channels(1, 1).input({1, 2}).kernel({2, 1}).stride({2, 1});
  EXPECT_EQ(run_reference(t2.descriptor(), {1, 2}, {3, 5}), (std::vector<float>{3, 6, 5, 10}));
  // 3D: the same along Z, with a stride of 2 that only Z uses: out[kz][0][ix].
  auto t3 = DeconvTester().rank(3).channels(1, 1).input({1, 1, 2}).kernel({2, 1, 1}).stride({2, 1, 1});
  EXPECT_EQ(run_reference(t3.descriptor(), {1, 2}, {3, 5}), (std::vector<float>{3, 6, 5, 10}));
}

TEST(Reference, BoundIsSumOfMagnitudes) {
  // o=1 of the pads example: terms 100, -20, 3 -> sum 83, |.| sum 123.
  Descriptor d = one_d(3, 3, 1);
  d.pads_begin = {1}, d.pads_end = {1};
  const Problem p = resolve(d);
  const std::vector<float> x{1, -2, 3}, w{1, 10, 100};
  std::vector<double> dst(3), mag(3);
  reference_with_bound(p, x, w, dst.data(), mag.data());
  EXPECT_EQ(dst[1], 83.0);
  EXPECT_EQ(mag[1], 123.0);
  EXPECT_EQ(dst[0], 10.0 - 2.0);
  EXPECT_EQ(mag[0], 12.0);
}

// ---- properties over random problems ----

constexpr int kDraws = 400;

struct Case {
  Descriptor d;
  Problem p;
  std::vector<float> src, w;
};

Case random_case(std::mt19937& rng) {
  Case c;
  c.d = random_descriptor(rng);
  c.p = resolve(c.d);
  auto ops = verify::random_operands(c.p, rng());
  c.src = std::move(ops.src);
  c.w = std::move(ops.weights);
  return c;
}

// The double sums of two correct implementations differ only by double rounding.
void expect_close(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t e = 0; e < got.size(); ++e) {
    ASSERT_NEAR(got[e], want[e], 1e-6 * (1 + std::fabs(want[e]))) << what << " at " << e;
  }
}

// Scatter form, straight from the definition: every (input pixel, tap) adds into the output position
// i*s + k*d - pb when it falls inside [0, Y). Works in NCX/OIX; callers re-layout.
std::vector<float> scatter_ncx_oix(const Problem& p, const std::vector<float>& x, const std::vector<float>& w) {
  const int64_t cig = p.c_in_per_group(), cog = p.c_out_per_group();
  std::vector<double> acc(static_cast<size_t>(p.dst_elements()), 0.0);
  for (int64_t n = 0; n < p.batch; ++n)
    for (int64_t ci = 0; ci < p.c_in; ++ci)
      for_each_index(p.in, [&](const std::vector<int64_t>& i) {
        const double xv = x[act_offset(DataFormat::NCX, p.c_in, p.in, n, ci, i)];
        for (int64_t cg = 0; cg < cog; ++cg)
          for_each_index(p.kernel, [&](const std::vector<int64_t>& k) {
            std::vector<int64_t> o(i.size());
            for (size_t a = 0; a < i.size(); ++a) {
              o[a] = i[a] * p.stride[a] + k[a] * p.dilation[a] - p.pads_begin[a];
              if (o[a] < 0 || o[a] >= p.out[a]) return;
            }
            const int64_t co = ci / cig * cog + cg;
            acc[act_offset(DataFormat::NCX, p.c_out, p.out, n, co, o)] +=
                xv * w[weight_offset(WeightsFormat::OIX, p.c_in, cog, p.kernel, ci, cg, k)];
          });
      });
  return std::vector<float>(acc.begin(), acc.end());
}

TEST(ReferenceProperty, ScatterFormAgrees) {
  std::mt19937 rng(101);
  for (int t = 0; t < kDraws; ++t) {
    const Case c = random_case(rng);
    const Problem& p = c.p;
    const auto x = relayout_act(c.src, p.data_format, DataFormat::NCX, p.batch, p.c_in, p.in);
    const auto w = relayout_weights(c.w, p.weights_format, WeightsFormat::OIX, p.c_in, p.c_out_per_group(),
                                    p.kernel);
    const auto want = relayout_act(scatter_ncx_oix(p, x, w), DataFormat::NCX, p.data_format, p.batch, p.c_out,
                                   p.out);
    expect_close(run_reference(p, c.src, c.w), want, p.canonical);
  }
}

TEST(ReferenceProperty, DataFormatsAgreeAfterTransposition) {
  std::mt19937 rng(102);
  for (int t = 0; t < kDraws; ++t) {
    const Case c = random_case(rng);
    Descriptor other = c.d;
    const DataFormat f = c.p.data_format, g = f == DataFormat::NCX ? DataFormat::NXC : DataFormat::NCX;
    other.data_format = g;
    other.src = src_shape(g, c.p.batch, c.p.c_in, c.p.in);
    if (other.output_shape.size() == c.p.in.size() + 2) {
      other.output_shape = src_shape(g, c.p.batch, c.p.c_out, c.p.out);
    }
    const auto src = relayout_act(c.src, f, g, c.p.batch, c.p.c_in, c.p.in);
    const auto got = relayout_act(run_reference(other, src, c.w), g, f, c.p.batch, c.p.c_out, c.p.out);
    expect_close(got, run_reference(c.p, c.src, c.w), c.p.canonical);
  }
}

TEST(ReferenceProperty, WeightFormatsAgreeAfterRelayout) {
  std::mt19937 rng(103);
  for (int t = 0; t < kDraws; ++t) {
    const Case c = random_case(rng);
    const auto want = run_reference(c.p, c.src, c.w);
    const int64_t cog = c.p.c_out_per_group();
    for (WeightsFormat f : {WeightsFormat::OIX, WeightsFormat::XIO, WeightsFormat::GOIX}) {
      Descriptor other = c.d;
      other.weights_format = f;
      other.weights = weights_shape(f, c.p.groups, c.p.c_in, c.p.c_out, c.p.kernel);
      other.groups = f == WeightsFormat::GOIX ? std::nullopt : std::optional<int64_t>(c.p.groups);
      const auto w = relayout_weights(c.w, c.p.weights_format, f, c.p.c_in, cog, c.p.kernel);
      expect_close(run_reference(other, c.src, w), want, c.p.canonical + " as " + to_string(f));
    }
  }
}

// Group g of a grouped problem, as an ungrouped problem of its own (NCX/OIX, same spatial attributes).
Descriptor group_slice(const Case& c) {
  Descriptor d = c.d;
  d.data_format = DataFormat::NCX;
  d.weights_format = WeightsFormat::OIX;
  d.groups.reset();
  d.src = src_shape(DataFormat::NCX, c.p.batch, c.p.c_in_per_group(), c.p.in);
  d.weights = weights_shape(WeightsFormat::OIX, 1, c.p.c_in_per_group(), c.p.c_out_per_group(), c.p.kernel);
  d.output_shape = d.output_shape.empty() ? d.output_shape : c.p.out;
  return d;
}

TEST(ReferenceProperty, GroupedEqualsSeparateGroups) {
  std::mt19937 rng(104);
  int grouped = 0;
  while (grouped < kDraws / 2) {
    const Case c = random_case(rng);
    const Problem& p = c.p;
    if (p.groups == 1) continue;
    ++grouped;
    const int64_t cig = p.c_in_per_group(), cog = p.c_out_per_group(), box_in = product(p.in);
    const auto x = relayout_act(c.src, p.data_format, DataFormat::NCX, p.batch, p.c_in, p.in);
    const auto w = relayout_weights(c.w, p.weights_format, WeightsFormat::OIX, p.c_in, cog, p.kernel);
    const auto whole = relayout_act(run_reference(p, c.src, c.w), p.data_format, DataFormat::NCX, p.batch,
                                    p.c_out, p.out);
    const Descriptor part = group_slice(c);
    const int64_t box_out = product(p.out);
    for (int64_t g = 0; g < p.groups; ++g) {
      std::vector<float> xs, ws(w.begin() + g * cig * cog * product(p.kernel),
                                w.begin() + (g + 1) * cig * cog * product(p.kernel));
      for (int64_t n = 0; n < p.batch; ++n) {
        const auto first = x.begin() + (n * p.c_in + g * cig) * box_in;
        xs.insert(xs.end(), first, first + cig * box_in);
      }
      const auto got = run_reference(part, xs, ws);
      for (int64_t n = 0; n < p.batch; ++n) {
        for (int64_t e = 0; e < cog * box_out; ++e) {
          ASSERT_NEAR(got[n * cog * box_out + e], whole[(n * p.c_out + g * cog) * box_out + e], 1e-6)
              << p.canonical << " group " << g;
        }
      }
    }
  }
}

// An explicit-pads, no-output_shape version of a random problem, in NCX/OIX.
Case explicit_case(std::mt19937& rng) {
  Case c = random_case(rng);
  c.src = relayout_act(c.src, c.p.data_format, DataFormat::NCX, c.p.batch, c.p.c_in, c.p.in);
  c.w = relayout_weights(c.w, c.p.weights_format, WeightsFormat::OIX, c.p.c_in, c.p.c_out_per_group(),
                         c.p.kernel);
  c.d = DeconvTester().rank(c.p.spatial_rank).batch(c.p.batch).channels(c.p.c_in, c.p.c_out).groups(c.p.groups)
            .input(c.p.in).kernel(c.p.kernel).stride(c.p.stride).dilation(c.p.dilation)
            .pads(c.p.pads_begin, c.p.pads_end).output_padding(c.p.output_padding).descriptor();
  c.p = resolve(c.d);
  return c;
}

// Checks `small` equals `big` wherever the small (NCX) output box reaches, and calls tail(value, pos) for
// the rest of `big`.
void compare_boxes(const Problem& big, const std::vector<float>& vb, const Problem& small,
                   const std::vector<float>& vs,
                   const std::function<void(float, const std::vector<int64_t>&)>& tail) {
  for (int64_t n = 0; n < big.batch; ++n)
    for (int64_t c = 0; c < big.c_out; ++c)
      for_each_index(big.out, [&](const std::vector<int64_t>& pos) {
        const float v = vb[act_offset(DataFormat::NCX, big.c_out, big.out, n, c, pos)];
        bool inside = true;
        for (size_t a = 0; a < pos.size(); ++a) inside = inside && pos[a] < small.out[a];
        if (!inside) return tail(v, pos);
        ASSERT_NEAR(v, vs[act_offset(DataFormat::NCX, small.c_out, small.out, n, c, pos)], 1e-6)
            << big.canonical;
      });
}

TEST(ReferenceProperty, LargerOutputShapeGivesNaturalValuesThenZeros) {
  std::mt19937 rng(105);
  for (int t = 0; t < kDraws; ++t) {
    const Case c = explicit_case(rng);
    Descriptor big = c.d;
    big.output_shape = c.p.out;
    for (int64_t& y : big.output_shape) y += std::uniform_int_distribution<int64_t>(1, 4)(rng);
    const Problem pb = resolve(big);
    ASSERT_EQ(pb.out, big.output_shape);
    // Beyond the full result (the last reachable position is s*(X-1) + d*(K-1) - pb) everything is 0.
    const auto tail = [&](float v, const std::vector<int64_t>& pos) {
      for (size_t a = 0; a < pos.size(); ++a) {
        const int64_t full = c.p.stride[a] * (c.p.in[a] - 1) + c.p.dilation[a] * (c.p.kernel[a] - 1) + 1 -
                             c.p.pads_begin[a];
        if (pos[a] >= full) {
          EXPECT_EQ(v, 0.0f) << pb.canonical;
          return;
        }
      }
    };
    compare_boxes(pb, run_reference(pb, c.src, c.w), c.p, run_reference(c.p, c.src, c.w), tail);
  }
}

// All three variants below must have a positive output on every axis, and output_padding cannot be negative.
bool can_expose(const Problem& p) {
  for (size_t a = 0; a < p.in.size(); ++a) {
    const int64_t span = p.stride[a] * (p.in[a] - 1) + p.dilation[a] * (p.kernel[a] - 1) + 1;
    if (p.pads_end[a] < 0 || span - p.pads_begin[a] - p.pads_end[a] < 1) return false;
  }
  return true;
}

TEST(ReferenceProperty, OutputPaddingExposesValuesCroppedByPadsEnd) {
  std::mt19937 rng(106);
  int tested = 0;
  for (int t = 0; t < kDraws; ++t) {
    const Case c = explicit_case(rng);
    if (!can_expose(c.p)) continue;
    ++tested;
    // Un-cropped: pads_end 0 and no output_padding. Cropped-then-exposed: output_padding == pads_end.
    Descriptor open = c.d, exposed = c.d, cropped = c.d;
    open.pads_end.assign(c.p.in.size(), 0);
    open.output_padding.assign(c.p.in.size(), 0);
    exposed.output_padding = c.p.pads_end;
    cropped.output_padding.assign(c.p.in.size(), 0);
    const Problem po = resolve(open), px = resolve(exposed), pc = resolve(cropped);
    ASSERT_EQ(po.out, px.out);
    const auto vx = run_reference(px, c.src, c.w);
    expect_close(vx, run_reference(po, c.src, c.w), px.canonical);
    // The cropped result is the leading part of the exposed one.
    compare_boxes(px, vx, pc, run_reference(pc, c.src, c.w), [](float, const std::vector<int64_t>&) {});
  }
  EXPECT_GE(tested, kDraws / 4);
}

// ---- the random generator itself ----

TEST(RandomDescriptor, ValidSmallAndCoversEveryParameter) {
  std::mt19937 rng(7);
  std::map<std::string, int> seen;
  const RandomLimits limits;
  for (int t = 0; t < 3000; ++t) {
    const Descriptor d = random_descriptor(rng, limits);
    Problem p;
    ASSERT_NO_THROW(p = resolve(d)) << to_json(d);
    EXPECT_LE(p.flops() / 2, limits.max_macs) << p.canonical;
    EXPECT_LE(p.dst_elements(), limits.max_dst_elements) << p.canonical;
    const auto any = [&](auto pred) {
      for (size_t a = 0; a < p.in.size(); ++a)
        if (pred(a)) return true;
      return false;
    };
    seen["rank" + std::to_string(p.spatial_rank)]++;
    seen["batch3"] += p.batch == 3;
    seen["depthwise"] += p.groups > 1 && p.c_in == p.groups && p.c_out == p.groups;
    seen["grouped"] += p.groups > 1 && p.c_in_per_group() > 1;
    seen["odd_channels"] += p.c_in % 8 != 0 && p.c_out > 16;
    seen["stride4"] += any([&](size_t a) { return p.stride[a] == 4; });
    seen["dilation3"] += any([&](size_t a) { return p.dilation[a] == 3; });
    seen["kernel5"] += any([&](size_t a) { return p.kernel[a] == 5; });
    seen["kernel<stride"] += any([&](size_t a) { return p.kernel[a] < p.stride[a]; });
    seen["negative_pad"] += any([&](size_t a) { return p.pads_begin[a] < 0 || p.pads_end[a] < 0; });
    seen["op>=stride"] += any([&](size_t a) { return p.output_padding[a] >= p.stride[a]; });
    seen["nxc"] += p.data_format == DataFormat::NXC;
    seen["xio"] += p.weights_format == WeightsFormat::XIO;
    seen["goix"] += p.weights_format == WeightsFormat::GOIX;
    seen["full_output_shape"] += d.output_shape.size() == p.in.size() + 2;
    if (!d.output_shape.empty()) seen[std::string("output_shape+") + to_string(d.auto_pad)]++;
  }
  for (const char* key : {"rank1", "rank2", "rank3", "batch3", "depthwise", "grouped", "odd_channels",
                          "stride4", "dilation3", "kernel5", "kernel<stride", "negative_pad", "op>=stride",
                          "nxc", "xio", "goix", "full_output_shape"}) {
    EXPECT_GE(seen[key], 20) << key;
  }
  for (AutoPad a : {AutoPad::Explicit, AutoPad::Valid, AutoPad::SameUpper, AutoPad::SameLower}) {
    EXPECT_GE((seen[std::string("output_shape+") + to_string(a)]), 20) << to_string(a);
  }
}

}  // namespace
}  // namespace deconvjit::testing
