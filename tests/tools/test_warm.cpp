// `deconvjit warm` and `deconvjit cache`: ahead-of-time compilation into the disk cache by one process,
// loading by another, concurrent warmers, OpenVINO IR input, and the cache maintenance commands (ONNX input:
// test_warm_onnx.cpp).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <array>
#include <set>
#include <sstream>

#include "runtime/tolerance.hpp"
#include "support/cli_test.hpp"

namespace deconvjit::testing {
namespace {

namespace fs = std::filesystem;


const char* kSmallProblems[] = {
    R"({"name":"a","src":[1,5,6,7],"weights":[5,9,3,3],"strides":[2,2],"pads_begin":[1,1],"pads_end":[1,1]})",
    R"({"name":"b","src":[2,6,5,5,3],"weights":[3,3,3,16,3],"strides":[2,1,2],"data_format":"NXC","weights_format":"XIO"})",
    R"({"name":"c","src":[1,4,9],"weights":[2,2,3,4],"strides":[3]})",
};

using Result = CliResult;
const auto quote = shell_quote;

class Warm : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    cache_ = (dir_ / "cache").string();
  }


  std::string write_jsonl(const std::string& name, const std::vector<std::string>& lines) const {
    std::ofstream out(path(name));
    for (const std::string& l : lines) out << l << "\n";
    return path(name).string();
  }
  std::string small_suite() const {
    return write_jsonl("small.jsonl", {std::begin(kSmallProblems), std::end(kSmallProblems)});
  }
  std::string warm_args(const std::string& input) const { return "warm " + quote(input) + " --cache " + quote(cache_); }

  std::string cache_;
};

std::vector<float> run_kernel(const Kernel& k) {
  const verify::Operands ops = verify::random_operands(k.problem(), 3);
  std::vector<float> dst(static_cast<size_t>(k.problem().dst_elements()));
  k.execute(ops.src, ops.weights, dst);
  return dst;
}

TEST_F(Warm, OneProcessWarmsAnotherLoadsIdenticalKernels) {
  const Result r = run(warm_args(small_suite()));
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("3 kernels in " + cache_ + ": 3 compiled, 0 already cached, 0 failed"), std::string::npos)
      << r.out;
  struct stat st;
  ASSERT_EQ(::stat(cache_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);

  for (const char* json : kSmallProblems) {
    const Descriptor d = descriptor_from_json(json);
    Options o;
    o.use_cache = false;
    o.cache_dir = cache_;
    const Kernel loaded = compile(d, o);
    EXPECT_EQ(loaded.compile_ms(), 0.0) << d.name << " was compiled, not loaded";
    o.use_disk_cache = false;
    EXPECT_EQ(run_kernel(loaded), run_kernel(compile(d, o))) << d.name;
  }
  const Result again = run(warm_args(small_suite()));
  EXPECT_EQ(again.code, 0);
  EXPECT_NE(again.out.find("0 compiled, 3 already cached, 0 failed"), std::string::npos) << again.out;
}

TEST_F(Warm, ASecondCliProcessComputesTheSameBytesFromTheCache) {
  ASSERT_EQ(run(warm_args(small_suite())).code, 0);
  const Descriptor d = descriptor_from_json(kSmallProblems[0]);
  const Problem p = resolve(d);
  const verify::Operands ops = verify::random_operands(p, 11);
  std::ofstream(path("src.bin"), std::ios::binary)
      .write(reinterpret_cast<const char*>(ops.src.data()), static_cast<std::streamsize>(ops.src.size() * 4));
  std::ofstream(path("w.bin"), std::ios::binary)
      .write(reinterpret_cast<const char*>(ops.weights.data()), static_cast<std::streamsize>(ops.weights.size() * 4));
  const std::string files = " --src " + quote(path("src.bin").string()) + " --weights " + quote(path("w.bin").string());
  const std::string desc = quote(kSmallProblems[0]);
  ASSERT_EQ(run("run " + desc + files + " --dst " + quote(path("cached.bin").string()),
                "DECONVJIT_CACHE_DIR=" + quote(cache_)).code, 0);
  ASSERT_EQ(run("run " + desc + files + " --dst " + quote(path("jit.bin").string()), "DECONVJIT_CACHE_DIR=").code, 0);
  EXPECT_EQ(slurp(path("cached.bin")), slurp(path("jit.bin")));
  EXPECT_EQ(slurp(path("cached.bin")).size(), static_cast<size_t>(p.dst_elements()) * 4);
}

