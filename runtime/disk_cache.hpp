// The persistent kernel cache: compiled code, its plan and metadata in one file per key under a cache
// directory, so a later process loads the code instead of running the JIT. See docs/CACHE.md.
//
// Entry file (little-endian):  "DJITKERN" | u32 format | u32 meta_bytes | u64 code_bytes | u64 checksum
//                              | meta JSON | code
// The checksum (entry_checksum) covers the first 24 header bytes, the metadata and the code, so any torn,
// truncated or edited entry is rejected before a single byte of it is mapped executable.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "deconvjit/deconvjit.hpp"
#include "runtime/kernel_cache.hpp"

namespace deconvjit::detail {

constexpr uint32_t kDiskFormat = 1;
constexpr size_t kDiskHeaderBytes = 32;

// The hook compile() calls on an in-memory cache miss: load a valid entry from the options' cache
// directory, or build the kernel and store it there. Problems with the cache never fail the call.
KernelPtr build_or_load(const Problem& p, Isa isa, const Options& options);

// The directory `options` select: "" when the disk cache is disabled.
std::string disk_cache_dir(const Options& options);
// The cache key: canonical descriptor, ISA and tuning hints (the library version is checked, not keyed,
// so an upgrade rewrites entries in place instead of leaving the old ones behind).
std::string disk_key(const std::string& canonical, Isa isa, const TuningHints& hints);
std::string entry_file_name(const std::string& key);  // 16 hex digits of a hash of the key + ".djk"
uint64_t fnv1a64(const void* data, size_t bytes, uint64_t h = 14695981039346656037ull);
// The entry checksum over the first 24 header bytes and everything after the header.
uint64_t entry_checksum(const uint8_t* header24, const uint8_t* body, size_t bytes);

// What an entry is checked against: the caller's request, or for `cache verify` what the entry itself
// claims (then `key` must still hash to the file name).
struct EntryExpectation {
  Problem problem;
  Isa isa = Isa::avx2;
  TuningHints hints;
  std::string key;
};

// A fully validated entry, ready to map. `plan` is recomputed, never taken from the file.
struct ValidEntry {
  Plan plan;
  std::vector<uint8_t> code;
  std::array<std::vector<size_t>, 2> entries;
};

// Serialises a compiled kernel; `hints` are the ones it was planned with.
std::vector<uint8_t> encode_entry(const CompiledKernel& k, Isa isa, const TuningHints& hints,
                                  const std::string& key);
// Parses and checks everything (format, checksum, version, key, descriptor, ISA and CPU features, plan,
// code offsets) against `want`. Throws std::runtime_error naming the first problem.
ValidEntry validate_entry(const std::vector<uint8_t>& file, const EntryExpectation& want);
// The metadata of a checksummed entry, and the expectation it implies (for listing and verifying).
struct EntryClaims {
  std::string key, descriptor, isa, version, kernel_name;
  TuningHints hints;
  uint64_t code_size = 0;
};
EntryClaims read_claims(const std::vector<uint8_t>& file);            // throws on a malformed entry
EntryExpectation expectation_from_claims(const EntryClaims& claims);  // throws if they do not resolve

// The CPU features code for `isa` executes, by their GCC/cpuid names.
std::vector<std::string> required_features(Isa isa);
bool cpu_has_feature(const std::string& name);

}  // namespace deconvjit::detail
