// The on-disk kernel cache through the library API: store, load, every way an entry can be wrong, and the
// permission rules. Entry edits that must survive the checksum re-seal the entry (reseal()).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "runtime/disk_cache.hpp"
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

uint32_t meta_bytes(const Bytes& b) {
  uint32_t n;
  std::memcpy(&n, b.data() + 12, 4);
  return n;
}

nlohmann::ordered_json read_meta(const Bytes& b) {
  const auto* p = reinterpret_cast<const char*>(b.data() + detail::kDiskHeaderBytes);
  return nlohmann::ordered_json::parse(p, p + meta_bytes(b));
}

// Replaces the metadata and recomputes the checksum: the entry is intact, only its claims changed.
Bytes reseal(const Bytes& b, const std::string& text) {
  constexpr size_t head = detail::kDiskHeaderBytes;
  const uint32_t n = static_cast<uint32_t>(text.size());
  const size_t code = b.size() - head - meta_bytes(b);
  Bytes out(head + text.size() + code);
  std::memcpy(out.data(), b.data(), head);
  std::memcpy(out.data() + 12, &n, 4);
  std::memcpy(out.data() + head, text.data(), text.size());
  std::memcpy(out.data() + head + text.size(), b.data() + head + meta_bytes(b), code);
  const uint64_t sum = detail::entry_checksum(out.data(), out.data() + detail::kDiskHeaderBytes,
                                              out.size() - detail::kDiskHeaderBytes);
  std::memcpy(out.data() + 24, &sum, 8);
  return out;
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
  k.execute(ops.src.data(), ops.weights.data(), dst.data());
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

TEST_F(DiskCache, StoresPrivateEntryThenLoadsIdenticalKernel) {
  const Kernel built = compile_here();
  EXPECT_GT(built.compile_ms(), 0.0);
  const std::string path = entry_path();
  ASSERT_TRUE(fs::exists(path));
  EXPECT_EQ(mode_of(dir_), 0700u);
  EXPECT_EQ(mode_of(path), 0600u);
  EXPECT_EQ(fs::path(path).filename().string(),
            detail::entry_file_name(detail::disk_key(built.problem().canonical, built.isa(), {})));

  const Kernel loaded = compile_here();
  EXPECT_EQ(loaded.compile_ms(), 0.0);  // served from the disk
  EXPECT_EQ(loaded.name(), built.name());
  ASSERT_EQ(loaded.code_size(), built.code_size());
  EXPECT_EQ(std::memcmp(loaded.code(), built.code(), built.code_size()), 0);
  EXPECT_NE(loaded.code(), built.code());
  EXPECT_EQ(run(loaded), expected());  // bitwise
}

TEST_F(DiskCache, LoadedCodeIsNeverWritable) {
  compile_here();
  const Kernel loaded = compile_here();
  ASSERT_EQ(loaded.compile_ms(), 0.0);
  const auto addr = reinterpret_cast<uintptr_t>(loaded.code());
  std::ifstream maps("/proc/self/maps");
  std::string line;
  bool found = false;
  while (std::getline(maps, line)) {
    uintptr_t lo = 0, hi = 0;
    char perms[5] = {};
    if (std::sscanf(line.c_str(), "%lx-%lx %4s", &lo, &hi, perms) != 3 || addr < lo || addr >= hi) continue;
    found = true;
    EXPECT_STREQ(perms, "r-xp") << line;
  }
  EXPECT_TRUE(found);
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

Bytes edit_meta(const Bytes& b, const std::function<void(nlohmann::ordered_json&)>& edit) {
  nlohmann::ordered_json meta = read_meta(b);
  edit(meta);
  return reseal(b, meta.dump());
}

std::vector<Corruption> corruptions() {
  const char* other_isa = isa_available(Isa::avx512_core) ? "avx2" : "avx512_core";
  return {
      {"truncated_to_half", [](const Bytes& b) { return Bytes(b.begin(), b.begin() + b.size() / 2); }, "truncated"},
      {"truncated_in_header", [](const Bytes& b) { return Bytes(b.begin(), b.begin() + 10); }, "truncated"},
      {"empty", [](const Bytes&) { return Bytes{}; }, "truncated"},
      {"code_byte_flipped", [](Bytes b) { b[b.size() - 5] ^= 0x40; return b; }, "checksum"},
      {"metadata_byte_flipped", [](Bytes b) { b[detail::kDiskHeaderBytes + 3] ^= 0x01; return b; }, "checksum"},
      {"bad_magic", [](Bytes b) { b[0] = 'X'; return b; }, "magic"},
      {"other_library_version",
       [](const Bytes& b) { return edit_meta(b, [](auto& m) { m["library_version"] = "0.0.0-other"; }); },
       "built by deconvjit 0.0.0-other"},
      {"other_build_of_this_version",
       [](const Bytes& b) { return edit_meta(b, [](auto& m) { m["build_id"] = "another-build"; }); },
       "another build"},
      {"key_of_another_problem",
       [](const Bytes& b) { return edit_meta(b, [](auto& m) { m["key"] = "something else"; }); }, "key"},
      {"descriptor_of_another_problem",
       [](const Bytes& b) {
         return edit_meta(b, [](auto& m) {
           std::string d = m["descriptor"];
           d.replace(d.find("[2,6,5,7]"), 9, "[2,6,5,8]");
           m["descriptor"] = d;
         });
       },
       "descriptor"},
      {"isa_edited", [other_isa](const Bytes& b) { return edit_meta(b, [&](auto& m) { m["isa"] = other_isa; }); },
       "ISA"},
      {"needs_cpu_feature_this_cpu_lacks",
       [](const Bytes& b) { return edit_meta(b, [](auto& m) { m["cpu_features"].push_back("amx_tile"); }); },
       "lacks feature amx_tile"},
      {"stale_plan",
       [](const Bytes& b) {
         return edit_meta(b, [](auto& m) {
           std::string plan = m["plan"];
           plan.replace(plan.find("\"ur_w\":"), 7, "\"ur_w\":9");
           m["plan"] = plan;
         });
       },
       "plan"},
      {"entry_offset_outside_code",
       [](const Bytes& b) { return edit_meta(b, [](auto& m) { m["entries"][0][0] = 1u << 30; }); }, "outside"},
      {"metadata_without_fields", [](const Bytes& b) { return reseal(b, "{}"); }, "missing"},
      {"metadata_not_json", [](const Bytes& b) { return reseal(b, "not json at all"); }, "not a JSON object"},
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
