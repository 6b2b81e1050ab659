// runtime/half.hpp: exact widening of every bf16 and f16 value, and one correctly rounded narrowing from
// double (nearest even at ties, subnormals, overflow at the right threshold, no double rounding).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "runtime/half.hpp"

namespace deconvjit::detail {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// binary16 decoded from the definition, independently of f16_to_float's bit moves.
double f16_by_definition(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  double v = exp == 0 ? std::ldexp(man, -24) : exp == 31 ? (man ? std::nan("") : kInf)
                                                         : std::ldexp(1024 + man, exp - 25);
  return sign ? -v : v;
}

// bfloat16 decoded the same way (8 exponent bits, bias 127, 7 fraction bits).
double bf16_by_definition(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 7) & 0xff, man = h & 0x7f;
  double v = exp == 0 ? std::ldexp(man, -133) : exp == 255 ? (man ? std::nan("") : kInf)
                                                           : std::ldexp(128 + man, exp - 134);
  return sign ? -v : v;
}

TEST(Half, EveryF16PatternWidensExactlyAndNarrowsBack) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    const double want = f16_by_definition(h);
    const float f = f16_to_float(h);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << b;
      ASSERT_TRUE(std::isnan(f16_to_float(double_to_f16(f)))) << std::hex << b;
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), want) << std::hex << b;
    ASSERT_EQ(std::signbit(f), (b & 0x8000) != 0) << std::hex << b;  // -0 stays -0
    ASSERT_EQ(double_to_f16(f), h) << std::hex << b;
    ASSERT_EQ(load_element(&h, DType::f16, 0), want) << std::hex << b;
  }
}

TEST(Half, EveryBf16PatternWidensExactlyAndNarrowsBack) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    const double want = bf16_by_definition(h);
    const float f = bf16_to_float(h);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << b;
      ASSERT_TRUE(std::isnan(bf16_to_float(double_to_bf16(f)))) << std::hex << b;
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), want) << std::hex << b;
    ASSERT_EQ(double_to_bf16(f), h) << std::hex << b;
    ASSERT_EQ(load_element(&h, DType::bf16, 0), want) << std::hex << b;
  }
}

TEST(Half, NaNStaysNaNOfEitherSign) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (double v : {nan, -nan}) {
    EXPECT_TRUE(std::isnan(f16_to_float(double_to_f16(v))));
    EXPECT_TRUE(std::isnan(bf16_to_float(double_to_bf16(v))));
  }
  uint16_t h = 0;
  store_element(&h, DType::f16, 0, nan);
  EXPECT_TRUE(std::isnan(load_element(&h, DType::f16, 0)));
  store_element(&h, DType::bf16, 0, nan);
  EXPECT_TRUE(std::isnan(load_element(&h, DType::bf16, 0)));
}

// Values exactly halfway between two neighbours go to the one with an even last bit, in both directions
// and for both signs; a hair off the tie goes to the nearer one.
TEST(Half, TiesRoundToEven) {
  const double h16 = std::ldexp(1.0, -11), h8 = std::ldexp(1.0, -8);  // half an ulp at 1
  for (double s : {1.0, -1.0}) {
    const uint16_t neg = s < 0 ? 0x8000 : 0;
    EXPECT_EQ(double_to_f16(s * (1 + h16)), neg | 0x3c00);      // 1 (even) vs 1+2^-10 (odd): down
    EXPECT_EQ(double_to_f16(s * (1 + 3 * h16)), neg | 0x3c02);  // 1+2^-10 (odd) vs 1+2^-9 (even): up
    EXPECT_EQ(double_to_f16(s * (1 + h16 * (1 + 1e-9))), neg | 0x3c01);  // above the tie
    EXPECT_EQ(double_to_f16(s * (1 + 3 * h16 * (1 - 1e-9))), neg | 0x3c01);  // below the tie
    EXPECT_EQ(double_to_f16(s * (2048 + 1)), neg | 0x6800);     // ulp 2 at 2048: 2049 -> 2048
    EXPECT_EQ(double_to_f16(s * (2048 + 3)), neg | 0x6802);     // 2051 -> 2052
    EXPECT_EQ(double_to_bf16(s * (1 + h8)), neg | 0x3f80);
    EXPECT_EQ(double_to_bf16(s * (1 + 3 * h8)), neg | 0x3f82);
    EXPECT_EQ(double_to_bf16(s * (1 + h8 * (1 + 1e-9))), neg | 0x3f81);
    EXPECT_EQ(double_to_bf16(s * (256 + 1)), neg | 0x4380);      // ulp 2 at 256
    EXPECT_EQ(double_to_bf16(s * (256 + 3)), neg | 0x4382);
  }
}

