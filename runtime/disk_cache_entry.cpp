// Encoding and validation of one on-disk cache entry (the format is described in disk_cache.hpp).
// Nothing here touches the file system: validation works on bytes already read or mapped, so the same
// checks serve loading, `deconvjit cache verify` and the tests.
#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "runtime/cpu.hpp"
#include "runtime/disk_cache.hpp"
#include "runtime/hints.hpp"
#include "runtime/json_limits.hpp"

// Released builds are told apart by version(). During development the code generator changes while the
// version stays, so the build may generate a fingerprint of its sources (cmake/deconvjit_build_id.cmake)
// and entries from any other build are then rejected too.
#if __has_include("deconvjit_build_id.hpp")
#include "deconvjit_build_id.hpp"
#endif
#ifndef DECONVJIT_BUILD_ID
#define DECONVJIT_BUILD_ID ""
#endif

namespace deconvjit::detail {
namespace {

using Json = nlohmann::json;
constexpr char kMagic[8] = {'D', 'J', 'I', 'T', 'K', 'E', 'R', 'N'};
constexpr uint64_t kFrontSeed = 0x46524f4e54ull, kCodeSeed = 0x434f4445ull;  // "FRONT", "CODE"
constexpr const char* kFeatureNames[] = {"avx2",     "fma",      "avx512f",    "avx512bw",
                                         "avx512vl", "avx512dq", "avx512_bf16"};
constexpr uint32_t kFeatureCount = sizeof kFeatureNames / sizeof kFeatureNames[0];

[[noreturn]] void reject(const std::string& why) { throw std::runtime_error(why); }

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : " ") + n;
  return out;
}

template <typename T>
T load_le(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);  // x86-64 only: host order is little-endian
  return v;
}

template <typename T>
void store_le(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof v);
}

uint32_t isa_code(Isa isa) { return isa == Isa::avx2 ? 1 : isa == Isa::avx512_core ? 2 : 0; }
std::string isa_code_name(uint32_t code) {
  return code == 1 ? "avx2" : code == 2 ? "avx512_core" : "#" + std::to_string(code);
}

uint32_t cpu_feature_bits() {
  static const uint32_t bits = [] {
    uint32_t b = 0;
    for (uint32_t i = 0; i < kFeatureCount; ++i)
      if (cpu_has_feature(kFeatureNames[i])) b |= 1u << i;
    return b;
  }();
  return bits;
}

std::vector<std::string> feature_names(uint32_t bits) {
  std::vector<std::string> out;
  for (uint32_t i = 0; i < 32; ++i)
    if (bits >> i & 1) out.push_back(i < kFeatureCount ? kFeatureNames[i] : "#" + std::to_string(i));
  return out;
}

uint32_t required_bits(Isa isa) {
  static const uint32_t avx2 = feature_bits(required_features(Isa::avx2));
  static const uint32_t avx512 = feature_bits(required_features(Isa::avx512_core));
  return isa == Isa::avx512_core ? avx512 : avx2;
}

void check_isa(const EntryView& v, Isa want) {
  if (v.isa != isa_code(want))
    reject("entry is for ISA " + isa_code_name(v.isa) + ", expected " + to_string(want));
  if (!isa_available(want)) reject(std::string("this CPU lacks ISA ") + to_string(want));
  if (const uint32_t missing = v.features & ~cpu_feature_bits())
    reject("this CPU lacks feature " + feature_names(missing).front() + " that the code needs");
  // Under an AVX-512 cap the plan may choose AVX2 code (runtime/plan_isa.cpp): every kernel needs AVX2's
  // features, and check_entry compares the rest with the plan made here.
  if ((v.features & required_bits(Isa::avx2)) != required_bits(Isa::avx2))
    reject("cpu_features do not match ISA " + std::string(to_string(want)));
}

void check_identity(const EntryView& v, const EntryExpectation& want) {
  if (v.version != deconvjit::version())
    reject("built by deconvjit " + std::string(v.version) + ", this is " + deconvjit::version());
  if (v.build_id != DECONVJIT_BUILD_ID)
    reject("built by another build of deconvjit " + std::string(v.version) + " (build id " +
           std::string(v.build_id) + ", this is " + DECONVJIT_BUILD_ID + ")");
  check_isa(v, want.isa);
  // The key holds the canonical descriptor, the ISA and every hint: equal keys mean the same request.
  if (v.key != want.key) reject("key does not match the requested kernel");
}