TEST_F(Warm, DryRunListsWithoutWriting) {
  const Result r = run(warm_args(small_suite()) + " --dry-run");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("compile  " + path("small.jsonl").string() + ":1 (a)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("dry run: 3 kernels in " + cache_ + ": 3 to compile, 0 already cached"), std::string::npos)
      << r.out;
  EXPECT_FALSE(fs::exists(cache_));
  ASSERT_EQ(run(warm_args(small_suite())).code, 0);
  const Result after = run(warm_args(small_suite()) + " --dry-run");
  EXPECT_NE(after.out.find("0 to compile, 3 already cached"), std::string::npos) << after.out;
}

TEST_F(Warm, FailuresAreListedWithReasonsAndExitOne) {
  const std::string in = write_jsonl("mixed.jsonl", {kSmallProblems[0], R"({"src":[1,5,6,7],"weights":[4,9,3,3]})",
                                                     "not json", kSmallProblems[0]});
  const Result r = run(warm_args(in));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("1 compiled, 0 already cached, 2 failed (1 duplicate descriptors skipped)"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("failed: " + in + ":2: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("failed: " + in + ":3: "), std::string::npos) << r.out;
}

// ONNX input, with or without ONNX support in the build, is tested in test_warm_onnx.cpp.
TEST_F(Warm, RejectsUnknownInputs) {
  std::ofstream(path("model.txt")) << "x";
  const Result txt = run(warm_args(path("model.txt").string()));
  EXPECT_EQ(txt.code, 2);
  EXPECT_NE(txt.err.find("unknown input type"), std::string::npos) << txt.err;
  EXPECT_EQ(run(warm_args(path("missing.jsonl").string())).code, 2);
}

TEST_F(Warm, ConcurrentWarmersOnOneDirectoryLeaveOnlyValidEntries) {
  const std::string suite = std::string(DECONVJIT_SOURCE_DIR) + "/tools/suites/realworld.jsonl";
  std::string script;
  for (int i = 0; i < 3; ++i)
    script += "(" + quote(DECONVJIT_CLI_PATH) + " " + warm_args(suite) + " --threads 2 >" +
              quote(path("out" + std::to_string(i)).string()) + " 2>&1; echo $? >" +
              quote(path("rc" + std::to_string(i)).string()) + ") & ";
  ASSERT_EQ(std::system(("sh -c " + quote(script + "wait")).c_str()), 0);
  for (int i = 0; i < 3; ++i) {
    const std::string n = std::to_string(i);
    EXPECT_EQ(slurp(path("rc" + n)), "0\n") << slurp(path("out" + n));
    EXPECT_NE(slurp(path("out" + n)).find(" 0 failed"), std::string::npos) << slurp(path("out" + n));
  }
  const Result v = run("cache verify --cache " + quote(cache_));
  EXPECT_EQ(v.code, 0) << v.out;
  const std::vector<DiskCacheEntry> entries = disk_cache_entries(cache_);
  size_t distinct = 0;
  {
    std::ifstream in(suite);
    std::set<std::string> seen;
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) distinct += seen.insert(canonical_json(descriptor_from_json(line))).second;
  }
  EXPECT_EQ(entries.size(), distinct);
  for (const DiskCacheEntry& e : entries) EXPECT_TRUE(e.valid) << e.path << ": " << e.error;
  for (const auto& f : fs::directory_iterator(cache_)) EXPECT_EQ(f.path().extension(), ".djk") << f.path();
}

TEST_F(Warm, CacheLsVerifyClear) {
  ASSERT_EQ(run(warm_args(small_suite()) + " --isa avx2").code, 0);
  const Result ls = run("cache ls --cache " + quote(cache_));
  EXPECT_EQ(ls.code, 0);
  EXPECT_NE(ls.out.find("3 entries"), std::string::npos) << ls.out;
  EXPECT_EQ(std::count(ls.out.begin(), ls.out.end(), '\n'), 4) << ls.out;
  EXPECT_NE(ls.out.find("  avx2  "), std::string::npos) << ls.out;
  EXPECT_NE(ls.out.find(R"("src":[1,5,6,7])"), std::string::npos) << ls.out;

  const std::string victim = disk_cache_entries(cache_).at(1).path;
  {
    std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);
    f.put('\x7f');
  }
  const Result v = run("cache verify --cache " + quote(cache_));
  EXPECT_EQ(v.code, 1);
  EXPECT_NE(v.out.find("bad   " + fs::path(victim).filename().string() + "  checksum"), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("3 entries: 2 valid, 1 would be rejected"), std::string::npos) << v.out;

  const Result c = run("cache clear --cache " + quote(cache_));
  EXPECT_EQ(c.code, 0);
  EXPECT_NE(c.out.find("removed 3 files"), std::string::npos) << c.out;
  EXPECT_NE(run("cache ls --cache " + quote(cache_)).out.find("0 entries"), std::string::npos);
  EXPECT_EQ(run("cache ls --cache ''").code, 0);  // '' means the default, the isolated test directory
}

// An OpenVINO IR with the seed document's three examples, a grouped layer, and their .bin.
std::string seed_ir() {
  auto port = [](int id, std::vector<int> dims) {
    std::string s = "<port id=\"" + std::to_string(id) + "\" precision=\"FP32\">";
    for (int d : dims) s += "<dim>" + std::to_string(d) + "</dim>";
    return s + "</port>";
  };
  auto param = [&](int id, const char* name, std::vector<int> dims) {
    return "<layer id=\"" + std::to_string(id) + "\" name=\"" + name + "\" type=\"Parameter\" version=\"opset1\">"
           "<output>" + port(0, dims) + "</output></layer>";
  };
  auto deconv = [&](int id, const char* name, const char* type, const char* data, std::vector<std::vector<int>> in,
                    std::vector<int> out) {
    std::string s = "<layer id=\"" + std::to_string(id) + "\" name=\"" + name + "\" type=\"" + type +
                    "\" version=\"opset1\"><data " + data + "/><input>";
    for (size_t i = 0; i < in.size(); ++i) s += port(static_cast<int>(i), in[i]);
    return s + "</input><output>" + port(static_cast<int>(in.size()), out) + "</output></layer>";
  };
  std::string x = "<?xml version=\"1.0\"?>\n<net name=\"seeds\" version=\"11\"><layers>";
  x += param(0, "x1", {1, 20, 224, 224}) + param(1, "w1", {20, 10, 3, 3});
  x += deconv(2, "example1", "ConvolutionBackpropData",
              R"(dilations="1,1" pads_begin="1,1" pads_end="1,1" strides="2,2" output_padding="0,0" auto_pad="explicit")",
              {{1, 20, 224, 224}, {20, 10, 3, 3}}, {1, 10, 447, 447});
  x += param(3, "x2", {1, 20, 2, 2});
  x += deconv(4, "example2", "ConvolutionBackpropData",
              R"(dilations="1,1" pads_begin="0,0" pads_end="0,0" strides="3,3" output_padding="2,2" auto_pad="explicit")",
              {{1, 20, 2, 2}, {20, 10, 3, 3}}, {1, 10, 8, 8});
  x += "<layer id=\"5\" name=\"out_shape\" type=\"Const\" version=\"opset1\">"
       "<data element_type=\"i64\" shape=\"2\" offset=\"8\" size=\"16\"/><output>" + port(0, {2}) + "</output></layer>";
  x += deconv(6, "example3", "ConvolutionBackpropData",
              R"(dilations="1,1" pads_begin="1,1" pads_end="1,1" strides="1,1" output_padding="0,0" auto_pad="valid")",
              {{1, 20, 224, 224}, {20, 10, 3, 3}, {2}}, {1, 10, 450, 450});
  x += param(7, "x4", {1, 8, 6, 6}) + param(8, "w4", {2, 4, 3, 3, 3});
  x += deconv(9, "grouped", "GroupConvolutionBackpropData", R"(strides="2,2" pads_begin="0,0" pads_end="0,0" dilations="1,1")",
              {{1, 8, 6, 6}, {2, 4, 3, 3, 3}}, {1, 6, 13, 13});
  x += "</layers><edges>";
  for (auto [from, to, port_no] : std::vector<std::array<int, 3>>{
           {0, 2, 0}, {1, 2, 1}, {3, 4, 0}, {1, 4, 1}, {0, 6, 0}, {1, 6, 1}, {5, 6, 2}, {7, 9, 0}, {8, 9, 1}})
    x += "<edge from-layer=\"" + std::to_string(from) + "\" from-port=\"0\" to-layer=\"" + std::to_string(to) +
         "\" to-port=\"" + std::to_string(port_no) + "\"/>";
  return x + "</edges></net>\n";
}

TEST_F(Warm, OpenVinoIrLayersBecomeKernels) {
  std::ofstream(path("seeds.xml")) << seed_ir();
  const int64_t bin[] = {-1, 450, 450};  // the constant starts at offset 8
  std::ofstream(path("seeds.bin"), std::ios::binary).write(reinterpret_cast<const char*>(bin), sizeof bin);

  const Result dry = run(warm_args(path("seeds.xml").string()) + " --dry-run");
  EXPECT_EQ(dry.code, 0) << dry.out << dry.err;
  for (const char* name : {"example1", "example2", "example3", "grouped"})
    EXPECT_NE(dry.out.find("seeds.xml:" + std::string(name)), std::string::npos) << dry.out;

  const Result r = run(warm_args(path("seeds.xml").string()));
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("4 compiled"), std::string::npos) << r.out;
  std::set<std::vector<int64_t>> dst;
  for (const DiskCacheEntry& e : disk_cache_entries(cache_)) {
    ASSERT_TRUE(e.valid) << e.error;
    dst.insert(resolve(descriptor_from_json(e.descriptor)).dst_shape);
  }
  const std::set<std::vector<int64_t>> want = {{1, 10, 447, 447}, {1, 10, 8, 8}, {1, 10, 450, 450}, {1, 6, 13, 13}};
  EXPECT_EQ(dst, want);
}

