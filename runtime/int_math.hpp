// Integer division that rounds the way index arithmetic needs: pads, and so offsets, may be negative.
#pragma once

#include <cstdint>

namespace deconvjit::detail {

inline int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }
inline int64_t floor_mod(int64_t a, int64_t b) { return a - floor_div(a, b) * b; }
inline int64_t ceil_div_signed(int64_t a, int64_t b) { return -floor_div(-a, b); }
inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }  // a >= 0, b > 0

}  // namespace deconvjit::detail
