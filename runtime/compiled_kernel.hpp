// What a Kernel handle points at: the problem, its plan, the code, and the schedule derived from the plan.
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "deconvjit/deconvjit.hpp"
#include "jit/code_buffer.hpp"
#include "jit/kernel_abi.hpp"
#include "runtime/plan.hpp"
#include "runtime/schedule.hpp"

namespace deconvjit::detail {

struct CompiledKernel {
  Problem problem;
  Plan plan;
  std::unique_ptr<jit::CodeBuffer> code;
  std::array<std::vector<jit::KernelFn>, 2> fns;  // [block kind][width - 1], then [ur_w + edge block]
  Schedule schedule;
  double compile_ms = 0;
  // col: the inner GEMM kernel (it owns the packed weights' layout; `code` holds only the sums of taps,
  // fns[0][0]), and the valid taps of every output x (z and y are in the schedule).
  Kernel inner;
  std::vector<AxisTaps> x_taps;
};

// col (runtime/col.cpp): builds the composite around its inner kernel (compiled through compile(), so it
// is cached in memory and on disk like any kernel); packs; executes (runtime/executor.cpp).
std::shared_ptr<const CompiledKernel> build_col(const Problem& p, const Plan& plan, const Options& options);
void pack_col_weights(const CompiledKernel& k, const void* weights, float* out);
// The kernel whose packed weights a Kernel's PackedWeights hold (the inner one for col).
inline const CompiledKernel& weights_owner(const CompiledKernel& k) {
  return k.inner ? *k.inner.impl() : k;
}

// Emits the plan's code, maps it W^X and derives the schedule.
std::shared_ptr<const CompiledKernel> build_kernel(const Problem& p, const Plan& plan);

// Executes with packed weights; src and dst in the problem's data_format.
// src and dst in the plan's data type (float, or the 16 bits of bf16 / f16).
void execute_kernel(const CompiledKernel& k, const void* src, const float* packed, void* dst);
// Packs user-layout weights into `out` (Plan::packed_weights_floats() floats).
// weights in the problem's data type; packed as f32 (widening is exact).
void pack_weights_into(const CompiledKernel& k, const void* weights, float* out);

}  // namespace deconvjit::detail
