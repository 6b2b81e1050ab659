// The on-disk kernel cache through the library API: store, load, every way an entry can be wrong, and the
// permission rules. Entry edits that must survive the checksums re-seal the entry (edit_parts, set_field).
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <optional>
#include <set>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <utility>

#include "runtime/cpu.hpp"
#include "runtime/disk_cache.hpp"
#include "runtime/plan.hpp"
#include "runtime/tolerance.hpp"

namespace deconvjit::testing {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

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

Bytes read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const Bytes& b) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

// Decodes an intact entry, lets `edit` change what it holds, and encodes it again with valid checksums:
// the entry is intact, only its claims changed.
Bytes edit_parts(const Bytes& b, const std::function<void(detail::EntryParts&)>& edit) {
  detail::EntryParts parts = detail::decode_entry(b);
  edit(parts);
  return detail::encode_parts(parts);
}

// Overwrites a header field in place; `reseal` recomputes the checksums, so only the structural checks
// behind them can catch the edit.
template <typename T>
Bytes set_field(Bytes b, size_t offset, T value, bool reseal = false) {
  std::memcpy(b.data() + offset, &value, sizeof value);
  if (reseal) detail::seal_entry(b);
  return b;
}

uint64_t u64_at(const Bytes& b, size_t offset) {
  uint64_t v;
  std::memcpy(&v, b.data() + offset, sizeof v);
  return v;
}
constexpr size_t kCodeOffsetField = 32, kCodeBytesField = 40, kMetaBytesField = 88;

size_t meta_offset(const Bytes& b) {
  const std::string text(b.begin(), b.end());
  return text.find("{\"format\":");
}

mode_t mode_of(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? (st.st_mode & 07777) : 0;
}

// C_OUT 20 gives a channel tail on both ISAs, so both block kinds of the code are exercised.
Descriptor problem() {
  return descriptor_from_json(R"({"src":[2,6,5,7],"weights":[6,20,3,3],"strides":[2,2],"pads_begin":[1,0],)"
                              R"("pads_end":[0,1]})");
}

std::vector<float> run(const Kernel& k, uint64_t seed = 7) {
  const verify::Operands ops = verify::random_operands(k.problem(), seed);
  std::vector<float> dst(static_cast<size_t>(k.problem().dst_elements()));
  k.execute(ops.src, ops.weights, dst);
  return dst;
}

class DiskCache : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "deconvjit_disk_XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
    dir_ = root_ + "/cache";  // created by the library
  }
  void TearDown() override {
    std::error_code ec;
    fs::permissions(dir_, fs::perms::owner_all, ec);
    fs::remove_all(root_, ec);
  }

  Options options() const {
    Options o;
    o.use_cache = false;  // the in-memory cache would hide the disk
    o.cache_dir = dir_;
    return o;
  }
  Kernel compile_here() const { return compile(problem(), options()); }
  std::string entry_path() const { return disk_cache_lookup(problem(), options()).path; }
  std::vector<float> expected() const {
    Options o = options();
    o.use_disk_cache = false;
    return run(compile(problem(), o));
  }

  std::string root_, dir_;
};

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

// One way to spoil an entry, and a word of the reason it must be rejected for.
struct Corruption {
  const char* name;
  std::function<Bytes(const Bytes&)> spoil;
  const char* reason;
};

void PrintTo(const Corruption& c, std::ostream* os) { *os << c.name; }

