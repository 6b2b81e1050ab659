// The tuning workflow from the command line: --hints, `plans`, `tune` and `tuning`, and a record that
// another process's compile() picks up without timing anything.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "deconvjit/deconvjit.hpp"
#include "support/cli_test.hpp"
#include "support/deconv_tester.hpp"

namespace deconvjit::testing {
namespace {

const auto quote = shell_quote;

class Tune : public CliTest {
 protected:
  std::string desc() const {
    return quote(to_json(DeconvTester().batch(2).channels(16, 24).input({6, 7}).kernel({3, 3}).stride({2, 2})
                             .pads({1, 1}, {0, 0}).descriptor()));
  }
};

void expect_error_naming(const CliResult& r, const std::string& needle) {
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(r.err.rfind("error:", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
}

TEST_F(Tune, HintsTheProblemCannotHonourExitTwoNamingTheHint) {
  expect_error_naming(run("check " + desc() + " --hints '{\"ur_x\": 1}'"), "ur_x");
  expect_error_naming(run("check " + desc() + " --hints '{\"oc_vectors\": 40}'"), "oc_vectors");
  expect_error_naming(run("dump " + desc() + " -o " + quote(path("k.bin").string()) + " --hints '{\"algorithm\": \"gemm_x\", \"layout\": \"scratch\"}'"), "gemm_x");
  expect_error_naming(run("bench " + desc() + " --hints '{\"x_split\": \"2\"}'"), "x_split");
  std::ofstream(path("h.json")) << "{\"ic_block\": 5}";
  expect_error_naming(run("run " + desc() + " --src a --weights b --dst c --hints @" + quote(path("h.json").string())), "ic_block");
}

TEST_F(Tune, ExplainSaysWhichChoicesWereGivenAndWhichRuleDecidedTheRest) {
  const CliResult r = run("explain " + desc() + " --hints '{\"ur_w\": 3}'");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("source"), "hints given");
  for (const auto& [field, c] : j.at("choices").items()) {
    const std::string by = c.at("by");
    if (field == "ur_w") {
      EXPECT_EQ(by, "hint");
      EXPECT_EQ(c.at("value"), 3);
    } else {
      EXPECT_EQ(by.rfind("heuristic: ", 0), 0u) << field << ": " << by;
      EXPECT_GT(by.size(), std::string("heuristic: ").size() + 10) << field << " has no rule";
    }
  }
  EXPECT_GE(j.at("model").at("rank").get<int>(), 1);
  EXPECT_EQ(j.at("plan").at("name"), j.at("kernel"));
}

// The tuner in a 16-bit type: operands, oracle and result in bf16, and ic_pairs among its choices.
TEST_F(Tune, TunesABf16Problem) {
  const std::string d = "'{\"name\":\"b\",\"src\":[1,6,5,24],\"weights\":[24,20,3,3],\"strides\":[2,2],"
                        "\"data_format\":\"NXC\",\"dtype\":\"bf16\"}'";
  const CliResult r = run("tune " + d + " --budget 2 --no-store --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out.substr(0, r.out.find('\n')));
  EXPECT_NE(j.at("kernel").get<std::string>().find("_bf16_"), std::string::npos) << j;
  EXPECT_EQ(j.at("rejected"), 0) << j;
  EXPECT_GT(j.at("candidates").get<int>(), 1) << j;
  const CliResult e = run("explain " + d);
  ASSERT_EQ(e.code, 0) << e.err;
  EXPECT_TRUE(nlohmann::json::parse(e.out).at("choices").contains("ic_pairs")) << e.out;
}

TEST_F(Tune, PlansPrintHintsThatBuildTheirKernel) {
  const CliResult r = run("plans " + desc() + " --limit 4");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto lines = r.json_lines();
  ASSERT_EQ(lines.size(), 4u);
  for (const auto& l : lines) {
    const CliResult c = run("check " + desc() + " --hints " + quote(l.at("hints").dump()));
    ASSERT_EQ(c.code, 0) << c.err;
    EXPECT_EQ(c.json_lines().at(0).at("kernel"), l.at("kernel"));
  }
  EXPECT_LE(lines[0].at("model_ms").get<double>(), lines[3].at("model_ms").get<double>());
}

TEST_F(Tune, ATunedRecordIsReusedByAnotherProcess) {
  const std::string db = quote(path("tuning.jsonl").string());
  const CliResult t = run("tune " + desc() + " --budget 1 --threads 2 --json --db " + db);
  ASSERT_EQ(t.code, 0) << t.err;
  const auto rows = t.json_lines();
  ASSERT_EQ(rows.size(), 1u);
  for (const char* field : {"name", "kernel", "hints", "default_kernel", "default_ms", "tuned_ms", "speedup", "candidates"})
    EXPECT_TRUE(rows[0].contains(field)) << field;
  EXPECT_GT(rows[0].at("candidates").get<int>(), 1);
  EXPECT_GT(rows[0].at("tuned_ms").get<double>(), 0);
  EXPECT_LE(rows[0].at("tuned_ms").get<double>(), rows[0].at("default_ms").get<double>());

  // Another process with the database set compiles the tuned plan and says why.
  const CliResult c = run("check " + desc() + " --threads 2", "DECONVJIT_TUNING_DB=" + db + " DECONVJIT_VERBOSE=1");
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_EQ(c.json_lines().at(0).at("kernel"), rows[0].at("kernel"));
  EXPECT_NE(c.err.find("plan=tuned record"), std::string::npos) << c.err;
  // On another thread count the record is not this problem's: the heuristic plans.
  const CliResult one = run("check " + desc() + " --threads 1", "DECONVJIT_TUNING_DB=" + db + " DECONVJIT_VERBOSE=1");
  EXPECT_NE(one.err.find("plan=heuristic"), std::string::npos) << one.err;

  const CliResult ex = run("explain " + desc() + " --threads 2", "DECONVJIT_TUNING_DB=" + db);
  ASSERT_EQ(ex.code, 0) << ex.err;
  const nlohmann::json why = nlohmann::json::parse(ex.out);
  EXPECT_EQ(why.at("kernel"), rows[0].at("kernel"));
  EXPECT_EQ(why.at("choices").at("ur_w").at("by"), "tuning record");

  const CliResult ls = run("tuning ls --db " + db);
  ASSERT_EQ(ls.code, 0) << ls.err;
  ASSERT_EQ(ls.json_lines().size(), 1u);
  EXPECT_EQ(ls.json_lines()[0].at("kernel"), rows[0].at("kernel"));
  const CliResult v = run("tuning verify --db " + db);
  EXPECT_EQ(v.code, 0) << v.err;
  EXPECT_TRUE(v.json_lines().at(0).at("usable").get<bool>());
  EXPECT_EQ(run("tuning clear --db " + db).code, 0);
  EXPECT_TRUE(run("tuning ls --db " + db).out.empty());
}

}  // namespace
}  // namespace deconvjit::testing