TEST(Half, F16SubnormalResults) {
  const double q = std::ldexp(1.0, -24);  // the subnormal step
  EXPECT_EQ(double_to_f16(q), 0x0001);
  EXPECT_EQ(double_to_f16(q / 2), 0x0000);                 // tie with 0: even
  EXPECT_EQ(double_to_f16(-q / 2), 0x8000);                // -0
  EXPECT_EQ(double_to_f16(q / 2 * (1 + 1e-9)), 0x0001);
  EXPECT_EQ(double_to_f16(1.5 * q), 0x0002);               // tie between 1 and 2 steps: 2
  EXPECT_EQ(double_to_f16(2.5 * q), 0x0002);               // tie between 2 and 3: 2
  EXPECT_EQ(double_to_f16(1023 * q), 0x03ff);              // the largest subnormal
  EXPECT_EQ(double_to_f16(1023.5 * q), 0x0400);            // tie: up into the smallest normal 2^-14
  EXPECT_EQ(double_to_f16(std::ldexp(1.0, -14)), 0x0400);
  EXPECT_EQ(double_to_f16(std::ldexp(1.0, -30)), 0x0000);  // far below: zero
  EXPECT_EQ(double_to_f16(-7 * q), 0x8007);
  const double b = std::ldexp(1.0, -133);  // bf16's subnormal step
  EXPECT_EQ(double_to_bf16(b), 0x0001);
  EXPECT_EQ(double_to_bf16(b / 2), 0x0000);
  EXPECT_EQ(double_to_bf16(1.5 * b), 0x0002);
  EXPECT_EQ(double_to_bf16(127.5 * b), 0x0080);  // up into the smallest normal 2^-126
}

TEST(Half, OverflowToInfinityAtTheThreshold) {
  EXPECT_EQ(double_to_f16(65504), 0x7bff);
  EXPECT_EQ(double_to_f16(65519.99), 0x7bff);
  EXPECT_EQ(double_to_f16(65520), 0x7c00);  // the tie with 65536 goes to the even side, past the range
  EXPECT_EQ(double_to_f16(-65520), 0xfc00);
  EXPECT_EQ(double_to_f16(1e10), 0x7c00);
  EXPECT_EQ(double_to_f16(kInf), 0x7c00);
  EXPECT_EQ(double_to_f16(-kInf), 0xfc00);
  const double max = kBf16Max, half_ulp = std::ldexp(1.0, 119);
  EXPECT_EQ(double_to_bf16(max), 0x7f7f);
  EXPECT_EQ(double_to_bf16(max + half_ulp * (1 - 1e-9)), 0x7f7f);
  EXPECT_EQ(double_to_bf16(max + half_ulp), 0x7f80);
  EXPECT_EQ(double_to_bf16(-(max + half_ulp)), 0xff80);
  EXPECT_EQ(double_to_bf16(1e39), 0x7f80);  // past float's range too
}

// x = 1 + half an ulp + a bit far below float's precision: rounding to float first lands exactly on the
// tie, which then goes to even (down); the one rounding from double sees it is above the tie (up).
TEST(Half, NoDoubleRoundingThroughFloat) {
  const double f16_case = 1 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  ASSERT_EQ(static_cast<double>(static_cast<float>(f16_case)), 1 + std::ldexp(1.0, -11));
  EXPECT_EQ(double_to_f16(f16_case), 0x3c01);
  EXPECT_EQ(double_to_f16(-f16_case), 0xbc01);
  const double bf16_case = 1 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40);
  ASSERT_EQ(static_cast<double>(static_cast<float>(bf16_case)), 1 + std::ldexp(1.0, -8));
  EXPECT_EQ(double_to_bf16(bf16_case), 0x3f81);
  // Near f16's overflow: 65520 - 2^-30 must stay finite (through float it becomes 65520, then inf).
  EXPECT_EQ(double_to_f16(65520 - std::ldexp(1.0, -30)), 0x7bff);
  // Subnormal tie broken by a low bit.
  EXPECT_EQ(double_to_f16(std::ldexp(1.0, -25) + std::ldexp(1.0, -60)), 0x0001);
}

TEST(Half, StoreElementRoundsOnceIntoEachType) {
  const double x = 1 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  uint16_t h = 0;
  store_element(&h, DType::f16, 0, x);
  EXPECT_EQ(h, 0x3c01);
  store_element(&h, DType::bf16, 0, x);
  EXPECT_EQ(h, 0x3f80);  // 2^-11 is below half a bf16 ulp
  float f = 0;
  store_element(&f, DType::f32, 0, x);
  EXPECT_EQ(f, static_cast<float>(x));
  EXPECT_EQ(load_element(&f, DType::f32, 0), static_cast<double>(f));
}

}  // namespace
}  // namespace deconvjit::detail
