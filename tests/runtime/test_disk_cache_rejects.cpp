// The on-disk kernel cache rejects what it must not run: every way an entry can be wrong, entries and
// directories others could write, metadata that disagrees, a FIFO in an entry's place. Entry edits that must
// survive the checksums re-seal the entry (edit_parts, set_field).
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <future>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "runtime/disk_cache.hpp"
#include "support/disk_cache_fixture.hpp"

namespace deconvjit::testing {
namespace {

namespace fs = std::filesystem;

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
