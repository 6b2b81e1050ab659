// Helpers shared by the plan tests (test_plan.cpp, test_schedule.cpp): both ISAs, and a plan of a tester's
// problem.
#pragma once

#include "runtime/plan.hpp"
#include "support/deconv_tester.hpp"

namespace deconvjit::detail {

inline constexpr Isa kIsas[] = {Isa::avx512_core, Isa::avx2};

// The plan of `isa` itself on every CPU: the choice of AVX2 under an AVX-512 cap on some CPUs
// (runtime/plan_isa.cpp) is tested on its own, in test_plan_isa.cpp.
inline Plan plan_for(const testing::DeconvTester& t, Isa isa, const TuningHints& h = {}) {
  return make_plan(resolve(t.descriptor()), isa, h, false);
}

}  // namespace deconvjit::detail
