// runtime/tolerance.hpp and runtime/typed_data.hpp: the acceptance rule in each type (the f32 rule kept
// exactly as it was), its IEEE special cases, compare() on typed outputs, and the typed random data.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "runtime/tolerance.hpp"
#include "runtime/typed_data.hpp"
#include "support/deconv_tester.hpp"

namespace deconvjit::verify {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// C_IN = c_in, a 3x3 kernel: dot_length = 9 * c_in + 1.
Problem problem(DType t, int64_t c_in, DType acc = DType::f32) {
  return resolve(testing::DeconvTester().channels(c_in, 2).kernel({3, 3}).dtype(t).accumulation(acc).descriptor());
}

TEST(Tolerance, UnitRoundoffAndGamma) {
  EXPECT_EQ(unit_roundoff(DType::f32), std::ldexp(1.0, -24));
  EXPECT_EQ(unit_roundoff(DType::f16), std::ldexp(1.0, -11));
  EXPECT_EQ(gamma(1000), 1000 * std::ldexp(1.0, -24) / (1 - 1000 * std::ldexp(1.0, -24)));
  EXPECT_EQ(gamma(100, std::ldexp(1.0, -11)), 100.0 / (2048 - 100));
  EXPECT_EQ(gamma(2047, std::ldexp(1.0, -11)), 2047.0);
  EXPECT_EQ(gamma(2048, std::ldexp(1.0, -11)), kInf);  // n*u = 1: the bound says nothing
  EXPECT_EQ(gamma(int64_t{1} << 24), kInf);
}

// f32 data with f32 sums: exactly the rule from before the 16-bit types.
TEST(Tolerance, F32RuleIsUnchanged) {
  for (int64_t c_in : {1, 7, 64, 1000}) {
    const Problem p = problem(DType::f32, c_in);
    const Rule r(p);
    const int64_t n = dot_length(p);
    EXPECT_EQ(n, 9 * c_in + 1);
    for (double s : {0.0, 1e-30, 0.5, 3.0, 1e6}) {
      const double old = gamma(n) * s + static_cast<double>(n) * std::numeric_limits<float>::min();
      EXPECT_EQ(tolerance(n, s), old);
      for (double got : {0.0, 1.0, -2.5e5}) EXPECT_EQ(r.tol(got, got, s), old) << c_in << " " << s;
    }
  }
}

// 16-bit outputs add half an ulp of the output type at the result's magnitude.
TEST(Tolerance, SixteenBitOutputsAddHalfAnUlp) {
  for (DType t : {DType::bf16, DType::f16}) {
    SCOPED_TRACE(to_string(t));
    const Problem p = problem(t, 4);
    const Rule r(p);
    const int64_t n = dot_length(p);
    const double arithmetic = gamma(n) * 2.0 + static_cast<double>(n) * std::ldexp(1.0, -126);
    const int fraction_bits = t == DType::f16 ? 10 : 7;
    EXPECT_EQ(r.tol(1.25, 1.25, 2.0), arithmetic + std::ldexp(1.0, -fraction_bits - 1));
    EXPECT_EQ(r.tol(-3.0, -3.0, 2.0), arithmetic + std::ldexp(1.0, -fraction_bits));  // binade [2, 4)
    // want just below 2, got rounded up to 2: the ulp of the upper binade counts.
    const double below = 2 - std::ldexp(1.0, -30);
    EXPECT_EQ(r.tol(2.0, below, 2.0), arithmetic + std::ldexp(1.0, -fraction_bits));
    // ... and so does want + gamma*S reaching it when got is below.
    EXPECT_EQ(r.tol(1.5, below, 2.0), arithmetic + std::ldexp(1.0, -fraction_bits));
  }
  const Rule h(problem(DType::f16, 1));  // near zero: half the subnormal step
  EXPECT_EQ(h.tol(0, 0, 0), h.tiny + std::ldexp(1.0, -25));
}

TEST(Tolerance, HalfUlpAndOverflowThresholds) {
  EXPECT_EQ(half_ulp(DType::f16, 1.0), std::ldexp(1.0, -11));
  EXPECT_EQ(half_ulp(DType::f16, 65504), 16);
  EXPECT_EQ(half_ulp(DType::f16, 1e-7), std::ldexp(1.0, -25));  // subnormal
  EXPECT_EQ(half_ulp(DType::bf16, 1.0), std::ldexp(1.0, -8));
  EXPECT_EQ(half_ulp(DType::bf16, 0), std::ldexp(1.0, -134));
  EXPECT_EQ(half_ulp(DType::f32, 1.0), std::ldexp(1.0, -24));
  EXPECT_EQ(overflow_threshold(DType::f16), 65520);
  EXPECT_EQ(overflow_threshold(DType::bf16), detail::kBf16Max + std::ldexp(1.0, 119));
  EXPECT_EQ(overflow_threshold(DType::f32), std::numeric_limits<float>::max() + std::ldexp(1.0, 103));
}

TEST(Tolerance, F16SumsUseTheHalfRoundoff) {
  const Problem p = problem(DType::f16, 4, DType::f16);
  const Rule r(p);
  EXPECT_EQ(r.g, gamma(37, std::ldexp(1.0, -11)));
  EXPECT_EQ(r.tiny, 37 * std::ldexp(1.0, -14));
  EXPECT_TRUE(r.accepts(1.0 + 0.01, 1.0, 1.0));  // gamma(37) ~ 0.018
  EXPECT_FALSE(r.accepts(1.0 + 0.05, 1.0, 1.0));
  const Rule long_sums(problem(DType::f16, 300, DType::f16));  // 2701 terms: n*u > 1
  EXPECT_EQ(long_sums.g, kInf);
  EXPECT_TRUE(long_sums.accepts(1e4, 1.0, 1.0));
}

TEST(Tolerance, NonFiniteSumsNeedTheSameValue) {
  for (DType t : {DType::f32, DType::bf16, DType::f16}) {
    const Rule r(problem(t, 2));
    EXPECT_TRUE(r.accepts(kNaN, kNaN, kInf));
    EXPECT_FALSE(r.accepts(0, kNaN, kInf));
    EXPECT_FALSE(r.accepts(kInf, kNaN, kInf));
    EXPECT_TRUE(r.accepts(kInf, kInf, kInf));
    EXPECT_TRUE(r.accepts(-kInf, -kInf, kInf));
    EXPECT_FALSE(r.accepts(-kInf, kInf, kInf));
    EXPECT_FALSE(r.accepts(kNaN, kInf, kInf));
    EXPECT_FALSE(r.accepts(65504, kInf, kInf));
    // A NaN where the sum is finite (an element never written) fails.
    EXPECT_FALSE(r.accepts(kNaN, 1.0, 2.0));
    EXPECT_FALSE(r.accepts(kInf, 1.0, 2.0));
  }
}

TEST(Tolerance, OverflowOfTheOutputTypeMayGiveInfinity) {
  const Rule r(problem(DType::f16, 2));
  EXPECT_TRUE(r.accepts(kInf, 65530, 65530));     // past 65520: rounds to inf
  EXPECT_TRUE(r.accepts(-kInf, -70000, 70000));
  EXPECT_FALSE(r.accepts(kInf, -70000, 70000));   // the wrong sign
  EXPECT_FALSE(r.accepts(kInf, 65000, 65000));    // far from the threshold
  EXPECT_TRUE(r.accepts(65504, 65519, 65519));    // finite and within half an ulp
  const Rule b(problem(DType::bf16, 2));
  EXPECT_TRUE(b.accepts(kInf, 3.4e38, 3.4e38));
  EXPECT_FALSE(b.accepts(kInf, 3.3e38, 3.3e38));
  // Partial sums past the sum type's range (here f32: products of bf16 values near its maximum) may
  // overflow to either infinity, or meet as inf - inf.
  EXPECT_TRUE(b.accepts(kNaN, 0.0, 6.8e38));
  EXPECT_TRUE(b.accepts(-kInf, 1.0, 6.8e38));
  const Rule f(problem(DType::f32, 2));
  EXPECT_TRUE(f.accepts(kInf, 3.5e38, 3.5e38));  // f32 outputs overflow as IEEE says too
}

TEST(Compare, TypedOutputs) {
  const Problem p = problem(DType::f16, 2);
  TypedData got(DType::f16, 4);
  const std::vector<double> want = {1.0, -2.0, 0.1, kInf}, mag = {1.0, 2.0, 0.1, kInf};
  got.set(0, 1.0);
  got.set(1, -2.0);
  got.set(2, 0.1);  // rounded: within half an ulp
  got.set(3, kInf);
  Comparison c = compare(p, got.view(), want.data(), mag.data(), 4);
  EXPECT_TRUE(c.ok);
  EXPECT_EQ(c.failures, 0);
  got.set(1, -2.5);
  got.set(3, kNaN);
  c = compare(p, got.view(), want.data(), mag.data(), 4);
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.failures, 2);
  ASSERT_EQ(c.first.size(), 2u);
  EXPECT_EQ(c.first[0].index, 1);
  EXPECT_EQ(c.first[0].got, -2.5);
  EXPECT_TRUE(std::isnan(c.first[1].got));
  EXPECT_THROW(compare(problem(DType::bf16, 2), got.view(), want.data(), mag.data(), 4), Error);  // type
  EXPECT_THROW(compare(p, got.view(), want.data(), mag.data(), 5), Error);                        // count
}

