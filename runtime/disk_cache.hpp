// The persistent kernel cache: compiled code, its identity and metadata in one file per key under a cache
// directory, so a later process loads the code instead of running the JIT. See docs/CACHE.md.
//
// Entry file, format 2 (little-endian). The front holds everything but the code; the code starts on a
// page of its own so the loader can map it straight from the file, read+execute, without copying it.
//
//   0  "DJITKERN"            8  u32 format        12 u32 header bytes (96)
//   16 u64 front checksum: hash of bytes [24, code offset)
//   24 u64 code checksum:  hash of the code bytes, checked over the mapped bytes that will run
//   32 u64 code offset (a multiple of 4096)      40 u64 code bytes (the file ends where the code ends)
//   48 u64 plan hash       56 u32 ISA code        60 u32 CPU feature bits
//   64 u32 bytes of: key, library version, build id, kernel name; 80 u32 entry points per block kind (2);
//   88 u32 metadata bytes  92 u32 zero
//   96 key | version | build id | kernel name | u32 entry offsets, kind 0 then 1 | metadata JSON | zeros
//   code offset: code
//
// The hot load path compares binary fields and the stored key with memcmp. The JSON metadata describes
// the entry for `deconvjit cache ls/verify`; nothing the loader runs depends on it.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "deconvjit/deconvjit.hpp"
#include "runtime/kernel_cache.hpp"

namespace deconvjit::detail {

constexpr uint32_t kDiskFormat = 2;
constexpr size_t kDiskHeaderBytes = 96;
constexpr uint64_t kDiskCodeAlign = 4096;  // x86-64 Linux page size: mmap offsets must be multiples of it
constexpr uint64_t kDiskMaxFront = 1 << 20;

// The hook compile() calls on an in-memory cache miss: load a valid entry from the options' cache
// directory, or build the kernel and store it there. Problems with the cache never fail the call.
KernelPtr build_or_load(const Problem& p, Isa isa, const Options& options);

// The directory `options` select: "" when the disk cache is disabled.
std::string disk_cache_dir(const Options& options);
// Forgets which directories this process found safe (they are checked once per process); for tests that
// change a directory's permissions and want to see what a new process would do.
void forget_checked_dirs();
// The cache key: canonical descriptor, ISA and tuning hints (the library version is checked, not keyed,
// so an upgrade rewrites entries in place instead of leaving the old ones behind).
std::string disk_key(const std::string& canonical, Isa isa, const TuningHints& hints);
std::string entry_file_name(const std::string& key);  // 16 hex digits of a hash of the key + ".djk"
uint64_t fnv1a64(const void* data, size_t bytes, uint64_t h = 14695981039346656037ull);
// The 64-bit checksum of both checksummed regions (`seed` tells them apart).
uint64_t entry_hash(const uint8_t* data, size_t bytes, uint64_t seed);
uint64_t code_checksum(const uint8_t* code, size_t bytes);

// What an entry is checked against: the caller's request, or for `cache verify` what the entry itself
// claims (then `key` must still hash to the file name).
struct EntryExpectation {
  Problem problem;
  Isa isa = Isa::avx2;
  TuningHints hints;
  std::string key;
};

// The front of an entry after its structure and front checksum were checked: views into the buffer
// that was parsed, which must outlive the view.
struct EntryView {
  uint64_t code_offset = 0, code_bytes = 0, code_sum = 0, plan_sum = 0;
  uint32_t isa = 0, features = 0;
  std::string_view key, version, build_id, kernel, meta;
  std::array<const uint8_t*, 2> entries{};  // little-endian u32 code offsets
  std::array<uint32_t, 2> entry_count{};
};

// How many bytes the front of a file of `file_bytes` bytes has (its code offset), from its first
// `n` >= min(file_bytes, kDiskHeaderBytes) bytes. Throws std::runtime_error naming the problem.
uint64_t entry_front_bytes(const uint8_t* head, size_t n, uint64_t file_bytes);
// Parses and checksums a front of exactly entry_front_bytes() bytes. Throws on any inconsistency.
EntryView parse_entry_front(const uint8_t* front, uint64_t file_bytes);

// A validated entry, ready to map. `plan` is recomputed, never taken from the file.
struct ValidEntry {
  Plan plan;
  std::array<std::vector<size_t>, 2> entries;
};
// Checks identity (version, build, ISA and CPU features, key, plan, entry points) against `want`; the
// code checksum is left to the caller, over the bytes it will run. The stored plan hash is compared only
// when asked: make_plan is a pure function of (problem, ISA, hints) within one build and kind of CPU (the
// key marks those that run AVX-512 at the AVX2 rate), so once the key
// and the build id match it can only differ in a build without an id (see build_has_id).
ValidEntry check_entry(const EntryView& v, const EntryExpectation& want, bool compare_plan_hash);
bool build_has_id();
uint64_t plan_hash(const Plan& plan);

// Everything an entry holds, decoded: for listing, verifying, and for tests that rewrite entries.
struct EntryParts {
  uint32_t isa = 0, features = 0;
  uint64_t plan_sum = 0;
  std::string key, version, build_id, kernel, meta;
  std::array<std::vector<uint32_t>, 2> entries;
  std::vector<uint8_t> code;
};
std::vector<uint8_t> encode_parts(const EntryParts& parts);  // lays out and seals (both checksums)
void seal_entry(std::vector<uint8_t>& file);  // recomputes both checksums; throws if the sizes are wrong
EntryParts decode_entry(const std::vector<uint8_t>& file);    // throws unless intact (both checksums)
// Serialises a compiled kernel; `hints` are the ones it was planned with.
std::vector<uint8_t> encode_entry(const CompiledKernel& k, Isa isa, const TuningHints& hints,
                                  const std::string& key);
// The complete check `cache verify` runs on a whole file: structure, both checksums, the metadata
// agreeing with the binary fields, then check_entry against `want`. Throws naming the first problem.
void verify_entry(const std::vector<uint8_t>& file, const EntryExpectation& want);

// The metadata of an intact entry, and the expectation it implies (for listing and verifying).
struct EntryClaims {
  std::string key, descriptor, isa, version, kernel_name;
  TuningHints hints;
  uint64_t code_size = 0;
};
EntryClaims read_claims(const std::vector<uint8_t>& file);            // throws on a malformed entry
EntryExpectation expectation_from_claims(const EntryClaims& claims);  // throws if they do not resolve

// The CPU features code for `isa` executes, by their GCC/cpuid names, and as EntryView::features bits.
std::vector<std::string> required_features(Isa isa);
// required_features(plan.isa) and what else the plan's code executes (avx512_bf16: vdpbf16ps, vcvtneps2bf16).
std::vector<std::string> plan_features(const Plan& plan);
uint32_t feature_bits(const std::vector<std::string>& names);  // throws on a name it does not know
bool cpu_has_feature(const std::string& name);

}  // namespace deconvjit::detail
