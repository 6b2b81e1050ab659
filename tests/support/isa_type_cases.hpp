// A fixture over (ISA, data type) pairs for kernel tests that run their own cases (test_edge_blocks.cpp,
// test_gemm_overhang.cpp): skips, with the reason, where this CPU lacks the ISA or the type's instructions,
// and the instantiation over both ISAs and the three types.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "deconvjit/deconvjit.hpp"
#include "support/deconv_tester.hpp"

namespace deconvjit::testing {

class IsaTypeCases : public ::testing::TestWithParam<std::tuple<Isa, DType>> {
 protected:
  void SetUp() override {
    if (!isa_available(isa())) GTEST_SKIP() << to_string(isa()) << " is not available on this CPU";
    if (auto why = unsupported_types(isa(), type())) GTEST_SKIP() << "compile: " << *why;
  }
  Isa isa() const { return std::get<0>(GetParam()); }
  DType type() const { return std::get<1>(GetParam()); }
};

inline auto isa_type_values() {
  return ::testing::Combine(::testing::Values(Isa::avx512_core, Isa::avx2),
                            ::testing::Values(DType::f32, DType::bf16, DType::f16));
}

inline std::string isa_type_name(const ::testing::TestParamInfo<std::tuple<Isa, DType>>& info) {
  return std::string(to_string(std::get<0>(info.param))) + "_" + to_string(std::get<1>(info.param));
}

}  // namespace deconvjit::testing
