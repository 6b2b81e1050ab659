// The oracle in bf16 and f16: it reads the exact values, sums in double and rounds each result once into
// the output type (nearest even); reference_with_bound keeps the sums unrounded. Non-finite inputs follow
// IEEE arithmetic.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "runtime/half.hpp"
#include "runtime/reference.hpp"
#include "runtime/tolerance.hpp"
#include "runtime/typed_data.hpp"
#include "support/deconv_tester.hpp"

namespace deconvjit::testing {
namespace {

using verify::TypedData;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr DType kHalves[] = {DType::bf16, DType::f16};

TypedData typed(DType t, const std::vector<double>& values) {
  TypedData d(t, static_cast<int64_t>(values.size()));
  for (size_t i = 0; i < values.size(); ++i) d.set(static_cast<int64_t>(i), values[i]);
  return d;
}

// out[o] for a 1-D problem with one output channel: C_IN input channels of X pixels, OIX weights [C_IN,1,K].
Problem one_channel_out(DType t, int64_t c_in, int64_t x, int64_t k, int64_t s) {
  return resolve(DeconvTester().rank(1).channels(c_in, 1).input({x}).kernel({k}).stride({s}).dtype(t).descriptor());
}

TypedData run(const Problem& p, const TypedData& src, const TypedData& w) {
  TypedData dst(p.dtype, p.dst_elements());
  reference(p, src.view(), w.view(), dst.view());
  return dst;
}

// A 1-D problem by hand: X = 3, K = 2, s = 2, two input channels, so out[2i + k] = sum_ci x[ci][i]*w[ci][k].
// Values need all of each type's bits; the expected sums are formed here in double and rounded once.
TEST(TypedReference, HandComputedSumsRoundedOnce) {
  for (DType t : kHalves) {
    SCOPED_TRACE(to_string(t));
    const Problem p = one_channel_out(t, 2, 3, 2, 2);
    ASSERT_EQ(p.dst_elements(), 6);
    // Representable in both types (8 significant bits at most).
    const std::vector<double> x = {1.5, -0.375, 3.25, 0.0078125, 7.5, -1.25}, w = {1.125, -2.5, 0.75, 96};
    const TypedData src = typed(t, x), wei = typed(t, w);
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(src.at(static_cast<int64_t>(i)), x[i]);
    const TypedData dst = run(p, src, wei);
    std::vector<double> want(6), mag(6);
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t k = 0; k < 2; ++k) {
        const double a = x[i] * w[k], b = x[3 + i] * w[2 + k];
        want[2 * i + k] = a + b;
        mag[2 * i + k] = std::fabs(a) + std::fabs(b);
      }
    std::vector<double> sums(6), abs_sums(6);
    reference_with_bound(p, src.view(), wei.view(), sums.data(), abs_sums.data());
    for (int64_t e = 0; e < 6; ++e) {
      EXPECT_EQ(sums[e], want[e]) << e;  // unrounded
      EXPECT_EQ(abs_sums[e], mag[e]) << e;
      TypedData once(t, 1);
      once.set(0, want[e]);
      EXPECT_EQ(dst.at(e), once.at(0)) << e;
    }
  }
}

// Sums of three terms that lie just above a tie by far less than float's precision: rounded through float
// they would land on the tie and go to even (down); the oracle rounds the double sum once (up).
TEST(TypedReference, RoundsTheDoubleSumOnceNotThroughFloat) {
  struct Case {
    DType t;
    double half_ulp;
    uint16_t want;
  };
  for (const Case& c : {Case{DType::f16, std::ldexp(1.0, -11), 0x3c01}, Case{DType::bf16, std::ldexp(1.0, -8), 0x3f81}}) {
    SCOPED_TRACE(to_string(c.t));
    const Problem p = one_channel_out(c.t, 3, 1, 1, 1);
    const TypedData src = typed(c.t, {1, c.half_ulp, std::ldexp(1.0, -20)}), w = typed(c.t, {1, 1, std::ldexp(1.0, -20)});
    const TypedData dst = run(p, src, w);
    uint16_t bits;
    std::memcpy(&bits, dst.data(), 2);
    EXPECT_EQ(bits, c.want) << std::hex << bits;
  }
}

// Exact ties of the sum go to the even neighbour, in both directions and both signs.
TEST(TypedReference, OutputRoundsToNearestEven) {
  for (DType t : kHalves) {
    SCOPED_TRACE(to_string(t));
    const double h = t == DType::f16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
    const Problem p = one_channel_out(t, 2, 1, 1, 1);
    for (double s : {1.0, -1.0}) {
      const TypedData w = typed(t, {s, s});
      EXPECT_EQ(run(p, typed(t, {1, h}), w).at(0), s * 1) << "tie below an odd neighbour: down";
      EXPECT_EQ(run(p, typed(t, {1 + 2 * h, h}), w).at(0), s * (1 + 4 * h)) << "tie below an even one: up";
    }
  }
  // f16's overflow threshold: 65504 + 16 ties with 65536, which is even and out of range: inf.
  const Problem p = one_channel_out(DType::f16, 2, 1, 1, 1);
  const TypedData w = typed(DType::f16, {1, 1});
  EXPECT_EQ(run(p, typed(DType::f16, {65504, 15.9921875}), w).at(0), 65504);
  EXPECT_EQ(run(p, typed(DType::f16, {65504, 16}), w).at(0), kInf);
  EXPECT_EQ(run(p, typed(DType::f16, {-65504, -16}), w).at(0), -kInf);
  // Subnormal results: 3 + 2 subnormal steps times 0.5 = 2.5 steps, a tie: 2 steps (even).
  const double q = std::ldexp(1.0, -24);
  EXPECT_EQ(run(p, typed(DType::f16, {3 * q, 2 * q}), typed(DType::f16, {0.5, 0.5})).at(0), 2 * q);
}

// IEEE: inf * 0 = NaN, inf + finite = inf, inf - inf = NaN, NaN anywhere = NaN; outputs the special value
// does not reach stay finite.
TEST(TypedReference, NonFiniteInputsPropagateAsIeeeSays) {
  for (DType t : {DType::f32, DType::bf16, DType::f16}) {
    SCOPED_TRACE(to_string(t));
    const Problem p = one_channel_out(t, 2, 2, 1, 1);  // out[i] = x[0][i]*w[0] + x[1][i]*w[1]
    const double nan = std::numeric_limits<double>::quiet_NaN();
    auto out = [&](std::vector<double> x, std::vector<double> w) { return run(p, typed(t, x), typed(t, w)); };
    const TypedData a = out({kInf, 1, 2, 3}, {0.5, 1});
    EXPECT_EQ(a.at(0), kInf);  // inf*0.5 + 2*1
    EXPECT_EQ(a.at(1), 3.5);   // untouched by the infinity
    EXPECT_TRUE(std::isnan(out({kInf, 1, 2, 3}, {0, 1}).at(0)));       // inf * 0
    EXPECT_EQ(out({-kInf, 1, 2, 3}, {0.5, 1}).at(0), -kInf);
    EXPECT_TRUE(std::isnan(out({kInf, 1, kInf, 3}, {1, -1}).at(0)));   // inf - inf
    EXPECT_TRUE(std::isnan(out({nan, 1, 2, 3}, {1, 1}).at(0)));
    EXPECT_EQ(out({nan, 1, 2, 3}, {1, 1}).at(1), 4);
    std::vector<double> sum(2), mag(2);
    reference_with_bound(p, typed(t, {kInf, 1, 2, 3}).view(), typed(t, {0.5, 1}).view(), sum.data(), mag.data());
    EXPECT_EQ(sum[0], kInf);
    EXPECT_EQ(mag[0], kInf);
    EXPECT_EQ(sum[1], 3.5);
  }
}

// Random problems: the 16-bit oracle equals the f32 oracle run on the same values widened to f32 (the
// sums in double are the same), and its output is that sum rounded once.
TEST(TypedReference, AgreesWithTheF32OracleOnWidenedValues) {
  std::mt19937 rng(77);
  for (int i = 0; i < 60; ++i) {
    const Descriptor d = random_descriptor(rng);
    for (DType t : kHalves) {
      Descriptor dt = d;
      dt.dtype = dt.weights_dtype = t;
      const Problem p = resolve(dt), p32 = resolve(d);
      const verify::TypedOperands ops = verify::typed_operands(p, static_cast<uint64_t>(i));
      std::vector<float> src(ops.src.count), w(ops.weights.count);
      for (size_t e = 0; e < src.size(); ++e) src[e] = static_cast<float>(ops.src.at(static_cast<int64_t>(e)));
      for (size_t e = 0; e < w.size(); ++e) w[e] = static_cast<float>(ops.weights.at(static_cast<int64_t>(e)));
      std::vector<double> want(p.dst_elements()), mag(want.size()), got(want.size()), got_mag(want.size());
      reference_with_bound(p32, src, w, want.data(), mag.data());
      reference_with_bound(p, ops.src.view(), ops.weights.view(), got.data(), got_mag.data());
      ASSERT_EQ(got, want) << to_json(dt);
      ASSERT_EQ(got_mag, mag) << to_json(dt);
      const TypedData dst = run(p, ops.src, ops.weights);
      TypedData once(t, 1);
      for (int64_t e = 0; e < dst.count; ++e) {
        once.set(0, want[static_cast<size_t>(e)]);
        ASSERT_EQ(dst.at(e), once.at(0)) << to_json(dt) << " at " << e;
      }
    }
  }
}

// The tuner's row sample reads 16-bit operands too.
TEST(TypedReference, RowsReadTheProblemsType) {
  const Problem p = resolve(DeconvTester().batch(2).channels(3, 5).input({4, 6}).kernel({3, 3}).stride({2, 2})
                                .dtype(DType::bf16).descriptor());
  const verify::TypedOperands ops = verify::typed_operands(p, 4);
  std::vector<double> all(p.dst_elements()), all_mag(all.size()), part(all.size()), part_mag(all.size());
  reference_with_bound(p, ops.src.view(), ops.weights.view(), all.data(), all_mag.data());
  const std::vector<int64_t> at =
      detail::reference_rows(p, ops.src.data(), ops.weights.data(), {1, 6}, {}, part.data(), part_mag.data());
  ASSERT_FALSE(at.empty());
  for (int64_t e : at) {
    EXPECT_EQ(part[e], all[e]) << e;
    EXPECT_EQ(part_mag[e], all_mag[e]) << e;
  }
}

TEST(TypedReference, BuffersOfAnotherTypeAreRefused) {
  const Problem p = one_channel_out(DType::bf16, 2, 1, 1, 1);
  const TypedData src = typed(DType::f16, {1, 2}), w = typed(DType::bf16, {1, 2});
  TypedData dst(DType::bf16, 1);
  EXPECT_THROW(reference(p, src.view(), w.view(), dst.view()), Error);
  TypedData wrong(DType::f32, 1);
  EXPECT_THROW(reference(p, typed(DType::bf16, {1, 2}).view(), w.view(), wrong.view()), Error);
}

}  // namespace
}  // namespace deconvjit::testing
