// The CLI on bf16 and f16 problems: `run`'s 2-byte files, `check`, `bench`, `dump` and `peak`'s f16 and bf16
// rows. Until the kernels (and the reference) handle a type, the commands that need them exit 4 and the
// tests that need a result skip, saying so; the file handling around them is tested either way.
#include <gtest/gtest.h>
#include <xbyak/xbyak_util.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "runtime/half.hpp"
#include "runtime/tolerance.hpp"
#include "support/cli_test.hpp"
#include "support/deconv_tester.hpp"

namespace deconvjit::testing {
namespace {

namespace fs = std::filesystem;
using Result = CliResult;
const auto quote = shell_quote;

constexpr DType kHalfTypes[] = {DType::bf16, DType::f16};

Descriptor half_problem(DType t, DataFormat f = DataFormat::NCX) {
  Descriptor d = DeconvTester().rank(2).batch(2).channels(3, 5).input({4, 5}).kernel({3, 2}).stride({2, 2})
                     .pads({1, 0}, {0, 1}).layout(f).weights_format(WeightsFormat::XIO).descriptor();
  d.dtype = d.weights_dtype = t;
  return d;
}

// Seeded values in [-1, 1], rounded into `t`: the 16-bit patterns a file of that type holds.
std::vector<uint16_t> half_values(int64_t n, DType t, uint64_t seed) {
  std::vector<uint16_t> v;
  for (float x : verify::uniform_data(n, seed)) v.push_back(t == DType::bf16 ? detail::double_to_bf16(x) : detail::double_to_f16(x));
  return v;
}

// One unit in the last place of type `t` at `x` (the spacing of its binade; subnormals: the smallest).
double ulp(DType t, double x) {
  const int digits = t == DType::bf16 ? 8 : 11, emin = t == DType::bf16 ? -126 : -14;
  int e = 0;
  std::frexp(x, &e);
  return std::ldexp(1.0, std::max(e - 1, emin) - (digits - 1));
}

class CliHalf : public CliTest {
 protected:
  void write_halves(const std::string& name, const std::vector<uint16_t>& v) const {
    std::ofstream(path(name), std::ios::binary)
        .write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * 2));
  }
  std::vector<uint16_t> read_halves(const std::string& name) const {
    const std::string bytes = slurp(path(name));
    std::vector<uint16_t> v(bytes.size() / 2);
    std::copy(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(v.size() * 2), reinterpret_cast<char*>(v.data()));
    return v;
  }
  std::string run_args(const Descriptor& d, const std::string& src, const std::string& w) const {
    return "run " + quote(to_json(d)) + " --src " + quote(path(src).string()) + " --weights " +
           quote(path(w).string()) + " --dst ";
  }
};

// Wrong sizes are judged before anything is computed, so this holds whatever the kernels support.
TEST_F(CliHalf, RunExpectsTwoBytesPerValueAndNamesTheFile) {
  for (DType t : kHalfTypes) {
    SCOPED_TRACE(to_string(t));
    const Descriptor d = half_problem(t);
    const Problem p = resolve(d);
    write_halves("src.bin", half_values(p.src_elements(), t, 1));
    // Weights written as f32 would be: twice the bytes the type needs.
    std::ofstream(path("w32.bin"), std::ios::binary) << std::string(static_cast<size_t>(p.weights_elements()) * 4, '\0');
    const Result r = run(run_args(d, "src.bin", "w32.bin") + quote(path("dst.bin").string()) + " --reference");
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_EQ(r.err.rfind("error: weights file '" + path("w32.bin").string() + "' has " +
                              std::to_string(p.weights_elements() * 4) + " bytes, expected " +
                              std::to_string(p.weights_elements() * 2) + " (" + std::to_string(p.weights_elements()) +
                              " " + to_string(t) + " values)", 0), 0u) << r.err;
    EXPECT_FALSE(fs::exists(path("dst.bin")));
  }
}

TEST_F(CliHalf, RunReferenceAndJitWriteTwoByteResults) {
  for (DType t : kHalfTypes) {
    SCOPED_TRACE(to_string(t));
    const Descriptor d = half_problem(t, DataFormat::NXC);
    const Problem p = resolve(d);
    const std::vector<uint16_t> src = half_values(p.src_elements(), t, 5), w = half_values(p.weights_elements(), t, 6);
    write_halves("src.bin", src);
    write_halves("w.bin", w);
    const Result ref = run(run_args(d, "src.bin", "w.bin") + quote(path("ref.bin").string()) + " --reference");
    ASSERT_EQ(ref.code, 0) << ref.err;
    std::vector<uint16_t> want(static_cast<size_t>(p.dst_elements()));
    reference(p, ConstBuffer(src.data(), t, src.size()), ConstBuffer(w.data(), t, w.size()),
              Buffer(want.data(), t, want.size()));
    EXPECT_EQ(read_halves("ref.bin"), want);  // the file holds the reference's bits, 2 bytes each

    const Result jit = run(run_args(d, "src.bin", "w.bin") + quote(path("jit.bin").string()));
    ASSERT_EQ(jit.code, 0) << jit.err;
    const std::vector<uint16_t> got = read_halves("jit.bin");
    ASSERT_EQ(got.size(), want.size());
    std::vector<double> exact(want.size()), mag(want.size());
    reference_with_bound(p, ConstBuffer(src.data(), t, src.size()), ConstBuffer(w.data(), t, w.size()), exact.data(),
                         mag.data());
    // f32 sums rounded once into the type: within the f32 bound plus one ulp of the type.
    for (size_t e = 0; e < got.size(); ++e) {
      const double g = detail::load_element(got.data(), t, static_cast<int64_t>(e));
      EXPECT_LE(std::fabs(g - exact[e]), verify::tolerance(verify::dot_length(p), mag[e]) + ulp(t, exact[e])) << e;
    }
  }
}