// The functions the emitter makes per block kind, which the executor indexes without checking.
uint32_t functions_per_kind(const Plan& plan) { return static_cast<uint32_t>(plan.functions_per_kind()); }

std::vector<size_t> check_offsets(const EntryView& v, int kind, const Plan& plan) {
  if (v.entry_count[kind] != functions_per_kind(plan))
    reject("entries[" + std::to_string(kind) + "] has " + std::to_string(v.entry_count[kind]) +
           " functions, the plan needs " + std::to_string(functions_per_kind(plan)));
  std::vector<size_t> out(v.entry_count[kind]);
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = load_le<uint32_t>(v.entries[kind] + 4 * i);
    if (out[i] >= v.code_bytes) reject("entry offset " + std::to_string(out[i]) + " lies outside the code");
  }
  return out;
}

uint64_t round_up(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

Json parse_meta(std::string_view text) {
  Json meta;
  std::string error;
  if (!parse_json(text, meta, error)) reject("metadata is not a JSON object: " + error);
  if (!meta.is_object()) reject("metadata is not a JSON object");
  return meta;
}

template <typename T>
T field(const Json& meta, const char* name) {
  try {
    return meta.at(name).get<T>();
  } catch (const Json::exception&) {
    reject(std::string("metadata field '") + name + "' is missing or has the wrong type");
  }
}

// The metadata is what `cache ls` shows; an entry whose metadata disagrees with what the loader reads
// would be listed as something it is not.
void check_meta_agrees(const Json& meta, const EntryParts& p) {
  auto agree = [](bool same, const char* what) {
    if (!same) reject(std::string("metadata disagrees with the header: ") + what);
  };
  agree(field<uint32_t>(meta, "format") == kDiskFormat, "format");
  agree(field<std::string>(meta, "key") == p.key, "key");
  agree(field<std::string>(meta, "library_version") == p.version, "library_version");
  agree(field<std::string>(meta, "build_id") == p.build_id, "build_id");
  agree(field<std::string>(meta, "isa") == isa_code_name(p.isa), "isa");
  agree(field<std::vector<std::string>>(meta, "cpu_features") == feature_names(p.features), "cpu_features");
  agree(field<std::string>(meta, "kernel") == p.kernel, "kernel");
  agree(field<uint64_t>(meta, "code_size") == p.code.size(), "code_size");
}

}  // namespace

uint64_t fnv1a64(const void* data, size_t bytes, uint64_t h) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// Byte-wise FNV-1a runs at about one byte per multiply latency, which would dominate loading a large
// kernel; four independent word lanes are ~10x faster (~25 bytes/ns here). Every step (xor, odd multiply,
// rotate) is a bijection of the lane, so any change to a single word always changes the result.
uint64_t entry_hash(const uint8_t* data, size_t bytes, uint64_t seed) {
  constexpr uint64_t kPrime = 0x100000001B3ull * 0x9E3779B97F4A7C15ull | 1;
  uint64_t lane[4];
  for (int i = 0; i < 4; ++i) lane[i] = fnv1a64(&seed, sizeof seed) + static_cast<uint64_t>(i) * kPrime;
  size_t i = 0;
  for (; i + 32 <= bytes; i += 32) {
    for (int l = 0; l < 4; ++l) {
      const uint64_t x = (lane[l] ^ load_le<uint64_t>(data + i + 8 * l)) * kPrime;
      lane[l] = (x << 31) | (x >> 33);
    }
  }
  uint64_t h = fnv1a64(lane, sizeof lane);
  h = fnv1a64(data + i, bytes - i, h);
  return fnv1a64(&bytes, sizeof bytes, h);
}

uint64_t code_checksum(const uint8_t* code, size_t bytes) { return entry_hash(code, bytes, kCodeSeed); }

constexpr const char* kYmmRateMark = "@ymm_rate";

// The plan under an AVX-512 cap depends on whether the CPU runs AVX-512 at the AVX2 rate (plan_isa.cpp), so
// such CPUs keep their entries apart: a cache shared with another CPU is not rewritten back and forth.
std::string disk_key(const std::string& canonical, Isa isa, const TuningHints& hints) {
  const bool ymm_rate = isa == Isa::avx512_core && cpu_zmm_at_ymm_rate();
  return canonical + '|' + to_string(isa) + (ymm_rate ? kYmmRateMark : "") + '|' + hints_key_text(hints);
}

