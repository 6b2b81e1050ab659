// DECONVJIT_JIT_PROFILE: the perf map and the jitdump name every kernel whose code becomes executable,
// compiled, loaded from the disk cache, or inside a col kernel; concurrent compiles each get their record.
// Most tests set the mode through jit_profile_configure, as reading the variable would; one runs the CLI
// with the variables set.
#include "runtime/jit_profile.hpp"

#include <gtest/gtest.h>
#include <elf.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "deconvjit/deconvjit.hpp"
#include "support/cli_test.hpp"

namespace deconvjit::testing {
namespace {

namespace fs = std::filesystem;
using detail::jit_profile_configure;

// A problem per seed, so concurrent compiles make distinct kernels.
Descriptor problem(int seed) {
  Descriptor d;
  d.src = {1, 4 + seed, 5, 6};
  d.weights = {4 + seed, 3, 3, 3};
  d.strides = {2, 2};
  return d;
}

Options uncached() {
  Options o;
  o.use_cache = false;
  o.use_disk_cache = false;
  return o;
}

struct MapLine {
  uintptr_t start = 0;
  size_t size = 0;
  std::string name;
};

std::vector<MapLine> read_map(const fs::path& path) {
  std::vector<MapLine> lines;
  std::ifstream in(path);
  for (std::string text; std::getline(in, text);) {
    MapLine l;
    std::istringstream words(text);
    words >> std::hex >> l.start >> l.size >> l.name;
    EXPECT_FALSE(words.fail()) << "malformed perf map line: " << text;
    lines.push_back(l);
  }
  return lines;
}

bool mapped(const std::vector<MapLine>& lines, const Kernel& k) {
  for (const auto& l : lines) {
    if (l.start == reinterpret_cast<uintptr_t>(k.code()) && l.size == k.code_size() && l.name == k.name()) return true;
  }
  return false;
}

template <typename T>
T read_at(const std::string& bytes, size_t offset) {
  T v{};
  if (offset + sizeof v <= bytes.size()) std::memcpy(&v, bytes.data() + offset, sizeof v);
  return v;
}

struct CodeLoad {
  uint32_t pid = 0;
  uint64_t vma = 0, code_size = 0, index = 0;
  std::string name, code;
};

// Checks the header and walks the records as perf inject does; every record here is a JIT_CODE_LOAD.
std::vector<CodeLoad> read_jitdump(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  const std::string bytes = s.str();
  EXPECT_GE(bytes.size(), 40u);
  EXPECT_EQ(read_at<uint32_t>(bytes, 0), 0x4A695444u) << "magic";
  EXPECT_EQ(read_at<uint32_t>(bytes, 4), 1u) << "version";
  const uint32_t header = read_at<uint32_t>(bytes, 8);
  EXPECT_EQ(header, 40u) << "header size";
  EXPECT_EQ(read_at<uint32_t>(bytes, 12), static_cast<uint32_t>(EM_X86_64));
  EXPECT_EQ(read_at<uint32_t>(bytes, 20), static_cast<uint32_t>(::getpid()));
  EXPECT_GT(read_at<uint64_t>(bytes, 24), 0u) << "timestamp";
  std::vector<CodeLoad> loads;
  for (size_t at = header; at < bytes.size();) {
    const uint32_t id = read_at<uint32_t>(bytes, at), total = read_at<uint32_t>(bytes, at + 4);
    EXPECT_EQ(id, 0u) << "record type at " << at;
    if (total < 56 || at + total > bytes.size()) {
      ADD_FAILURE() << "record at " << at << " claims " << total << " bytes of " << bytes.size() - at;
      break;
    }
    CodeLoad c;
    c.pid = read_at<uint32_t>(bytes, at + 16);
    c.vma = read_at<uint64_t>(bytes, at + 24);
    EXPECT_EQ(read_at<uint64_t>(bytes, at + 32), c.vma) << "code_addr = vma";
    c.code_size = read_at<uint64_t>(bytes, at + 40);
    c.index = read_at<uint64_t>(bytes, at + 48);
    c.name = std::string(bytes.c_str() + at + 56);
    const size_t code_at = at + 56 + c.name.size() + 1;
    EXPECT_EQ(code_at + c.code_size, at + total) << "record size = header + fields + name + code";
    c.code = bytes.substr(code_at, static_cast<size_t>(c.code_size));
    loads.push_back(c);
    at += total;
  }
  return loads;
}

const CodeLoad* load_of(const std::vector<CodeLoad>& loads, const Kernel& k) {
  for (const auto& c : loads) {
    if (c.vma == reinterpret_cast<uintptr_t>(k.code())) return &c;
  }
  return nullptr;
}

void expect_load(const std::vector<CodeLoad>& loads, const Kernel& k) {
  const CodeLoad* c = load_of(loads, k);
  ASSERT_NE(c, nullptr) << k.name() << " has no JIT_CODE_LOAD record";
  EXPECT_EQ(c->name, k.name());
  EXPECT_EQ(c->pid, static_cast<uint32_t>(::getpid()));
  ASSERT_EQ(c->code_size, k.code_size());
  EXPECT_EQ(c->code, std::string(reinterpret_cast<const char*>(k.code()), k.code_size())) << "code bytes";
}

class JitProfile : public CliTest {
 protected:
  void TearDown() override {
    jit_profile_configure(detail::kJitProfileOff, "");
    CliTest::TearDown();
  }
};

TEST(JitProfileSetting, ParsesTheVariable) {
  unsigned f = 99;
  EXPECT_TRUE(detail::parse_jit_profile("", &f));
  EXPECT_EQ(f, 0u);
  for (const char* off : {"0", "off"}) {
    EXPECT_TRUE(detail::parse_jit_profile(off, &f)) << off;
    EXPECT_EQ(f, 0u) << off;
  }
  EXPECT_TRUE(detail::parse_jit_profile("perfmap", &f));
  EXPECT_EQ(f, unsigned{detail::kJitProfilePerfMap});
  EXPECT_TRUE(detail::parse_jit_profile("jitdump,perfmap", &f));
  EXPECT_EQ(f, unsigned{detail::kJitProfilePerfMap | detail::kJitProfileJitDump});
  for (const char* bad : {"1", "perf", "perfmap,", "JITDUMP"}) {
    EXPECT_FALSE(detail::parse_jit_profile(bad, &f)) << bad;
    EXPECT_EQ(f, 0u) << bad;
  }
}

TEST_F(JitProfile, PerfMapNamesACompiledKernel) {
  jit_profile_configure(detail::kJitProfilePerfMap, "", dir_.string());
  const fs::path map = dir_ / ("perf-" + std::to_string(::getpid()) + ".map");
  EXPECT_EQ(detail::jit_profile_perfmap_path(), map.string());
  EXPECT_EQ(detail::jit_profile_jitdump_path(), "");
  const Kernel k = compile(problem(0), uncached());
  const auto lines = read_map(map);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_TRUE(mapped(lines, k)) << lines[0].name << " at " << lines[0].start;
}

TEST_F(JitProfile, JitDumpHoldsHeaderRecordAndCode) {
  jit_profile_configure(detail::kJitProfileJitDump, dir_.string());
  const fs::path dump = dir_ / ("jit-" + std::to_string(::getpid()) + ".dump");
  EXPECT_EQ(detail::jit_profile_jitdump_path(), dump.string());
  // perf inject finds the file through an executable mapping of it in this process.
  std::ifstream maps("/proc/self/maps");
  bool exec_mapped = false;
  for (std::string line; std::getline(maps, line);) {
    exec_mapped |= line.find(dump.string()) != std::string::npos && line.find(" r-xp ") != std::string::npos;
  }
  EXPECT_TRUE(exec_mapped) << dump << " is not mapped r-x";
  const Kernel a = compile(problem(0), uncached()), b = compile(problem(1), uncached());
  const auto loads = read_jitdump(dump);
  ASSERT_EQ(loads.size(), 2u);
  expect_load(loads, a);
  expect_load(loads, b);
  EXPECT_NE(loads[0].index, loads[1].index);
}

TEST_F(JitProfile, KernelsLoadedFromTheDiskCacheAndColInnerKernels) {
  jit_profile_configure(detail::kJitProfilePerfMap | detail::kJitProfileJitDump, dir_.string(), dir_.string());
  Options disk;
  disk.use_cache = false;
  disk.cache_dir = (dir_ / "cache").string();
  const Kernel stored = compile(problem(2), disk);
  const Kernel loaded = compile(problem(2), disk);  // the memory cache is off: this one comes from disk
  ASSERT_NE(stored.code(), loaded.code());
  Options col = uncached();
  col.hints.algorithm = "col";
  const Kernel composite = compile(problem(3), col);  // its code() is its inner GEMM kernel's
  const auto lines = read_map(dir_ / ("perf-" + std::to_string(::getpid()) + ".map"));
  const auto loads = read_jitdump(dir_ / ("jit-" + std::to_string(::getpid()) + ".dump"));
  for (const Kernel* k : {&stored, &loaded}) {
    EXPECT_TRUE(mapped(lines, *k)) << k->name();
    expect_load(loads, *k);
  }
  const CodeLoad* inner = load_of(loads, composite);
  ASSERT_NE(inner, nullptr) << "col's inner kernel has no record";
  EXPECT_EQ(inner->code, std::string(reinterpret_cast<const char*>(composite.code()), composite.code_size()));
}

TEST_F(JitProfile, ConcurrentCompilesEachGetOneRecord) {
  jit_profile_configure(detail::kJitProfilePerfMap | detail::kJitProfileJitDump, dir_.string(), dir_.string());
  constexpr int kThreads = 6;
  std::vector<Kernel> kernels(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back([&, t] { kernels[t] = compile(problem(t), uncached()); });
  for (auto& t : threads) t.join();
  const auto lines = read_map(dir_ / ("perf-" + std::to_string(::getpid()) + ".map"));
  const auto loads = read_jitdump(dir_ / ("jit-" + std::to_string(::getpid()) + ".dump"));
  EXPECT_EQ(lines.size(), size_t{kThreads});
  ASSERT_EQ(loads.size(), size_t{kThreads});
  for (const Kernel& k : kernels) {
    EXPECT_TRUE(mapped(lines, k)) << k.name();
    expect_load(loads, k);
  }
}

TEST_F(JitProfile, OffWritesNothing) {
  jit_profile_configure(detail::kJitProfileOff, dir_.string(), dir_.string());
  compile(problem(0), uncached());
  EXPECT_TRUE(fs::is_empty(dir_));
}

// The variables as a user sets them, read by a fresh process: the CLI.
TEST_F(JitProfile, EnvironmentTurnsItOnInTheCli) {
  const std::string desc = shell_quote(R"({"src":[1,4,5,6],"weights":[4,3,3,3],"strides":[2,2]})");
  const std::string env = "DECONVJIT_CACHE_DIR= DECONVJIT_JIT_PROFILE=jitdump DECONVJIT_JIT_PROFILE_DIR=" +
                          shell_quote(dir_.string());
  CliResult r = run("check " + desc, env);
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<fs::path> dumps;
  for (const auto& e : fs::directory_iterator(dir_)) {
    if (e.path().filename().string().rfind("jit-", 0) == 0) dumps.push_back(e.path());
  }
  ASSERT_EQ(dumps.size(), 1u) << "one jit-PID.dump in " << dir_;
  std::ifstream in(dumps[0], std::ios::binary);
  std::string head(4, '\0');
  in.read(head.data(), 4);
  EXPECT_EQ(read_at<uint32_t>(head, 0), 0x4A695444u);
  std::ostringstream all;
  all << std::ifstream(dumps[0], std::ios::binary).rdbuf();
  EXPECT_NE(all.str().find("deconv_f32_"), std::string::npos) << "no kernel name in the dump";

  r = run("check " + desc, "DECONVJIT_CACHE_DIR= DECONVJIT_JIT_PROFILE=bogus");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("DECONVJIT_JIT_PROFILE='bogus'"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace deconvjit::testing
