// The 16-bit element types in C++: exact widening to float, and one correctly rounded narrowing from
// double (round to nearest even, straight from the double: rounding to float first would round twice).
// Used by the oracle, the weight packing (widening only: exact, so no arithmetic leaves generated code)
// and the tests. bf16 is float's upper half; f16 is IEEE binary16.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "deconvjit/deconvjit.hpp"

namespace deconvjit::detail {

inline float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t float_to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline float bf16_to_float(uint16_t h) { return bits_to_float(uint32_t{h} << 16); }

inline float f16_to_float(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  if (exp == 0x1f) return bits_to_float(sign | 0x7f800000u | (man << 13));  // inf, NaN (payload kept)
  if (exp != 0) return bits_to_float(sign | ((exp + 112) << 23) | (man << 13));
  const float sub = std::ldexp(static_cast<float>(man), -24);  // subnormal or zero: exact in float
  return sign ? -sub : sub;
}

// Round x to a binary format with `digits` significand bits (the hidden one included) whose smallest
// normal is 2^emin; past max_finite it is infinity. Exact for every double: the scaling by powers of two
// is exact and nearbyint rounds ties to even in the default rounding mode.
inline double round_to_format(double x, int digits, int emin, double max_finite) {
  if (!std::isfinite(x) || x == 0) return x;
  int e;
  std::frexp(x, &e);  // |x| in [2^(e-1), 2^e)
  const int quantum = std::max(e - 1, emin) - (digits - 1);
  const double y = std::ldexp(std::nearbyint(std::ldexp(x, -quantum)), quantum);
  return std::fabs(y) > max_finite ? std::copysign(HUGE_VAL, x) : y;
}

constexpr double kBf16Max = 3.3895313892515355e38;  // (2 - 2^-7) * 2^127
constexpr double kF16Max = 65504.0;

inline uint16_t double_to_bf16(double x) {
  if (std::isnan(x)) return std::signbit(x) ? 0xffc0 : 0x7fc0;
  // The rounded value is a float whose low 16 bits are zero.
  return static_cast<uint16_t>(float_to_bits(static_cast<float>(round_to_format(x, 8, -126, kBf16Max))) >> 16);
}

inline uint16_t double_to_f16(double x) {
  if (std::isnan(x)) return std::signbit(x) ? 0xfe00 : 0x7e00;
  const double y = round_to_format(x, 11, -14, kF16Max);
  const uint16_t sign = std::signbit(y) ? 0x8000 : 0;
  const double a = std::fabs(y);
  if (std::isinf(a)) return sign | 0x7c00;
  if (a < std::ldexp(1.0, -14)) return sign | static_cast<uint16_t>(std::ldexp(a, 24));  // subnormal, zero
  int e;
  const double m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  return sign | static_cast<uint16_t>((e + 14) << 10) | static_cast<uint16_t>(std::ldexp(m, 11) - 1024);
}

// One element of a buffer of type t, widened (exact), and a double rounded once into type t.
inline double load_element(const void* data, DType t, int64_t i) {
  if (t == DType::f32) return static_cast<const float*>(data)[i];
  const uint16_t h = static_cast<const uint16_t*>(data)[i];
  return t == DType::bf16 ? bf16_to_float(h) : f16_to_float(h);
}
inline void store_element(void* data, DType t, int64_t i, double v) {
  if (t == DType::f32)
    static_cast<float*>(data)[i] = static_cast<float>(v);
  else
    static_cast<uint16_t*>(data)[i] = t == DType::bf16 ? double_to_bf16(v) : double_to_f16(v);
}

}  // namespace deconvjit::detail