std::vector<Corruption> corruptions() {
  const uint32_t other_isa = isa_available(Isa::avx512_core) ? 1 : 2;  // the format's ISA codes
  auto edit = [](std::function<void(detail::EntryParts&)> f) {
    return [f](const Bytes& b) { return edit_parts(b, f); };
  };
  auto in_key = [](const char* from, const char* to) {
    return [from, to](detail::EntryParts& p) { p.key.replace(p.key.find(from), std::strlen(from), to); };
  };
  return {
      {"truncated_to_half", [](const Bytes& b) { return Bytes(b.begin(), b.begin() + b.size() / 2); }, "truncated"},
      {"truncated_in_header", [](const Bytes& b) { return Bytes(b.begin(), b.begin() + 10); }, "truncated"},
      {"truncated_by_one_code_byte", [](const Bytes& b) { return Bytes(b.begin(), b.end() - 1); }, "truncated"},
      {"padded", [](Bytes b) { b.push_back(0); return b; }, "padded"},
      {"empty", [](const Bytes&) { return Bytes{}; }, "truncated"},
      {"code_byte_flipped", [](Bytes b) { b[b.size() - 5] ^= 0x40; return b; }, "corrupted code"},
      {"first_code_byte_flipped", [](Bytes b) { b[u64_at(b, kCodeOffsetField)] ^= 1; return b; }, "corrupted code"},
      {"key_byte_flipped", [](Bytes b) { b[detail::kDiskHeaderBytes + 3] ^= 0x01; return b; }, "checksum mismatch (corrupted entry)"},
      {"metadata_byte_flipped", [](Bytes b) { b[meta_offset(b) + 2] ^= 0x01; return b; }, "checksum mismatch (corrupted entry)"},
      {"bad_magic", [](Bytes b) { b[0] = 'X'; return b; }, "magic"},
      {"format_1_entry", [](const Bytes& b) { return set_field<uint32_t>(b, 8, 1); }, "another format version"},
      {"code_offset_past_eof",
       [](const Bytes& b) { return set_field<uint64_t>(b, kCodeOffsetField, u64_at(b, kCodeOffsetField) + (1u << 20)); },
       "truncated or padded"},
      {"code_size_past_eof", [](const Bytes& b) { return set_field<uint64_t>(b, kCodeBytesField, uint64_t{1} << 40); },
       "truncated or padded"},
      {"code_size_wraps", [](const Bytes& b) { return set_field<uint64_t>(b, kCodeBytesField, ~uint64_t{0}); },
       "truncated or padded"},
      {"code_offset_not_page_aligned",
       [](const Bytes& b) {
         const uint64_t off = u64_at(b, kCodeOffsetField) - 8;
         return set_field<uint64_t>(set_field<uint64_t>(b, kCodeOffsetField, off), kCodeBytesField, b.size() - off);
       },
       "page boundary"},
      {"sections_overrun_the_code",
       [](const Bytes& b) { return set_field<uint32_t>(b, kMetaBytesField, 1u << 16, /*reseal=*/true); }, "overrun"},
      {"other_library_version", edit([](auto& p) { p.version = "0.0.0-other"; }), "built by deconvjit 0.0.0-other"},
      {"other_build_of_this_version", edit([](auto& p) { p.build_id = "another-build"; }), "another build"},
      {"key_of_another_problem", edit([](auto& p) { p.key = "something else"; }), "key"},
      {"descriptor_of_another_problem", edit(in_key("[2,6,5,7]", "[2,6,5,8]")), "key does not match"},
      {"hints_of_another_request", edit(in_key("\"ur_w\":0", "\"ur_w\":3")), "key does not match"},
      {"isa_edited", edit([other_isa](auto& p) { p.isa = other_isa; }), "ISA"},
      {"needs_cpu_feature_this_cpu_lacks", edit([](auto& p) { p.features |= 1u << 31; }), "lacks feature"},
      {"cpu_features_not_those_of_the_isa", edit([](auto& p) { p.features &= ~1u; }), "do not match ISA"},
      // f32 code made as if on another CPU: where this one has avx512_bf16 the plan here needs other bits,
      // where it lacks it, the code needs a feature it lacks; both reasons name it.
      {"cpu_features_of_another_cpu", edit([](auto& p) { p.features ^= 1u << 6; }), "avx512_bf16"},
      {"stale_plan", edit([](auto& p) { p.kernel += "_older"; }), "plan"},
      {"entry_offset_outside_code", edit([](auto& p) { p.entries[0][0] = 1u << 30; }), "outside"},
      {"entry_point_missing", edit([](auto& p) { p.entries[1].pop_back(); }), "the plan needs"},
  };
}