std::string entry_file_name(const std::string& key) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(fnv1a64(key.data(), key.size())));
  return std::string(hex) + ".djk";
}

std::vector<std::string> required_features(Isa isa) {
  if (isa == Isa::avx512_core) return {"avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq"};
  return {"avx2", "fma"};
}

std::vector<std::string> plan_features(const Plan& plan) {
  std::vector<std::string> f = required_features(plan.isa);
  if (plan.ic_pairs || plan.bf16_vcvt) f.push_back("avx512_bf16");
  return f;
}

uint32_t feature_bits(const std::vector<std::string>& names) {
  uint32_t bits = 0;
  for (const std::string& n : names) {
    uint32_t i = 0;
    while (i < kFeatureCount && n != kFeatureNames[i]) ++i;
    if (i == kFeatureCount) reject("unknown CPU feature " + n);
    bits |= 1u << i;
  }
  return bits;
}

bool cpu_has_feature(const std::string& name) {
  // __builtin_cpu_supports needs a literal, hence the chain.
  if (name == "avx2") return __builtin_cpu_supports("avx2");
  if (name == "fma") return __builtin_cpu_supports("fma");
  if (name == "avx512f") return __builtin_cpu_supports("avx512f");
  if (name == "avx512bw") return __builtin_cpu_supports("avx512bw");
  if (name == "avx512vl") return __builtin_cpu_supports("avx512vl");
  if (name == "avx512dq") return __builtin_cpu_supports("avx512dq");
  if (name == "avx512_bf16") return cpu_has_avx512_bf16();
  return false;  // a feature this library does not know cannot be vouched for
}

bool build_has_id() { return DECONVJIT_BUILD_ID[0] != '\0'; }
uint64_t plan_hash(const Plan& plan) {
  const std::string text = plan.to_json();
  return fnv1a64(text.data(), text.size());
}

uint64_t entry_front_bytes(const uint8_t* h, size_t n, uint64_t file_bytes) {
  const std::string size = std::to_string(file_bytes) + " bytes";
  if (file_bytes < 16 || n < 16) reject("truncated: " + size + ", no header");
  if (std::memcmp(h, kMagic, sizeof kMagic) != 0) reject("not a deconvjit cache entry (bad magic)");
  if (const uint32_t format = load_le<uint32_t>(h + 8); format != kDiskFormat)
    reject("entry format " + std::to_string(format) + " (another format version), expected " +
           std::to_string(kDiskFormat));
  if (file_bytes < kDiskHeaderBytes || n < kDiskHeaderBytes) reject("truncated: " + size + ", no header");
  if (load_le<uint32_t>(h + 12) != kDiskHeaderBytes) reject("unexpected header size");
  const uint64_t offset = load_le<uint64_t>(h + 32), code = load_le<uint64_t>(h + 40);
  // Checked before anything is read at the offset: a bad offset or size can never reach past the file.
  if (code > file_bytes || offset != file_bytes - code)
    reject("truncated or padded: " + size + ", header says " + std::to_string(code) + " bytes of code at " +
           std::to_string(offset));
  if (offset % kDiskCodeAlign != 0 || offset == 0 || offset > kDiskMaxFront)
    reject("code offset " + std::to_string(offset) + " is not a page boundary within the first MiB");
  return offset;
}

