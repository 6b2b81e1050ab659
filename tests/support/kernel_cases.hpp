// The fixture of the targeted JIT cases (test_kernel_cases*.cpp; test_kernel_cases.cpp instantiates it):
// each case on AVX-512 and AVX2, checked against the double-precision reference.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "deconvjit/deconvjit.hpp"
#include "support/deconv_tester.hpp"
#include "support/no_disk_cache.hpp"

namespace deconvjit::testing {

inline constexpr DataFormat kFormats[] = {DataFormat::NCX, DataFormat::NXC};

struct CaseParam {
  Isa isa;
  DType dtype;
};

// Every case runs in f32, bf16 and f16 (src, weights and dst in that type, f32 sums): the cases are small,
// so all of them in three types stays within the suite's time budget (a few seconds per type). Forced
// routes that exist for f32 only (col, the in_kernel layout) are left out for the 16-bit types, and
// ColumnGemm checks that they refuse col as a hint.
class KernelCases : public ::testing::TestWithParam<CaseParam> {
 protected:
  void SetUp() override {
    if (!isa_available(isa())) GTEST_SKIP() << "ISA " << to_string(isa()) << " is not available";
    if (auto why = unsupported_types(isa(), dtype())) GTEST_SKIP() << "compile: " << *why;
  }
  Isa isa() const { return GetParam().isa; }
  DType dtype() const { return GetParam().dtype; }
  DeconvTester T() const { return DeconvTester().isa(isa()).dtype(dtype()); }
  DeconvTester D(const Descriptor& d) const { return DeconvTester(d).isa(isa()).dtype(dtype()); }
  // Routes that exist for f32 data only: the NCX in_kernel layout (f32 scatters) on AVX-512, and col (its
  // col2im sums in C++). Asked of 16-bit data they are refused as hints (ColumnGemm checks that).
  bool in_kernel_layout_exists() const { return isa() == Isa::avx512_core && dtype() == DType::f32; }
  static bool cpu_bf16_dot() {
    const Descriptor d = descriptor_from_json(R"({"src":[1,2,1],"weights":[2,16,1],"dtype":"bf16"})");
    return compile(d).name().find("_icp") != std::string::npos;
  }

  // The plan the library makes for this tester's problem (to check that a case reaches the route it is
  // meant to cover).
  static nlohmann::json plan_of(const DeconvTester& t) {
    return nlohmann::json::parse(compile(t.descriptor(), t.options()).plan_text());
  }
  // Compiling t must be refused with an error naming `word`; `what` is the case, for the failure message.
  static void expect_refused(const DeconvTester& t, const std::string& word, const std::string& what) {
    try {
      compile(t.descriptor(), t.options());
      ADD_FAILURE() << what << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
    }
  }
  NoDiskCache no_disk_cache_;
};

}  // namespace deconvjit::testing
