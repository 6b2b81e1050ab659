// Helpers shared by the plan tests (test_plan*.cpp, test_schedule.cpp): both ISAs, a plan of a tester's
// problem, and hints the planner must refuse.
#pragma once

#include <gtest/gtest.h>

#include "runtime/plan.hpp"
#include "support/deconv_tester.hpp"

namespace deconvjit::detail {

inline constexpr Isa kIsas[] = {Isa::avx512_core, Isa::avx2};

// The plan of `isa` itself on every CPU: the choice of AVX2 under an AVX-512 cap on some CPUs
// (runtime/plan_isa.cpp) is tested on its own, in test_plan_isa.cpp.
inline Plan plan_for(const testing::DeconvTester& t, Isa isa, const TuningHints& h = {}) {
  return make_plan(resolve(t.descriptor()), isa, h, false);
}

// Expects make_plan to reject the hints with InvalidArgument (whose message names `field`, when given).
inline void expect_rejected(const Problem& p, Isa isa, const TuningHints& h, const char* what,
                            const char* field = nullptr) {
  try {
    make_plan(p, isa, h);
    ADD_FAILURE() << "accepted " << what << " on " << to_string(isa);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::InvalidArgument) << what << ": " << e.what();
    if (field) EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << what << ": " << e.what();
  }
}

}  // namespace deconvjit::detail