class DiskCacheCorruption : public DiskCache, public ::testing::WithParamInterface<Corruption> {};

TEST_P(DiskCacheCorruption, IsRejectedRecompiledAndRewritten) {
  compile_here();
  const std::string path = entry_path();
  const Bytes good = read_bytes(path);
  const Bytes bad = GetParam().spoil(good);
  ASSERT_NE(bad, good);
  write_bytes(path, bad);
  ::chmod(path.c_str(), 0600);

  const DiskCacheLookup l = disk_cache_lookup(problem(), options());
  EXPECT_FALSE(l.usable);
  EXPECT_NE(l.reason.find(GetParam().reason), std::string::npos) << l.reason;
  const auto listed = disk_cache_entries(dir_);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_FALSE(listed[0].valid);

  const Kernel k = compile_here();
  EXPECT_GT(k.compile_ms(), 0.0);  // compiled, not loaded
  EXPECT_EQ(run(k), expected());
  EXPECT_TRUE(disk_cache_lookup(problem(), options()).usable);
  EXPECT_EQ(read_bytes(path), good);  // rewritten with the same, deterministic content
  EXPECT_EQ(compile_here().compile_ms(), 0.0);
}

INSTANTIATE_TEST_SUITE_P(All, DiskCacheCorruption, ::testing::ValuesIn(corruptions()),
                         [](const auto& info) { return std::string(info.param.name); });

// An entry someone else could have written is never executed and never overwritten.
void expect_ignored(const DiskCache& t, const std::string& path, const Options& o, const char* reason) {
  const Bytes before = read_bytes(path);
  ::testing::internal::CaptureStderr();
  const Kernel k1 = compile(problem(), o);
  const Kernel k2 = compile(problem(), o);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_GT(k1.compile_ms(), 0.0);
  EXPECT_GT(k2.compile_ms(), 0.0);
  EXPECT_NE(err.find("warning: ignoring kernel cache entry"), std::string::npos) << err;
  EXPECT_NE(err.find(reason), std::string::npos) << err;
  EXPECT_EQ(err.find("warning", err.find("warning") + 1), std::string::npos) << "warned twice: " << err;
  EXPECT_EQ(read_bytes(path), before);
  EXPECT_FALSE(disk_cache_lookup(problem(), o).usable);
  (void)t;
}

TEST_F(DiskCache, EntryWritableByOthersIsIgnoredWithOneWarning) {
  compile_here();
  const std::string path = entry_path();
  ASSERT_EQ(::chmod(path.c_str(), 0666), 0);
  expect_ignored(*this, path, options(), "writable by group or others");
  EXPECT_EQ(mode_of(path), 0666u);
}

TEST_F(DiskCache, EntryOwnedByAnotherUserIsIgnored) {
  if (::geteuid() != 0) GTEST_SKIP() << "changing a file's owner needs root";
  compile_here();
  const std::string path = entry_path();
  ASSERT_EQ(::chown(path.c_str(), 65534, 65534), 0);
  expect_ignored(*this, path, options(), "owned by uid 65534");
}

TEST_F(DiskCache, SymlinkedEntryIsIgnored) {
  compile_here();
  const std::string path = entry_path();
  fs::rename(path, root_ + "/elsewhere.djk");
  fs::create_symlink(root_ + "/elsewhere.djk", path);
  expect_ignored(*this, path, options(), "symbolic link");
}

