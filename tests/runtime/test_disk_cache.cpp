// The on-disk kernel cache through the library API: store, load, the mapped code, the cache directory and its
// default, the key, concurrent writers, listing and clearing (entries that must be rejected:
// test_disk_cache_rejects.cpp; the fixture: support/disk_cache_fixture.hpp).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/cpu.hpp"
#include "runtime/disk_cache.hpp"
#include "runtime/plan.hpp"
#include "support/disk_cache_fixture.hpp"

namespace deconvjit::testing {
namespace {

namespace fs = std::filesystem;

// Every test process (and every CLI it starts) gets a private, empty cache directory, so no test reads
// or writes the user's ~/.cache and no stale entry from an earlier build can be loaded.
struct IsolatedCacheDir {
  std::string path;
  IsolatedCacheDir() {
    std::string tmpl = (fs::temp_directory_path() / "deconvjit_test_cache_XXXXXX").string();
    if (::mkdtemp(tmpl.data())) path = tmpl;
    ::setenv("DECONVJIT_CACHE_DIR", path.c_str(), 1);
  }
  ~IsolatedCacheDir() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
};
const IsolatedCacheDir isolated_cache_dir;

// The plan reads the CPU beyond the ISA (bf16: vdpbf16ps and vcvtneps2bf16 where it has avx512_bf16), so
// the entry records those features too: a cache warmed on such a CPU must not run on one without them.
TEST_F(DiskCache, Bf16EntryRecordsTheFeaturesItsCodeNeeds) {
  if (!isa_available(Isa::avx512_core)) GTEST_SKIP() << "AVX-512 is not available";
  Descriptor d = problem();
  d.dtype = d.weights_dtype = DType::bf16;
  const Kernel k = compile(d, options());
  const std::string path = disk_cache_lookup(d, options()).path;
  const detail::EntryParts parts = detail::decode_entry(read_bytes(path));
  const std::vector<std::string> f = detail::plan_features(detail::make_plan(k.problem(), k.isa(), {}));
  const bool bf16 = std::find(f.begin(), f.end(), "avx512_bf16") != f.end();
  EXPECT_EQ(bf16, detail::cpu_has_avx512_bf16());
  EXPECT_EQ((parts.features >> 6) & 1u, bf16 ? 1u : 0u);
  EXPECT_NE(parts.meta.find("avx512_bf16") != std::string::npos, !bf16);
  EXPECT_EQ(compile(d, options()).compile_ms(), 0.0);  // and it loads here
}

TEST_F(DiskCache, StoresPrivateEntryThenLoadsIdenticalKernel) {
  const Kernel built = compile_here();
  EXPECT_GT(built.compile_ms(), 0.0);
  const std::string path = entry_path();
  ASSERT_TRUE(fs::exists(path));
  EXPECT_EQ(mode_of(dir_), 0700u);
  EXPECT_EQ(mode_of(path), 0600u);
  EXPECT_EQ(fs::path(path).filename().string(),
            detail::entry_file_name(detail::disk_key(built.problem().canonical, resolve_isa(options().max_isa), {})));

  const Kernel loaded = compile_here();
  EXPECT_EQ(loaded.compile_ms(), 0.0);  // served from the disk
  EXPECT_EQ(loaded.name(), built.name());
  ASSERT_EQ(loaded.code_size(), built.code_size());
  EXPECT_EQ(std::memcmp(loaded.code(), built.code(), built.code_size()), 0);
  EXPECT_NE(loaded.code(), built.code());
  EXPECT_EQ(run(loaded), expected());  // bitwise
}

// The NCX-native families and col (whose entry is its inner GEMM kernel) round-trip like the row families:
// stored by one compile, loaded by the next, the same code and bitwise the same results. gemm_x here has
// a channel tail and a shorter last row group (2 x 2 functions) on AVX-512; depthwise_x a masked row end.
TEST_F(DiskCache, EveryFamilyRoundTrips) {
  const bool z = resolve_isa(Isa::best) == Isa::avx512_core;
  const std::pair<const char*, const char*> shapes[] = {
      {R"({"src":[1,7,5,16],"weights":[7,5,2,2],"strides":[2,2]})", z ? "gemm_x" : "direct"},  // 3 + 2 rows
      {R"({"src":[2,9,5,11],"weights":[9,1,4,5],"groups":9,"strides":[2,2],"pads_begin":[1,-1]})", "depthwise_x"},
      {R"({"src":[1,768,2,3],"weights":[768,512,4,4],"strides":[2,2],"pads_begin":[1,1],"pads_end":[1,1]})", "col"},
  };
  for (const auto& [json, family] : shapes) {
    SCOPED_TRACE(json);
    const Descriptor d = descriptor_from_json(json);
    const Kernel built = compile(d, options());
    EXPECT_EQ(nlohmann::json::parse(built.plan_text()).at("algorithm"), family);
    const DiskCacheLookup entry = disk_cache_lookup(d, options());
    EXPECT_TRUE(entry.usable) << entry.reason;
    const Kernel loaded = compile(d, options());
    EXPECT_EQ(loaded.name(), built.name());
    ASSERT_EQ(loaded.code_size(), built.code_size());
    EXPECT_EQ(std::memcmp(loaded.code(), built.code(), built.code_size()), 0);
    EXPECT_NE(loaded.code(), built.code());  // a second mapping: the disk's
    EXPECT_EQ(run(loaded), run(built));      // bitwise
  }
}

// The loaded code is mapped straight from the entry file, read+execute and never writable; on a noexec
// file system it is copied into an anonymous W^X mapping instead.
TEST_F(DiskCache, LoadedCodeIsMappedFromTheEntryAndNeverWritable) {
  compile_here();
  const Kernel loaded = compile_here();
  ASSERT_EQ(loaded.compile_ms(), 0.0);
  const auto addr = reinterpret_cast<uintptr_t>(loaded.code());
  EXPECT_EQ(addr % 4096, 0u);
  struct statvfs fs_info {};
  const bool noexec = ::statvfs(dir_.c_str(), &fs_info) == 0 && (fs_info.f_flag & ST_NOEXEC);
  std::ifstream maps("/proc/self/maps");
  std::string line;
  bool found = false;
  while (std::getline(maps, line)) {
    uintptr_t lo = 0, hi = 0;
    char perms[5] = {};
    if (std::sscanf(line.c_str(), "%lx-%lx %4s", &lo, &hi, perms) != 3 || addr < lo || addr >= hi) continue;
    found = true;
    EXPECT_STREQ(perms, "r-xp") << line;
    if (!noexec) EXPECT_NE(line.find(fs::path(entry_path()).filename().string()), std::string::npos) << line;
  }
  EXPECT_TRUE(found);
}

// An entry rewritten (atomically) while a process runs a kernel mapped from it does not disturb that
// kernel: the mapping keeps the old file.
TEST_F(DiskCache, RewritingAnEntryLeavesMappedKernelsIntact) {
  compile_here();
  const Kernel loaded = compile_here();
  ASSERT_EQ(loaded.compile_ms(), 0.0);
  const Bytes before(loaded.code(), loaded.code() + loaded.code_size());
  Bytes bad = read_bytes(entry_path());
  bad[bad.size() - 1] ^= 0xff;
  const std::string tmp = dir_ + "/.replacement";
  write_bytes(tmp, bad);
  ::chmod(tmp.c_str(), 0600);
  fs::rename(tmp, entry_path());
  EXPECT_EQ(Bytes(loaded.code(), loaded.code() + loaded.code_size()), before);
  EXPECT_EQ(run(loaded), expected());
  EXPECT_GT(compile_here().compile_ms(), 0.0);  // the new file is rejected (code checksum) and rewritten
}

TEST_F(DiskCache, DisabledByEmptyDirectoryOrOption) {
  Options o = options();
  o.cache_dir = "";
  compile(problem(), o);
  o.cache_dir = dir_;
  o.use_disk_cache = false;
  compile(problem(), o);
  EXPECT_FALSE(fs::exists(dir_));
  EXPECT_EQ(disk_cache_lookup(problem(), o).reason, "the disk cache is disabled");
}

// Sets an environment variable for one scope (nullptr = unset).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    value ? ::setenv(name, value, 1) : ::unsetenv(name);
  }
  ~ScopedEnv() { old_ ? ::setenv(name_, old_->c_str(), 1) : ::unsetenv(name_); }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(DiskCacheDir, EnvironmentChoosesTheDefault) {
  {
    ScopedEnv e("DECONVJIT_CACHE_DIR", "");
    EXPECT_EQ(default_cache_dir(), "");  // set but empty: disabled
  }
  ScopedEnv unset("DECONVJIT_CACHE_DIR", nullptr);
  ScopedEnv home("HOME", "/home/someone");
  {
    ScopedEnv x("XDG_CACHE_HOME", "/var/xdg");
    EXPECT_EQ(default_cache_dir(), "/var/xdg/deconvjit");
  }
  {
    ScopedEnv x("XDG_CACHE_HOME", "relative/ignored");
    EXPECT_EQ(default_cache_dir(), "/home/someone/.cache/deconvjit");
  }
  ScopedEnv x("XDG_CACHE_HOME", nullptr);
  EXPECT_EQ(default_cache_dir(), "/home/someone/.cache/deconvjit");
}

TEST(DiskCacheDir, TestsNeverUseTheUsersCache) {
  const std::string dir = default_cache_dir();
  ASSERT_FALSE(dir.empty());
  EXPECT_EQ(dir.find(fs::temp_directory_path().string()), 0u) << dir;
}

TEST_F(DiskCache, CreatesMissingParentsPrivately) {
  Options o = options();
  o.cache_dir = root_ + "/a/b/c";
  compile(problem(), o);
  EXPECT_EQ(mode_of(root_ + "/a"), 0700u);
  EXPECT_EQ(mode_of(root_ + "/a/b/c"), 0700u);
  EXPECT_TRUE(disk_cache_lookup(problem(), o).usable);
}

// The directory is checked once per process; one removed while the process runs is created again.
TEST_F(DiskCache, DirectoryRemovedWhileRunningIsCreatedAgain) {
  compile_here();
  fs::remove_all(dir_);
  ::testing::internal::CaptureStderr();
  EXPECT_GT(compile_here().compile_ms(), 0.0);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  EXPECT_EQ(mode_of(dir_), 0700u);
  EXPECT_TRUE(disk_cache_lookup(problem(), options()).usable);
  EXPECT_EQ(compile_here().compile_ms(), 0.0);
}

// Every hint is part of the key: two requests that differ in any hint may get different code.
TEST(DiskCacheKey, EveryHintChangesTheKey) {
  const TuningHints base;
  std::vector<TuningHints> all(20, base);
  all[1].algorithm = "gemm", all[2].layout = "row_buffer", all[3].ur_w = 4, all[4].oc_vectors = 2;
  all[5].ic_unroll = 8, all[6].x_split = 3, all[7].ic_block = 16, all[8].x_halo = 1;
  all[9].batch_block = 1, all[10].parallel = 0, all[11].oc_loop = 2, all[12].channels_per_call = 32;
  all[13].rows_per_block = 2, all[14].flat_plane = 1, all[15].oc_chunk = 3;
  all[16].row_chunk = 2, all[17].ic_pairs = 0, all[18].nt_stores = 1;
  all[19].pack_src = 0;
  std::set<std::string> keys;
  for (const TuningHints& t : all) keys.insert(detail::disk_key("{}", Isa::avx2, t));
  EXPECT_EQ(keys.size(), all.size());
  TuningHints odd;
  odd.algorithm = "we\"ird\\", odd.layout = "tab\there";  // escaped as JSON inside the key
  EXPECT_NE(detail::disk_key("{}", Isa::avx2, odd).find("we\\\"ird"), std::string::npos);
}

// The stored plan hash guards builds without a build id (where the planner may change while the
// version does not); with an id, equal ids already mean the same planner.
TEST_F(DiskCache, PlanHashIsCheckedWhenAsked) {
  compile_here();
  const Bytes stale = edit_parts(read_bytes(entry_path()), [](detail::EntryParts& p) { p.plan_sum ^= 1; });
  const Problem pr = resolve(problem());
  const Isa isa = resolve_isa(Isa::best);
  const detail::EntryExpectation want{pr, isa, {}, detail::disk_key(pr.canonical, isa, {})};
  const detail::EntryView v = detail::parse_entry_front(stale.data(), stale.size());
  EXPECT_NO_THROW(detail::check_entry(v, want, /*compare_plan_hash=*/false));
  try {
    detail::check_entry(v, want, /*compare_plan_hash=*/true);
    ADD_FAILURE() << "a stale plan hash was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("stored plan differs"), std::string::npos) << e.what();
  }
}

TEST_F(DiskCache, ConcurrentWritersLeaveOneValidEntryAndNoTemporaries) {
  std::vector<std::thread> threads;
  std::vector<std::vector<float>> out(8);
  for (size_t i = 0; i < out.size(); ++i)
    threads.emplace_back([&, i] { out[i] = run(compile_here()); });
  for (auto& t : threads) t.join();
  for (const auto& o : out) EXPECT_EQ(o, expected());
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir_)) {
    ++files;
    EXPECT_EQ(e.path().extension(), ".djk") << e.path();
  }
  EXPECT_EQ(files, 1u);
  EXPECT_TRUE(disk_cache_lookup(problem(), options()).usable);
}