EntryView parse_entry_front(const uint8_t* f, uint64_t file_bytes) {
  EntryView v;
  v.code_offset = entry_front_bytes(f, kDiskHeaderBytes, file_bytes);
  if (entry_hash(f + 24, v.code_offset - 24, kFrontSeed) != load_le<uint64_t>(f + 16))
    reject("checksum mismatch (corrupted entry)");
  v.code_sum = load_le<uint64_t>(f + 24);
  v.code_bytes = load_le<uint64_t>(f + 40);
  v.plan_sum = load_le<uint64_t>(f + 48);
  v.isa = load_le<uint32_t>(f + 56);
  v.features = load_le<uint32_t>(f + 60);
  uint64_t at = kDiskHeaderBytes;
  auto take = [&](uint64_t bytes) {  // u32 lengths summed in u64 cannot wrap
    if (at + bytes > v.code_offset) reject("sections overrun the code offset");
    const uint8_t* p = f + at;
    at += bytes;
    return p;
  };
  auto text = [&](int field) {
    const uint32_t n = load_le<uint32_t>(f + 64 + 4 * field);
    return std::string_view(reinterpret_cast<const char*>(take(n)), n);
  };
  v.key = text(0);
  v.version = text(1);
  v.build_id = text(2);
  v.kernel = text(3);
  for (int kind = 0; kind < 2; ++kind) {
    v.entry_count[kind] = load_le<uint32_t>(f + 80 + 4 * kind);
    v.entries[kind] = take(4 * uint64_t{v.entry_count[kind]});
  }
  const uint32_t meta = load_le<uint32_t>(f + 88);
  v.meta = std::string_view(reinterpret_cast<const char*>(take(meta)), meta);
  return v;
}

ValidEntry check_entry(const EntryView& v, const EntryExpectation& want, bool compare_plan_hash) {
  check_identity(v, want);
  ValidEntry out;
  // The kernel runs with the plan this library makes now, and the code is trusted only when that plan
  // is the one it was generated from.
  out.plan = make_plan(want.problem, want.isa, want.hints);
  if (v.kernel != out.plan.name) reject("kernel name does not match the plan (a stale plan)");
  // The plan reads the CPU beyond the ISA (avx512_bf16): code made on another CPU may differ, or not run.
  if (v.features != feature_bits(plan_features(out.plan)))
    reject("compiled for CPU features " + join(feature_names(v.features)) + ", the plan here needs " +
           join(plan_features(out.plan)));
  if (compare_plan_hash && v.plan_sum != plan_hash(out.plan))
    reject("stored plan differs from the plan this library makes for the problem");
  if (v.code_bytes == 0) reject("entry holds no code");
  for (int kind = 0; kind < 2; ++kind) out.entries[kind] = check_offsets(v, kind, out.plan);
  return out;
}

std::vector<uint8_t> encode_parts(const EntryParts& p) {
  const std::string_view texts[] = {p.key, p.version, p.build_id, p.kernel};
  uint64_t front = kDiskHeaderBytes + p.meta.size() + 4 * (p.entries[0].size() + p.entries[1].size());
  for (std::string_view t : texts) front += t.size();
  const uint64_t offset = round_up(front, kDiskCodeAlign);
  std::vector<uint8_t> out(offset + p.code.size(), 0);
  uint8_t* f = out.data();
  std::memcpy(f, kMagic, sizeof kMagic);
  store_le<uint32_t>(f + 8, kDiskFormat);
  store_le<uint32_t>(f + 12, kDiskHeaderBytes);
  store_le<uint64_t>(f + 32, offset);
  store_le<uint64_t>(f + 40, p.code.size());
  store_le<uint64_t>(f + 48, p.plan_sum);
  store_le<uint32_t>(f + 56, p.isa);
  store_le<uint32_t>(f + 60, p.features);
  uint64_t at = kDiskHeaderBytes;
  auto put = [&](const void* data, size_t bytes) {
    if (bytes) std::memcpy(f + at, data, bytes);
    at += bytes;
  };
  for (int i = 0; i < 4; ++i) {
    store_le<uint32_t>(f + 64 + 4 * i, static_cast<uint32_t>(texts[i].size()));
    put(texts[i].data(), texts[i].size());
  }
  for (int kind = 0; kind < 2; ++kind) {
    store_le<uint32_t>(f + 80 + 4 * kind, static_cast<uint32_t>(p.entries[kind].size()));
    put(p.entries[kind].data(), 4 * p.entries[kind].size());
  }
  store_le<uint32_t>(f + 88, static_cast<uint32_t>(p.meta.size()));
  put(p.meta.data(), p.meta.size());
  if (!p.code.empty()) std::memcpy(f + offset, p.code.data(), p.code.size());
  seal_entry(out);
  return out;
}

void seal_entry(std::vector<uint8_t>& file) {
  const uint64_t offset = entry_front_bytes(file.data(), file.size(), file.size());
  uint8_t* f = file.data();
  store_le<uint64_t>(f + 24, code_checksum(f + offset, file.size() - offset));
  store_le<uint64_t>(f + 16, entry_hash(f + 24, offset - 24, kFrontSeed));
}