TEST_F(CliHalf, CheckPassesInBothTypes) {
  for (DType t : kHalfTypes) {
    SCOPED_TRACE(to_string(t));
    const Result check = run("check " + quote(to_json(half_problem(t))) + " --threads 1");
    ASSERT_EQ(check.code, 0) << check.out << check.err;
    EXPECT_TRUE(nlohmann::json::parse(check.out).at("ok").get<bool>()) << check.out;
  }
}

TEST_F(CliHalf, DumpAndBenchTakeTheTypes) {
  for (DType t : kHalfTypes) {
    SCOPED_TRACE(to_string(t));
    const std::string desc = quote(to_json(half_problem(t)));
    const Result dump = run("dump " + desc + " -o " + quote(path("k.bin").string()));
    ASSERT_EQ(dump.code, 0) << dump.err;
    EXPECT_EQ(fs::file_size(path("k.bin")), nlohmann::json::parse(dump.out).at("bytes").get<size_t>());

    const Result bench = run("bench " + desc + " --json --threads 1 --min-time 0.005");
    ASSERT_EQ(bench.code, 0) << bench.out << bench.err;
    const auto lines = bench.json_lines();
    ASSERT_EQ(lines.size(), 2u) << bench.out;
    EXPECT_GT(lines[0].at("gflops").get<double>(), 0.0);
    EXPECT_NE(lines[0].at("kernel").get<std::string>().find(to_string(t)), std::string::npos) << lines[0];
  }
}

// oneDNN 2.6 (Debian 12) has no f16 deconvolution on CPU: the row says so instead of failing.
TEST_F(CliHalf, BenchVsOnednnSaysWhereOnednnLacksTheType) {
  const Result r = run("bench " + quote(to_json(half_problem(DType::f16))) + " --vs onednn --threads 1 --min-time 0.005");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  if (r.err.find("built without oneDNN") != std::string::npos) GTEST_SKIP() << "built without oneDNN";
  const bool onednn_has_it = r.out.find("onednn: unsupported for f16") == std::string::npos;
  if (onednn_has_it) EXPECT_NE(r.out.find(" vs "), std::string::npos) << "a race against oneDNN's f16:\n" << r.out;
}

// The f16 FMA and bf16 dot product are measured exactly where the CPU has them.
TEST_F(CliHalf, PeakReportsTheHalfTypesArithmeticWhereTheCpuHasIt) {
  const Result r = run("peak --json --min-time 0.005");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const bool avx512 = isa_available(Isa::avx512_core);
  // (Xbyak's CPUID reading: clang 14, the sanitizer build, knows no "avx512fp16" for __builtin_cpu_supports)
  static const Xbyak::util::Cpu cpu;
  const bool fp16 = avx512 && cpu.has(Xbyak::util::Cpu::tAVX512_FP16);
  const bool bf16 = avx512 && cpu.has(Xbyak::util::Cpu::tAVX512_BF16);
  EXPECT_EQ(j.at("avx512_fp16").get<bool>(), fp16);
  EXPECT_EQ(j.at("avx512_bf16").get<bool>(), bf16);
  for (const char* key : {"zmm_f16_fma_gflops_1t", "zmm_f16_fma_gflops_nt"})
    EXPECT_EQ(j.at(key).get<double>() > 0, fp16) << key;
  for (const char* key : {"zmm_bf16_dot_gflops_1t", "zmm_bf16_dot_gflops_nt"})
    EXPECT_EQ(j.at(key).get<double>() > 0, bf16) << key;

  const Result table = run("peak --min-time 0.005");
  ASSERT_EQ(table.code, 0) << table.err;
  for (const auto& [row, has] : {std::pair{"f16 fma zmm (avx512_fp16)", fp16}, std::pair{"bf16 dot zmm (avx512_bf16)", bf16}}) {
    const size_t at = table.out.find(row);
    ASSERT_NE(at, std::string::npos) << table.out;
    const std::string line = table.out.substr(at, table.out.find('\n', at) - at);
    EXPECT_EQ(line.find("not available on this CPU") == std::string::npos, has) << line;
  }
}

}  // namespace
}  // namespace deconvjit::testing
