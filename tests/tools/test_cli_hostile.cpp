// The CLI under hostile input: every case ends in exactly one short `error:` line and exit 2, never in a
// crash, a hang, an internal error or megabytes of message.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "support/cli_test.hpp"

namespace deconvjit::testing {
namespace {

class CliHostile : public CliTest {
 protected:
  void write(const std::string& name, const std::string& bytes) const {
    std::ofstream(path(name), std::ios::binary) << bytes;
  }
  // Exit 2, nothing on stdout, one short `error:` line containing `fragment`.
  void expect_invalid(const CliResult& r, const std::string& fragment, const std::string& what) const {
    EXPECT_EQ(r.code, 2) << what << ": " << r.err.substr(0, 300);
    EXPECT_TRUE(r.out.empty()) << what;
    EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << what << ": " << r.err.substr(0, 300);
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << what;
    EXPECT_LT(r.err.size(), 600u) << what << ": " << r.err.substr(0, 300);
    EXPECT_NE(r.err.find(fragment), std::string::npos) << what << ": " << r.err.substr(0, 300);
  }
  std::string at(const std::string& name) const { return shell_quote("@" + path(name).string()); }
};

TEST_F(CliHostile, DeeplyNestedDescriptorFile) {
  write("deep.json", std::string(100000, '['));
  for (const char* sub : {"shape", "check", "dump -o /dev/null"})
    expect_invalid(run(std::string(sub) + " " + at("deep.json")), "nesting deeper than 64", sub);
}

TEST_F(CliHostile, OneDeepLineInWarmFailsOnlyThatLine) {
  write("suite.jsonl", std::string(100000, '[') + "\n" +
                           R"({"src":[1,8,5,5],"weights":[8,8,3,3],"strides":[2,2]})" + "\n");
  const CliResult r = run("warm " + shell_quote(path("suite.jsonl").string()) + " --cache " +
                          shell_quote(path("cache").string()));
  EXPECT_EQ(r.code, 1) << "warm exits 1 when some layers failed: " << r.err;
  EXPECT_NE(r.out.find("suite.jsonl:1: malformed JSON: nesting deeper than 64"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 compiled"), std::string::npos) << r.out;  // the good line was still compiled
}

TEST_F(CliHostile, NumbersBeyondDouble) {
  expect_invalid(run("shape '{\"src\":[1e999999],\"weights\":[1,1,1]}'"), "number out of range", "1e999999");
  write("digits.json", "{\"src\":[" + std::string(100000, '7') + "],\"weights\":[1,1,1]}");
  expect_invalid(run("shape " + at("digits.json")), "number out of range", "100,000 digits");
}

TEST_F(CliHostile, NulByteInAFile) {
  write("nul.json", std::string(R"({"src":[1,4,5,5],"weights":[4,3,3,3]})") + '\0' + "trailing");
  expect_invalid(run("shape " + at("nul.json")), "NUL byte", "NUL");
}

TEST_F(CliHostile, HugeValuesAreQuotedShortly) {
  std::string src = "{\"src\":[";
  for (int i = 0; i < 1000000; ++i) src += i ? ",1" : "1";
  write("wide.json", src + "],\"weights\":[1,1,1]}");
  expect_invalid(run("shape " + at("wide.json")), "1000000 entries", "1M-entry src");
}

TEST_F(CliHostile, DirectoriesGivenAsFiles) {
  const std::string desc = shell_quote(R"({"src":[1,4,5,5],"weights":[4,3,3,3]})");
  expect_invalid(run("shape " + shell_quote("@" + dir_.string())), "is a directory", "shape @DIR");
  expect_invalid(run("run " + desc + " --src " + shell_quote(dir_.string()) + " --weights " +
                     shell_quote(dir_.string()) + " --dst " + shell_quote(path("dst.bin").string())),
                 "is a directory", "run --src DIR");
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  expect_invalid(run("run " + desc + " --src " + shell_quote(path("fifo").string()) + " --weights " +
                     shell_quote(path("fifo").string()) + " --dst " + shell_quote(path("dst.bin").string())),
                 "not a regular file", "run --src FIFO");
  expect_invalid(run("warm " + shell_quote(dir_.string()) + " --cache " + shell_quote(path("c").string())),
                 "is a directory", "warm DIR");
}

// 1024 x 1024 channels on 65536^2 pixels: valid, but its tensors need about 68 TB.
TEST_F(CliHostile, TensorsTooLargeForMemorySayHowManyBytes) {
  const std::string desc =
      shell_quote(R"({"src":[1,1024,65536,65536],"weights":[1024,1024,3,3],"strides":[2,2]})");
  for (const char* sub : {"check", "bench"}) {
    const CliResult r = run(std::string(sub) + " " + desc);
    expect_invalid(r, "bytes", sub);
    EXPECT_NE(r.err.find("more than this machine's memory"), std::string::npos) << r.err;
  }
  expect_invalid(run("run " + desc + " --src a --weights b --dst c"), "more than this machine's memory", "run");
  EXPECT_FALSE(std::filesystem::exists(path("c")));
}

// An IR output_shape constant of type u64 holding 2^64-1 is that number, not -1.
TEST_F(CliHostile, IrU64OutputShapeOutOfRange) {
  auto port = [](int id, const std::string& dims) {
    return "<port id=\"" + std::to_string(id) + "\" precision=\"FP32\">" + dims + "</port>";
  };
  const std::string x4 = "<dim>1</dim><dim>4</dim><dim>5</dim><dim>5</dim>";
  const std::string w4 = "<dim>4</dim><dim>3</dim><dim>3</dim><dim>3</dim>";
  std::string xml = "<?xml version=\"1.0\"?><net name=\"n\" version=\"11\"><layers>";
  xml += "<layer id=\"0\" name=\"x\" type=\"Parameter\"><output>" + port(0, x4) + "</output></layer>";
  xml += "<layer id=\"1\" name=\"w\" type=\"Parameter\"><output>" + port(0, w4) + "</output></layer>";
  xml += "<layer id=\"2\" name=\"s\" type=\"Const\"><data element_type=\"u64\" shape=\"2\" offset=\"0\" "
         "size=\"16\"/><output>" + port(0, "<dim>2</dim>") + "</output></layer>";
  xml += "<layer id=\"3\" name=\"up\" type=\"ConvolutionBackpropData\"><data strides=\"2,2\"/><input>" +
         port(0, x4) + port(1, w4) + port(2, "<dim>2</dim>") + "</input><output>" + port(3, x4) +
         "</output></layer></layers><edges>";
  for (int from : {0, 1, 2})
    xml += "<edge from-layer=\"" + std::to_string(from) + "\" from-port=\"0\" to-layer=\"3\" to-port=\"" +
           std::to_string(from) + "\"/>";
  write("m.xml", xml + "</edges></net>");
  write("m.bin", std::string(8, '\xff') + std::string("\x05\0\0\0\0\0\0\0", 8));
  const CliResult r = run("warm " + shell_quote(path("m.xml").string()) + " --dry-run --cache " +
                          shell_quote(path("c").string()));
  EXPECT_NE(r.out.find("18446744073709551615 (u64) is out of the 64-bit signed range"), std::string::npos)
      << r.out << r.err;
}

// fuzz/fuzz_onnx found this: a ConvTranspose whose W has more spatial dimensions than X made libonnx's
// shape inference read through a null pointer and kill `warm`.
TEST_F(CliHostile, OnnxShapeInferenceCrashIsAvoided) {
#if DECONVJIT_HAVE_ONNX
  const std::filesystem::path model = path("model.onnx");
  std::filesystem::copy_file(
      std::filesystem::path(DECONVJIT_SOURCE_DIR) / "fuzz/corpus/fuzz_onnx/regression-convtranspose-w-rank.onnx", model);
  const CliResult r = run("warm " + shell_quote(model.string()) + " --dry-run --cache " + shell_quote(path("c").string()));
  EXPECT_EQ(r.code, 1) << r.out << r.err;  // the layer fails, the run does not crash
  EXPECT_NE(r.out.find("failed: "), std::string::npos) << r.out;
#else
  GTEST_SKIP() << "built without ONNX support";
#endif
}

}  // namespace
}  // namespace deconvjit::testing