EntryParts decode_entry(const std::vector<uint8_t>& file) {
  const EntryView v = parse_entry_front(file.data(), file.size());
  const uint8_t* code = file.data() + v.code_offset;
  if (code_checksum(code, v.code_bytes) != v.code_sum) reject("checksum mismatch (corrupted code)");
  EntryParts p;
  p.isa = v.isa;
  p.features = v.features;
  p.plan_sum = v.plan_sum;
  p.key = v.key;
  p.version = v.version;
  p.build_id = v.build_id;
  p.kernel = v.kernel;
  p.meta = v.meta;
  for (int kind = 0; kind < 2; ++kind)
    for (uint32_t i = 0; i < v.entry_count[kind]; ++i)
      p.entries[kind].push_back(load_le<uint32_t>(v.entries[kind] + 4 * i));
  p.code.assign(code, code + v.code_bytes);
  return p;
}

std::vector<uint8_t> encode_entry(const CompiledKernel& k, Isa isa, const TuningHints& hints,
                                  const std::string& key) {
  EntryParts p;
  p.isa = isa_code(isa);
  p.features = feature_bits(plan_features(k.plan));
  p.plan_sum = plan_hash(k.plan);
  p.key = key;
  p.version = deconvjit::version();
  p.build_id = DECONVJIT_BUILD_ID;
  p.kernel = k.plan.name;
  p.code.assign(k.code->data(), k.code->data() + k.code->size());
  for (int kind = 0; kind < 2; ++kind)
    for (jit::KernelFn fn : k.fns[kind])
      p.entries[kind].push_back(static_cast<uint32_t>(reinterpret_cast<const uint8_t*>(fn) - k.code->data()));
  nlohmann::ordered_json meta;
  meta["format"] = kDiskFormat;
  meta["key"] = key;
  meta["descriptor"] = k.problem.canonical;
  meta["isa"] = to_string(isa);
  meta["library_version"] = p.version;
  meta["build_id"] = p.build_id;
  meta["cpu_features"] = plan_features(k.plan);
  meta["hints"] = Json::parse(to_json(hints));  // only the fields that are set
  meta["kernel"] = k.plan.name;
  meta["plan"] = k.plan.to_json();  // for people; the loader compares the header's plan hash
  meta["code_size"] = p.code.size();
  meta["entries"] = p.entries;
  p.meta = meta.dump();
  return encode_parts(p);
}

void verify_entry(const std::vector<uint8_t>& file, const EntryExpectation& want) {
  const EntryParts parts = decode_entry(file);
  check_meta_agrees(parse_meta(parts.meta), parts);
  check_entry(parse_entry_front(file.data(), file.size()), want, !build_has_id());
}

EntryClaims read_claims(const std::vector<uint8_t>& file) {
  const EntryParts parts = decode_entry(file);
  const Json meta = parse_meta(parts.meta);
  EntryClaims c;
  c.key = field<std::string>(meta, "key");
  c.descriptor = field<std::string>(meta, "descriptor");
  c.isa = field<std::string>(meta, "isa");
  c.version = field<std::string>(meta, "library_version");
  c.kernel_name = field<std::string>(meta, "kernel");
  c.code_size = parts.code.size();
  try {
    c.hints = hints_from_json(meta.at("hints").dump());
  } catch (const Json::exception&) {
    reject("metadata field 'hints' is missing or malformed");
  }
  return c;
}

EntryExpectation expectation_from_claims(const EntryClaims& c) {
  EntryExpectation want;
  want.problem = resolve(descriptor_from_json(c.descriptor));
  want.isa = isa_from_string(c.isa);
  if (want.isa == Isa::best) reject("entry names no concrete ISA");
  want.hints = c.hints;
  want.key = disk_key(want.problem.canonical, want.isa, want.hints);
  // An entry of a shared cache made on the other kind of AVX-512 CPU (disk_key): not corrupt, not for here.
  const bool here = want.key.find(kYmmRateMark) != std::string::npos;
  if (c.key != want.key && (c.key.find(kYmmRateMark) != std::string::npos) != here)
    reject(std::string("made for a CPU that runs AVX-512 ") + (here ? "at its full rate" : "at the AVX2 rate") +
           ", which plans differently: not used on this one");
  return want;
}

}  // namespace deconvjit::detail