TEST_F(Warm, IrLayerWithComputedOutputShapeFailsWithAReason) {
  std::string ir = seed_ir();
  const std::string konst = "type=\"Const\"";
  ir.replace(ir.find(konst), konst.size(), "type=\"ShapeOf\"");
  std::ofstream(path("dyn.xml")) << ir;
  std::ofstream(path("dyn.bin")) << "";
  const Result r = run(warm_args(path("dyn.xml").string()));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("3 compiled, 0 already cached, 1 failed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("failed: " + path("dyn.xml").string() + ":example3: output_shape comes from layer "
                       "'out_shape' of type ShapeOf"), std::string::npos) << r.out;
}

// One ConvolutionBackpropData fed by a Parameter and a Const. Its element type is written as `precision` on
// every port (none when empty) and as `element_type` on the Parameter and the Const (none when empty).
std::string typed_ir(const std::string& precision, const std::string& element_type) {
  auto port = [&](int id, std::vector<int> dims) {
    std::string s = "<port id=\"" + std::to_string(id) + "\"" +
                    (precision.empty() ? "" : " precision=\"" + precision + "\"") + ">";
    for (int d : dims) s += "<dim>" + std::to_string(d) + "</dim>";
    return s + "</port>";
  };
  const std::string type = element_type.empty() ? "" : " element_type=\"" + element_type + "\"";
  return "<?xml version=\"1.0\"?>\n<net name=\"typed\" version=\"11\"><layers>"
         "<layer id=\"0\" name=\"x\" type=\"Parameter\" version=\"opset1\"><data shape=\"1,4,5,5\"" + type +
         "/><output>" + port(0, {1, 4, 5, 5}) + "</output></layer>"
         "<layer id=\"1\" name=\"w\" type=\"Const\" version=\"opset1\"><data shape=\"4,2,3,3\" offset=\"0\" "
         "size=\"144\"" + type + "/><output>" + port(0, {4, 2, 3, 3}) + "</output></layer>"
         "<layer id=\"2\" name=\"up\" type=\"ConvolutionBackpropData\" version=\"opset1\"><data strides=\"2,2\" "
         "pads_begin=\"0,0\" pads_end=\"0,0\" dilations=\"1,1\"/><input>" + port(0, {1, 4, 5, 5}) +
         port(1, {4, 2, 3, 3}) + "</input><output>" + port(2, {1, 2, 11, 11}) + "</output></layer></layers><edges>"
         "<edge from-layer=\"0\" from-port=\"0\" to-layer=\"2\" to-port=\"0\"/>"
         "<edge from-layer=\"1\" from-port=\"0\" to-layer=\"2\" to-port=\"1\"/></edges></net>\n";
}

