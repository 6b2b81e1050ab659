// Runs the built `deconvjit` binary as a user would: through the shell, with files in a temporary folder.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "runtime/tolerance.hpp"
#include "support/cli_test.hpp"
#include "support/deconv_tester.hpp"
#include "support/seed_examples.hpp"

namespace deconvjit::testing {
namespace {

namespace fs = std::filesystem;


using Result = CliResult;
const auto quote = shell_quote;

class Cli : public CliTest {
 protected:



  void write_floats(const std::string& name, const std::vector<float>& v) const {
    std::ofstream(path(name), std::ios::binary)
        .write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
  }

  std::vector<float> read_floats(const std::string& name) const {
    const std::string bytes = slurp(path(name));
    std::vector<float> v(bytes.size() / sizeof(float));
    std::copy(bytes.begin(), bytes.end(), reinterpret_cast<char*>(v.data()));
    return v;
  }

};

// Exactly one line, and it starts with "error:".
void expect_error_line(const Result& r) {
  EXPECT_EQ(r.err.rfind("error:", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

Descriptor small_problem(DataFormat f = DataFormat::NCX, WeightsFormat w = WeightsFormat::OIX) {
  return DeconvTester().rank(2).batch(2).channels(3, 5).input({4, 5}).kernel({3, 2}).stride({2, 2})
      .pads({1, 0}, {0, 1}).layout(f).weights_format(w).descriptor();
}

TEST_F(Cli, ShapeOfTheSeedExamples) {
  for (const SeedExample& e : seed_examples()) {
    const Result r = run("shape " + quote(to_json(e.desc)));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j.at("dst").get<std::vector<int64_t>>(), e.dst);
    EXPECT_EQ(j.at("pads_begin").get<std::vector<int64_t>>(), e.pads_begin);
    EXPECT_EQ(j.at("pads_end").get<std::vector<int64_t>>(), e.pads_end);
  }
}

TEST_F(Cli, ShapeIsInDataFormatOrderAndReadsFiles) {
  Descriptor d = seed_examples()[0].desc;
  d.data_format = DataFormat::NXC;
  d.src = {1, 224, 224, 20};
  std::ofstream(path("d.json")) << to_json(d);
  const Result r = run("shape @" + quote(path("d.json").string()));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).at("dst").get<std::vector<int64_t>>(),
            (std::vector<int64_t>{1, 447, 447, 10}));
}

TEST_F(Cli, InvalidDescriptorsExitTwoWithOneErrorLine) {
  Descriptor d = seed_examples()[0].desc;
  d.weights = {21, 10, 3, 3};  // C_IN disagrees with the data
  const std::string malformed = "{\"src\": [1,", missing_file = "@/nonexistent/d.json";
  for (const std::string& desc : {to_json(d), malformed, missing_file}) {
    const Result r = run("shape " + quote(desc));
    EXPECT_EQ(r.code, 2) << desc;
    EXPECT_TRUE(r.out.empty()) << r.out;
    expect_error_line(r);
  }
}

TEST_F(Cli, HelpEverywhereAndUnknownOptionsRejected) {
  for (std::string sub : {"", "shape", "run", "check", "dump"}) {
    const Result r = run(sub + " --help");
    EXPECT_EQ(r.code, 0) << sub;
    EXPECT_NE(r.out.find("Usage"), std::string::npos) << sub << ": " << r.out;
  }
  const Result r = run("shape " + quote(to_json(small_problem())) + " --no-such-option");
  EXPECT_NE(r.code, 0);
  expect_error_line(r);
  EXPECT_NE(run("").code, 0);  // a subcommand is required
}

TEST_F(Cli, RunWithAWrongSizeWritesNothing) {
  const Problem p = resolve(small_problem());
  write_floats("src.bin", std::vector<float>(p.src_elements(), 1.0f));
  write_floats("short.bin", std::vector<float>(p.weights_elements() - 1, 1.0f));
  const std::string desc = quote(to_json(small_problem()));
  const std::string args = "run " + desc + " --src " + quote(path("src.bin").string()) + " --weights " +
                           quote(path("short.bin").string()) + " --dst ";

  Result r = run(args + quote(path("absent.bin").string()));
  EXPECT_EQ(r.code, 2);
  expect_error_line(r);
  EXPECT_NE(r.err.find("short.bin"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(std::to_string(p.weights_elements() * 4)), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(std::to_string((p.weights_elements() - 1) * 4)), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(path("absent.bin")));

  std::ofstream(path("kept.bin")) << "previous contents";
  r = run(args + quote(path("kept.bin").string()));
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(slurp(path("kept.bin")), "previous contents");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 4) << "stray temp file";
}

TEST_F(Cli, RunJitAndReferenceAgreeWithinTolerance) {
  for (DataFormat f : {DataFormat::NCX, DataFormat::NXC}) {
    const Descriptor d = small_problem(f, WeightsFormat::XIO);
    const Problem p = resolve(d);
    const verify::Operands ops = verify::random_operands(p, 42);
    write_floats("src.bin", ops.src);
    write_floats("w.bin", ops.weights);
    const std::string args = "run " + quote(to_json(d)) + " --src " + quote(path("src.bin").string()) +
                             " --weights " + quote(path("w.bin").string()) + " --dst ";
    Result r = run(args + quote(path("ref.bin").string()) + " --reference");
    ASSERT_EQ(r.code, 0) << r.err;
    r = run(args + quote(path("jit.bin").string()));
    ASSERT_EQ(r.code, 0) << r.err;

    std::vector<double> want(p.dst_elements()), mag(want.size());
    reference_with_bound(p, ops.src, ops.weights, want.data(), mag.data());
    const auto ref = read_floats("ref.bin"), jit = read_floats("jit.bin");
    ASSERT_EQ(static_cast<int64_t>(ref.size()), p.dst_elements());
    ASSERT_EQ(static_cast<int64_t>(jit.size()), p.dst_elements());
    EXPECT_TRUE(verify::compare(p, ref, want.data(), mag.data(), p.dst_elements()).ok);
    EXPECT_TRUE(verify::compare(p, jit, want.data(), mag.data(), p.dst_elements()).ok);
    for (int64_t e = 0; e < p.dst_elements(); ++e) {  // the file path loses nothing
      ASSERT_EQ(ref[e], static_cast<float>(want[e])) << e;
    }
  }
}

TEST_F(Cli, CheckPassesAndReportsKernel) {
  const Result r = run("check " + quote(to_json(small_problem())) + " --seed 3 --threads 1");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j.at("ok").get<bool>());
  EXPECT_GE(j.at("tolerance").get<double>(), 0.0);
  EXPECT_GE(j.at("max_abs_err").get<double>(), 0.0);
  EXPECT_FALSE(j.at("kernel").get<std::string>().empty());
  const std::string isa = j.at("isa").get<std::string>();
  EXPECT_TRUE(isa == "avx2" || isa == "avx512_core") << isa;
}

TEST_F(Cli, CheckWithAnInvalidDescriptorOrIsaNameExitsTwo) {
  Descriptor bad = small_problem();
  bad.strides = {0, 1};
  Result r = run("check " + quote(to_json(bad)));
  EXPECT_EQ(r.code, 2);
  expect_error_line(r);
  r = run("check " + quote(to_json(small_problem())) + " --isa bogus");
  EXPECT_EQ(r.code, 2);
  expect_error_line(r);
}

TEST_F(Cli, CheckWithAMissingIsaExitsThree) {
  if (isa_available(Isa::avx512_core)) GTEST_SKIP() << "this CPU has every ISA deconvjit knows";
  const Result r = run("check " + quote(to_json(small_problem())) + " --isa avx512_core");
  EXPECT_EQ(r.code, 3);
  expect_error_line(r);
}

TEST_F(Cli, DumpWritesTheCode) {
  const Result r = run("dump " + quote(to_json(small_problem())) + " -o " + quote(path("k.bin").string()));
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_GT(j.at("bytes").get<size_t>(), 0u);
  EXPECT_EQ(fs::file_size(path("k.bin")), j.at("bytes").get<size_t>());
}

}  // namespace
}  // namespace deconvjit::testing