TEST(TypedData, RandomDataIsTheF32DrawRoundedOnce) {
  const std::vector<float> f = uniform_data(5000, 42);
  const TypedData f32 = typed_random(5000, DType::f32, 42);
  ASSERT_EQ(f32.bytes.size(), 5000u * 4);
  for (DType t : {DType::bf16, DType::f16}) {
    const TypedData a = typed_random(5000, t, 42), b = typed_random(5000, t, 42);
    EXPECT_EQ(a.bytes, b.bytes);  // deterministic
    EXPECT_NE(a.bytes, typed_random(5000, t, 43).bytes);
    ASSERT_EQ(a.bytes.size(), 5000u * 2);
    TypedData once(t, 1);
    for (int64_t i = 0; i < 5000; ++i) {
      once.set(0, f[static_cast<size_t>(i)]);
      ASSERT_EQ(a.at(i), once.at(0)) << i;
      ASSERT_LE(std::fabs(a.at(i)), 1.0);
    }
  }
  for (int64_t i = 0; i < 5000; ++i) ASSERT_EQ(f32.at(i), f[static_cast<size_t>(i)]);
}

TEST(TypedData, OperandsMatchTheFloatOperandsInF32) {
  const Problem p = problem(DType::f32, 3);
  const Operands ops = random_operands(p, 9);
  const TypedOperands typed = typed_operands(p, 9);
  ASSERT_EQ(typed.src.count, p.src_elements());
  ASSERT_EQ(typed.weights.count, p.weights_elements());
  EXPECT_EQ(std::memcmp(typed.src.data(), ops.src.data(), ops.src.size() * 4), 0);
  EXPECT_EQ(std::memcmp(typed.weights.data(), ops.weights.data(), ops.weights.size() * 4), 0);
  const TypedOperands half = typed_operands(problem(DType::bf16, 3), 9);
  EXPECT_EQ(half.src.dtype, DType::bf16);
  const ConstBuffer v = half.src.view();
  EXPECT_EQ(v.dtype, DType::bf16);
  EXPECT_EQ(v.elements, static_cast<size_t>(p.src_elements()));
}

}  // namespace
}  // namespace deconvjit::verify