// The element type reaches the descriptor from the ports' precision or, where the ports name none, from the
// layers feeding them; the dry run shows the canonical descriptor, so this holds before the kernels exist.
TEST_F(Warm, IrElementTypesBecomeTheDescriptorsDtype) {
  const struct {
    const char *precision, *element_type, *dtype;
  } cases[] = {{"BF16", "", "bf16"}, {"FP16", "f16", "f16"}, {"", "bf16", "bf16"}, {"", "f16", "f16"},
               {"", "", "f32"}, {"FP32", "f32", "f32"}};
  int n = 0;
  std::string not_compiled;
  for (const auto& c : cases) {
    const std::string xml = path("typed" + std::to_string(n++) + ".xml").string();
    SCOPED_TRACE(xml + ": precision '" + c.precision + "', element_type '" + c.element_type + "'");
    std::ofstream(xml) << typed_ir(c.precision, c.element_type);
    const Result dry = run(warm_args(xml) + " --dry-run");
    EXPECT_EQ(dry.code, 0) << dry.out << dry.err;
    EXPECT_NE(dry.out.find(std::string("\"dtype\":\"") + c.dtype + "\""), std::string::npos) << dry.out;

    const Result r = run(warm_args(xml));
    if (r.code == 1 && r.out.find("not supported") != std::string::npos) {
      not_compiled += std::string(" ") + c.dtype;  // the dtype was checked above; the entry waits for a kernel
      continue;
    }
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    bool found = false;
    for (const DiskCacheEntry& e : disk_cache_entries(cache_))
      found = found || (e.descriptor.find("\"dtype\":\"" + std::string(c.dtype) + "\"") != std::string::npos &&
                        e.descriptor.find("\"src\":[1,4,5,5]") != std::string::npos);
    EXPECT_TRUE(found) << "no cache entry with dtype " << c.dtype;
  }
  if (!not_compiled.empty()) GTEST_SKIP() << "warming skipped, no kernel yet for:" << not_compiled;
}

TEST_F(Warm, IrLayerOfAnotherElementTypeFailsNamingIt) {
  std::ofstream(path("int8.xml")) << typed_ir("", "i8");
  const Result r = run(warm_args(path("int8.xml").string()));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("failed: " + path("int8.xml").string() + ":up: element type i8 is not a floating-point "
                       "type this library knows (f32, f16, bf16)"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace deconvjit::testing