TEST_F(DiskCache, ListsVerifiesAndClears) {
  compile_here();
  Descriptor other = problem();
  other.strides = {1, 1};
  compile(other, options());
  std::ofstream(dir_ + "/.0000000000000000.djk.tmp.1.2.3") << "left by a crash";
  std::vector<DiskCacheEntry> entries = disk_cache_entries(dir_);
  ASSERT_EQ(entries.size(), 2u);
  for (const DiskCacheEntry& e : entries) {
    EXPECT_TRUE(e.valid) << e.error;
    EXPECT_EQ(e.library_version, version());
    EXPECT_EQ(e.file_size, fs::file_size(e.path));
    EXPECT_GT(e.code_size, 0u);
    EXPECT_EQ(resolve(descriptor_from_json(e.descriptor)).canonical, e.descriptor);
  }
  // A valid entry copied to another key's file name is caught by its name.
  fs::copy_file(entries[0].path, dir_ + "/0123456789abcdef.djk");
  ::chmod((dir_ + "/0123456789abcdef.djk").c_str(), 0600);
  entries = disk_cache_entries(dir_);
  ASSERT_EQ(entries.size(), 3u);
  for (const DiskCacheEntry& e : entries) {
    const bool copy = fs::path(e.path).filename() == "0123456789abcdef.djk";
    EXPECT_EQ(e.valid, !copy) << e.path;
    if (copy) EXPECT_NE(e.error.find("file name"), std::string::npos) << e.error;
  }

  EXPECT_EQ(disk_cache_clear(dir_), 4u);  // three entries and the temporary
  EXPECT_TRUE(fs::is_empty(dir_));
}

}  // namespace
}  // namespace deconvjit::testing
