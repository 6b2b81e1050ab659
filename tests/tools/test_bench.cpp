// `deconvjit peak` and `deconvjit bench` run as a user runs them. Only the --vs onednn test needs oneDNN (it
// skips, saying so, without it); every run asks for tiny timing budgets so the file stays within seconds.
#include "support/cli_test.hpp"
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <pugixml.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace deconvjit::testing {
namespace {

namespace fs = std::filesystem;

using Output = CliResult;
const auto quote = shell_quote;

const std::string kTiny =
    R"({"name":"tiny","src":[1,8,6,6],"weights":[8,4,3,3],"strides":[2,2],"pads_begin":[1,1],"pads_end":[1,1]})";
const std::string kTiny1d = R"({"name":"tiny1d","src":[2,4,9],"weights":[4,6,4],"strides":[2],"pads_begin":[1],"pads_end":[1]})";
const std::string kQuick = " --min-time 0.01";

class BenchCli : public CliTest {
 protected:

  std::string write_suite(const std::string& text) const {
    const fs::path p = dir_ / "suite.jsonl";
    std::ofstream(p) << text;
    return quote(p.string());
  }
};

void expect_row_fields(const nlohmann::json& row) {
  for (const char* key : {"name", "kernel", "isa", "layout", "compile_ms", "ours_ms", "gflops", "peak_pct",
                          "bound", "gbps", "bw_pct"}) {
    EXPECT_TRUE(row.contains(key)) << key << " missing in " << row;
  }
  EXPECT_GT(row.at("compile_ms").get<double>(), 0.0);
  EXPECT_GT(row.at("ours_ms").get<double>(), 0.0);
  EXPECT_GT(row.at("gflops").get<double>(), 0.0);
  EXPECT_GT(row.at("gbps").get<double>(), 0.0);
  EXPECT_FALSE(row.at("kernel").get<std::string>().empty());
}

TEST_F(BenchCli, PeakJsonHasPositiveNumbers) {
  const Output r = run("peak --json --min-time 0.02");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto lines = r.json_lines();
  ASSERT_EQ(lines.size(), 1u) << r.out;
  const auto& j = lines[0];
  EXPECT_GE(j.at("threads").get<int>(), 1);
  for (const char* key : {"ymm_fma_gflops_1t", "ymm_fma_gflops_nt", "triad_gbps_1t", "triad_gbps_nt"}) {
    EXPECT_GT(j.at(key).get<double>(), 0.0) << key;
  }
  if (j.at("avx512").get<bool>()) {
    EXPECT_GT(j.at("zmm_fma_gflops_1t").get<double>(), 0.0);
    EXPECT_GT(j.at("zmm_fma_gflops_nt").get<double>(), 0.0);
  }
}

TEST_F(BenchCli, PeakTablePrints) {
  const Output r = run("peak --min-time 0.01");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("GFLOP/s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("GB/s"), std::string::npos) << r.out;
}

TEST_F(BenchCli, JsonRowAndSummary) {
  const Output r = run("bench " + quote(kTiny) + " --json --threads 1" + kQuick);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto lines = r.json_lines();
  ASSERT_EQ(lines.size(), 2u) << r.out;
  expect_row_fields(lines[0]);
  EXPECT_EQ(lines[0].at("name"), "tiny");
  EXPECT_EQ(lines[0].at("layout"), "NCX");
  EXPECT_FALSE(lines[0].contains("verify"));
  const auto& s = lines[1];
  EXPECT_TRUE(s.at("summary").get<bool>());
  EXPECT_EQ(s.at("rows"), 1);
  EXPECT_EQ(s.at("threads"), 1);
  EXPECT_GT(s.at("peak_gflops").get<double>(), 0.0);
}

TEST_F(BenchCli, SuiteWithFilterAndLayout) {
  const std::string suite = write_suite("# a comment\n" + kTiny + "\n\n" + kTiny1d + "\n" +
                                        R"({"name":"skipped","src":[1,2,3,3],"weights":[2,2,2,2]})" + "\n");
  const Output r = run("bench --suite " + suite + " --filter '^tiny' --layout nxc --json" + kQuick);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto lines = r.json_lines();
  ASSERT_EQ(lines.size(), 3u) << r.out;
  EXPECT_EQ(lines[0].at("name"), "tiny");
  EXPECT_EQ(lines[1].at("name"), "tiny1d");
  for (int i = 0; i < 2; ++i) {
    expect_row_fields(lines[i]);
    EXPECT_EQ(lines[i].at("layout"), "NXC");
  }
  EXPECT_EQ(lines[2].at("rows"), 2);
}

TEST_F(BenchCli, VerifyReportsOkInJsonAndTable) {
  Output r = run("bench " + quote(kTiny) + " " + quote(kTiny1d) + " --verify --json" + kQuick);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto lines = r.json_lines();
  ASSERT_EQ(lines.size(), 3u) << r.out;
  EXPECT_EQ(lines[0].at("verify"), "ok");
  EXPECT_EQ(lines[1].at("verify"), "ok");
  EXPECT_EQ(lines[2].at("verify_failures"), 0);

  r = run("bench " + quote(kTiny) + " --verify" + kQuick);
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* text : {"name", "kernel", "compile_ms", "ours_ms", "GFLOP/s", "%peak", "verify", "tiny"}) {
    EXPECT_NE(r.out.find(text), std::string::npos) << text << " not in\n" << r.out;
  }
}

TEST_F(BenchCli, LayoutBothTimesBothKernels) {
  const Output r = run("bench " + quote(kTiny) + " --layout both --json --threads 1" + kQuick);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto lines = r.json_lines();
  ASSERT_EQ(lines.size(), 3u) << r.out;  // one row per layout, then the summary
  EXPECT_EQ(lines[0].at("layout"), "NCX");
  EXPECT_EQ(lines[1].at("layout"), "NXC");
  for (int i = 0; i < 2; ++i) {
    expect_row_fields(lines[i]);
    EXPECT_EQ(lines[i].at("name"), "tiny");
    EXPECT_FALSE(lines[i].contains("kernel_race")) << "no oneDNN asked for";
  }
  EXPECT_NE(lines[0].at("kernel"), lines[1].at("kernel"));  // the layout is part of the kernel's name
  EXPECT_EQ(lines[2].at("rows"), 1);
}

double ms_field(const nlohmann::json& j, const char* key) {
  EXPECT_TRUE(j.contains(key) && j.at(key).is_number()) << key << " in " << j;
  return j.value(key, 0.0);
}

// Both comparisons in every row, with ratios that follow from the times the row reports.
void expect_comparisons(const std::vector<nlohmann::json>& rows) {
  double ours_best = 1e300;
  for (const auto& row : rows) ours_best = std::min(ours_best, row.at("ours_ms").get<double>());
  for (const auto& row : rows) {
    const auto& user = row.at("user_layout");
    const double plain = ms_field(user, "onednn_plain_ms"), reordered = ms_field(user, "onednn_any_reordered_ms");
    EXPECT_GT(plain, 0.0);
    EXPECT_GT(reordered, 0.0);
    EXPECT_NEAR(ms_field(user, "ratio"), std::min(plain, reordered) / row.at("ours_ms").get<double>(), 1e-9);

    const auto& race = row.at("kernel_race");
    const double ncx = ms_field(race, "onednn_ncx_ms"), nxc = ms_field(race, "onednn_nxc_ms");
    const double any = ms_field(race, "onednn_any_ms");
    EXPECT_DOUBLE_EQ(ms_field(race, "ours_ms"), ours_best);
    EXPECT_NEAR(ms_field(race, "ratio"), std::min({ncx, nxc, any}) / ours_best, 1e-9);
    const std::string best = race.at("onednn_best");
    EXPECT_DOUBLE_EQ(best == "ncx" ? ncx : best == "nxc" ? nxc : any, std::min({ncx, nxc, any})) << best;
    // The user's layout is one of the race's: oneDNN's plain time appears among them.
    EXPECT_DOUBLE_EQ(plain, row.at("layout") == "NCX" ? ncx : nxc);
    EXPECT_TRUE(row.at("onednn").at("agrees").get<bool>()) << row;
    EXPECT_FALSE(row.at("onednn").at("any_src_format").get<std::string>().empty());
  }
}

TEST_F(BenchCli, VsOnednnReportsUserLayoutAndKernelRace) {
  const Output r = run("bench " + quote(kTiny) + " --vs onednn --layout both --json --threads 1" + kQuick);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto lines = r.json_lines();
  ASSERT_EQ(lines.size(), 3u) << r.out;
  const auto& summary = lines[2];
  if (summary.at("onednn").is_null()) {
    GTEST_SKIP() << "this deconvjit was built without oneDNN (libdnnl-dev): " << r.err;
  }
  expect_comparisons({lines[0], lines[1]});
  EXPECT_EQ(lines[0].at("kernel_race"), lines[1].at("kernel_race"));  // one race per problem
  EXPECT_EQ(summary.at("kernel_race").at("problems"), 1);
  EXPECT_GT(summary.at("kernel_race").at("geomean").get<double>(), 0.0);
  for (const char* layout : {"NCX", "NXC"}) {
    EXPECT_EQ(summary.at("user_layout").at(layout).at("problems"), 1) << layout;
  }

  const Output table = run("bench " + quote(kTiny1d) + " --vs onednn --layout nxc --threads 1" + kQuick);
  ASSERT_EQ(table.code, 0) << table.err;
  for (const char* text : {"user_ratio", "race_ratio", "dnnl_any_ms", "user layout NXC", "kernel race"}) {
    EXPECT_NE(table.out.find(text), std::string::npos) << text << " not in\n" << table.out;
  }
}

// Exit 2 with one "error:" line, and nothing timed.
void expect_usage_error(const Output& r) {
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_EQ(r.err.rfind("error:", 0), 0u) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

// Elements whose class attribute lists `cls` among its words.
size_t count_class(const pugi::xml_node& root, const std::string& cls) {
  size_t n = 0;
  for (const pugi::xpath_node& x : root.select_nodes(".//*[@class]")) {
    std::istringstream words(x.node().attribute("class").value());
    for (std::string w; words >> w;) n += w == cls;
  }
  return n;
}

std::string all_text(const pugi::xml_node& root) {
  std::string text;
  for (const pugi::xpath_node& x : root.select_nodes(".//text()")) text += std::string(x.node().value()) + "\n";
  return text;
}

const std::string kOdd = R"({"name":"odd <&> \"name\"","src":[1,3,5],"weights":[3,2,4],"strides":[3]})";

TEST_F(BenchCli, SvgReportIsWellFormedWithOneBarPerProblem) {
  const std::string suite = write_suite(kTiny + "\n" + kTiny1d + "\n" + kOdd + "\n");
  const std::string svg = path("report.svg").string();
  const Output r = run("bench --suite " + suite + " --threads 1 --report " + quote(svg) + kQuick);
  ASSERT_EQ(r.code, 0) << r.err;
  pugi::xml_document doc;
  const pugi::xml_parse_result parsed = doc.load_file(svg.c_str());
  ASSERT_TRUE(parsed) << parsed.description() << " at offset " << parsed.offset;
  const pugi::xml_node root = doc.document_element();
  EXPECT_STREQ(root.name(), "svg");
  EXPECT_STREQ(root.attribute("xmlns").value(), "http://www.w3.org/2000/svg");
  EXPECT_EQ(count_class(root, "problem"), 3u);
  EXPECT_EQ(count_class(root, "bar"), 3u);  // without oneDNN: our % of peak, one layout, one bar each
  EXPECT_EQ(count_class(root, "point"), 3u);  // one kernel each on the roofline
  const std::string text = all_text(root);
  for (const char* want : {"tiny", "tiny1d", "odd <&> \"name\"", "GFLOP/s", "arithmetic intensity", "peak",
                           "bandwidth"}) {
    EXPECT_NE(text.find(want), std::string::npos) << want << " not in the SVG's text";
  }
}

TEST_F(BenchCli, HtmlReportWrapsSvgAndTable) {
  const std::string html = path("report.html").string();
  const Output r = run("bench " + quote(kTiny) + " " + quote(kTiny1d) + " --vs onednn --layout both --threads 1 "
                       "--report " + quote(html) + kQuick);
  ASSERT_EQ(r.code, 0) << r.err;
  pugi::xml_document doc;
  const pugi::xml_parse_result parsed = doc.load_file(html.c_str());
  ASSERT_TRUE(parsed) << parsed.description() << " at offset " << parsed.offset;
  ASSERT_TRUE(doc.select_node("/html/body/svg")) << "no SVG in the page's body";
  EXPECT_EQ(doc.select_nodes("/html/body/table/tbody/tr").size(), 4u);  // 2 problems x 2 layouts
  const pugi::xml_node svg = doc.select_node("/html/body/svg").node();
  EXPECT_EQ(count_class(svg, "problem"), 2u);
  if (r.out.find("oneDNN") == std::string::npos) {
    GTEST_SKIP() << "this deconvjit was built without oneDNN (libdnnl-dev): " << r.err;
  }
  EXPECT_EQ(count_class(svg, "race"), 2u);  // one kernel-race bar per problem
  EXPECT_EQ(count_class(svg, "user"), 4u);  // a user-layout bar per problem and layout
  EXPECT_EQ(count_class(svg, "onednn"), 2u);  // oneDNN's fastest kernel on the roofline
}

TEST_F(BenchCli, ReportPathIsCheckedBeforeTiming) {
  expect_usage_error(run("bench " + quote(kTiny) + " --report " + quote(path("r.png").string()) + kQuick));
  expect_usage_error(run("bench " + quote(kTiny) + " --report " + quote(path("absent/r.svg").string()) + kQuick));
  EXPECT_FALSE(fs::exists(path("r.png")));
}

TEST_F(BenchCli, InvalidInputExitsTwo) {
  const std::string bad_channels =
      R"({"src":[1,8,6,6],"weights":[7,4,3,3]})";  // C_IN disagrees with the weights
  expect_usage_error(run("bench " + quote(bad_channels) + kQuick));
  expect_usage_error(run("bench " + quote("{\"src\": [1,") + kQuick));
  expect_usage_error(run("bench " + quote(kTiny) + " --layout bogus" + kQuick));
  expect_usage_error(run("bench " + quote(kTiny) + " --layout both --filter nomatch" + kQuick));
  expect_usage_error(run("bench " + quote(kTiny) + " --vs nothing" + kQuick));
  expect_usage_error(run("bench " + quote(kTiny) + " --filter '(' " + kQuick));
  expect_usage_error(run("bench " + quote(kTiny) + " --filter nomatch" + kQuick));
  expect_usage_error(run("bench" + kQuick));  // neither DESC nor --suite
  expect_usage_error(run("bench --suite " + quote((dir_ / "absent.jsonl").string()) + kQuick));

  const Output r = run("bench --suite " + write_suite(kTiny + "\n" + bad_channels + "\n") + kQuick);
  expect_usage_error(r);
  EXPECT_NE(r.err.find("suite.jsonl:2"), std::string::npos) << r.err;  // names the line
}

}  // namespace
}  // namespace deconvjit::testing
