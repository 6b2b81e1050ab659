// The oracle on part of the output, for checks of layers whose whole reference would take minutes (the
// tuner verifies every candidate it times).
#pragma once

#include <cstdint>
#include <vector>

#include "deconvjit/deconvjit.hpp"

namespace deconvjit::detail {

// Rows are (n, oz, oy) in row-major order of batch x out_z x out_y (1-D and 2-D problems have unit outer
// axes); `xs` the output x positions within them (empty: all). Writes dst and abs_sum (full-size arrays,
// dst_elements() each) at every channel of those points and returns those elements' indices. src and
// weights hold elements of p.dtype (f32 as float, bf16/f16 as their uint16_t bits); the sums are unrounded,
// as in reference_with_bound.
std::vector<int64_t> reference_rows(const Problem& p, const void* src, const void* weights,
                                    const std::vector<int64_t>& rows, const std::vector<int64_t>& xs,
                                    double* dst, double* abs_sum);

}  // namespace deconvjit::detail
