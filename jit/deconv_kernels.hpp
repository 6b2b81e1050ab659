// Entry to the kernel emitters: the plan's algorithm picks the family; each reads only the Plan.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/plan.hpp"

namespace deconvjit::jit {

struct EmittedCode {
  std::vector<uint8_t> bytes;
  // entries[kind][w - 1]: offset of the function computing w pixels per block, then (row families) one per
  // Plan::edges pattern at [ur_w + edge]; kind 0 = Plan::main, kind 1 = Plan::last.
  std::array<std::vector<size_t>, 2> entries;
};

EmittedCode emit_kernel(const detail::Plan& plan);

// The families (one file each).
EmittedCode emit_direct(const detail::Plan& plan);  // direct, gemm, depthwise
EmittedCode emit_dot(const detail::Plan& plan);     // dot
EmittedCode emit_depthwise_x(const detail::Plan& plan);  // depthwise_x and dot_x
EmittedCode emit_gemm_x(const detail::Plan& plan);       // gemm_x
EmittedCode emit_col_x(const detail::Plan& plan);        // col_x
EmittedCode emit_col_sum(const detail::Plan& plan);      // col's sums of taps (col2im), entries[0][0]

}  // namespace deconvjit::jit
