// Cases of one NCX-native family on grouped layers (test_col_x_groups.cpp, test_gemm_x_groups.cpp): each is
// checked against the double-precision reference, then its plan must be the family's, with groups.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/plan.hpp"
#include "support/deconv_tester.hpp"

namespace deconvjit::testing {

struct FamilyCase {
  DeconvTester t;
  TuningHints h;
  bool by_default;  // the default plan takes the family; otherwise h asks for it
};

// plan_of(tester, hints) -> detail::Plan, for the ISA the test file plans for.
template <typename PlanOf>
void expect_family_cases(const std::vector<FamilyCase>& cases, detail::Algorithm family, const PlanOf& plan_of) {
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    DeconvTester t = cases[i].t;
    if (!cases[i].by_default) t.hints(cases[i].h);
    t.Test();
    const detail::Plan pl = plan_of(t, cases[i].by_default ? TuningHints{} : cases[i].h);
    EXPECT_EQ(pl.algorithm, family) << pl.name;
    EXPECT_GT(pl.groups, 1);
  }
}

}  // namespace deconvjit::testing
