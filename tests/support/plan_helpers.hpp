// Helpers shared by the plan tests (test_plan.cpp, test_schedule.cpp): both ISAs, and a plan of a tester's
// problem.
#pragma once

#include "runtime/plan.hpp"
#include "support/deconv_tester.hpp"

namespace deconvjit::detail {

inline constexpr Isa kIsas[] = {Isa::avx512_core, Isa::avx2};

inline Plan plan_for(const testing::DeconvTester& t, Isa isa, const TuningHints& h = {}) {
  return make_plan(resolve(t.descriptor()), isa, h);
}

}  // namespace deconvjit::detail