TEST_F(DiskCache, UnsafeDirectoryTurnsTheCacheOff) {
  compile_here();
  const std::string path = entry_path();
  ASSERT_EQ(::chmod(dir_.c_str(), 0777), 0);
  detail::forget_checked_dirs();  // a directory is checked once per process: be a new process
  fs::remove(path);
  ::testing::internal::CaptureStderr();
  const Kernel k = compile_here();
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("writable by group or others"), std::string::npos) << err;
  EXPECT_GT(k.compile_ms(), 0.0);
  EXPECT_EQ(run(k), expected());
  EXPECT_TRUE(fs::is_empty(dir_));  // nothing stored

  ASSERT_EQ(::chmod(dir_.c_str(), 0700), 0);
  compile_here();  // stores again
  ASSERT_EQ(::chmod(dir_.c_str(), 0770), 0);
  detail::forget_checked_dirs();
  EXPECT_GT(compile_here().compile_ms(), 0.0);  // a valid entry in an unsafe directory is not loaded
  const auto listed = disk_cache_entries(dir_);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_FALSE(listed[0].valid);
  EXPECT_NE(listed[0].error.find("directory is writable by group or others"), std::string::npos) << listed[0].error;
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

// The loader never reads the JSON metadata; `cache ls/verify` show it, so verify flags metadata that
// disagrees with the entry while compile() still loads the (intact, matching) code.
TEST_F(DiskCache, MetadataIsForToolsOnly) {
  compile_here();
  const std::string path = entry_path();
  const Bytes good = read_bytes(path);
  const std::vector<std::pair<std::function<void(std::string&)>, const char*>> edits = {
      {[](std::string& m) { m = "{}"; }, "is missing"},
      {[](std::string& m) { m = "not json"; }, "not a JSON object"},
      {[](std::string& m) { m.replace(m.find("[2,6,5,7]", m.find("\"descriptor\":")), 9, "[2,6,5,8]"); },
       "file name does not match"},
      {[](std::string& m) { m.replace(m.find("[2,6,5,7]"), 9, "[2,6,5,8]"); }, "disagrees with the header: key"},
      {[](std::string& m) { m.replace(m.find("\"kernel\":\""), 10, "\"kernel\":\"x"); }, "disagrees"},
  };
  for (const auto& [edit_meta, reason] : edits) {
    const auto& edit = edit_meta;  // C++17 lambdas cannot capture a structured binding (clang rejects it)
    write_bytes(path, edit_parts(good, [&](detail::EntryParts& p) { edit(p.meta); }));
    EXPECT_EQ(compile_here().compile_ms(), 0.0) << reason;
    const auto listed = disk_cache_entries(dir_);
    ASSERT_EQ(listed.size(), 1u);
    EXPECT_FALSE(listed[0].valid);
    EXPECT_NE(listed[0].error.find(reason), std::string::npos) << listed[0].error;
  }
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

// A FIFO named like an entry would block a blocking open() until some writer came: compile() and the
// listing must skip it with a warning instead of hanging.
TEST_F(DiskCache, FifoInPlaceOfAnEntryIsSkippedNotWaitedOn) {
  compile_here();
  const std::string path = entry_path();
  ASSERT_EQ(::unlink(path.c_str()), 0);
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  auto work = std::async(std::launch::async, [&] {
    ::testing::internal::CaptureStderr();
    const Kernel k = compile_here();
    const std::string err = ::testing::internal::GetCapturedStderr();
    return std::make_pair(k.compile_ms(), err);
  });
  if (work.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    const int unblock = ::open(path.c_str(), O_WRONLY | O_NONBLOCK);  // let the stuck open() return
    if (unblock >= 0) ::close(unblock);
    FAIL() << "compile() blocked on a FIFO in the cache directory";
  }
  const auto [ms, err] = work.get();
  EXPECT_GT(ms, 0.0);
  EXPECT_NE(err.find("not a regular file"), std::string::npos) << err;
  const std::vector<DiskCacheEntry> entries = disk_cache_entries(dir_);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_FALSE(entries[0].valid);
  EXPECT_NE(entries[0].error.find("not a regular file"), std::string::npos) << entries[0].error;
}

}  // namespace
}  // namespace deconvjit::testing
