// The direct / gemm kernel family: one output row segment of one stride phase per call.
// Reads only the Plan; every shape decision was made there.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/plan.hpp"

namespace deconvjit::jit {

struct EmittedCode {
  std::vector<uint8_t> bytes;
  // entries[kind][w - 1]: offset of the function computing w pixels per block; kind 0 = Plan::main,
  // kind 1 = Plan::last.
  std::array<std::vector<size_t>, 2> entries;
};

EmittedCode emit_direct(const detail::Plan& plan);

}  // namespace deconvjit::jit
