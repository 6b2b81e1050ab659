// Encoding and validation of one on-disk cache entry (the format is described in disk_cache.hpp).
// Nothing here touches the file system: validation works on bytes already read, so the same checks serve
// loading, `deconvjit cache verify` and the tests.
#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "runtime/disk_cache.hpp"

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

[[noreturn]] void reject(const std::string& why) { throw std::runtime_error(why); }

template <typename T>
T load_le(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);  // x86-64 only: host order is little-endian
  return v;
}

template <typename T>
void store_le(std::vector<uint8_t>& out, T v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof v);
}

// Every hint is part of the key: two requests that differ in any hint may get different code. A new
// field in TuningHints must be added here and below; this tripwire makes sure it is not forgotten.
static_assert(sizeof(TuningHints) == 6 * sizeof(int) + 2 * sizeof(std::string) + 8,
              "TuningHints changed: add the new field to hints_json and hints_from_json");

Json hints_json(const TuningHints& h) {
  return Json{{"ur_w", h.ur_w},       {"oc_vectors", h.oc_vectors}, {"ic_unroll", h.ic_unroll},
              {"x_split", h.x_split}, {"algorithm", h.algorithm},   {"layout", h.layout},
              {"x_halo", h.x_halo},   {"ic_block", h.ic_block}};
}

TuningHints hints_from_json(const Json& j) {
  TuningHints h;
  h.ur_w = j.at("ur_w").get<int>();
  h.oc_vectors = j.at("oc_vectors").get<int>();
  h.ic_unroll = j.at("ic_unroll").get<int>();
  h.x_split = j.at("x_split").get<int>();
  h.algorithm = j.at("algorithm").get<std::string>();
  h.layout = j.at("layout").get<std::string>();
  h.x_halo = j.at("x_halo").get<int>();
  h.ic_block = j.at("ic_block").get<int>();
  return h;
}

// Header fields after the magic; sizes are checked against the file before anything else is read.
struct Header {
  uint32_t format = 0, meta_bytes = 0;
  uint64_t code_bytes = 0, checksum = 0;
};

Header check_header(const std::vector<uint8_t>& f) {
  if (f.size() < kDiskHeaderBytes) reject("truncated: " + std::to_string(f.size()) + " bytes, no header");
  if (std::memcmp(f.data(), kMagic, sizeof kMagic) != 0) reject("not a deconvjit cache entry (bad magic)");
  Header h;
  h.format = load_le<uint32_t>(f.data() + 8);
  h.meta_bytes = load_le<uint32_t>(f.data() + 12);
  h.code_bytes = load_le<uint64_t>(f.data() + 16);
  h.checksum = load_le<uint64_t>(f.data() + 24);
  if (h.format != kDiskFormat)
    reject("entry format " + std::to_string(h.format) + ", expected " + std::to_string(kDiskFormat));
  const uint64_t body = f.size() - kDiskHeaderBytes;
  if (h.code_bytes > body || h.meta_bytes != body - h.code_bytes)
    reject("truncated or padded: " + std::to_string(f.size()) + " bytes, header says " +
           std::to_string(kDiskHeaderBytes + uint64_t{h.meta_bytes} + h.code_bytes));
  if (entry_checksum(f.data(), f.data() + kDiskHeaderBytes, body) != h.checksum) reject("checksum mismatch (corrupted entry)");
  return h;
}

Json parse_meta(const std::vector<uint8_t>& f, const Header& h) {
  const char* p = reinterpret_cast<const char*>(f.data() + kDiskHeaderBytes);
  Json meta = Json::parse(p, p + h.meta_bytes, nullptr, /*allow_exceptions=*/false);
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

void check_isa(const Json& meta, const EntryExpectation& want) {
  const auto isa = field<std::string>(meta, "isa");
  if (isa != to_string(want.isa)) reject("entry is for ISA " + isa + ", expected " + to_string(want.isa));
  if (!isa_available(want.isa)) reject(std::string("this CPU lacks ISA ") + to_string(want.isa));
  const auto features = field<std::vector<std::string>>(meta, "cpu_features");
  for (const std::string& f : features)
    if (!cpu_has_feature(f)) reject("this CPU lacks feature " + f + " that the code needs");
  if (features != required_features(want.isa)) reject("cpu_features do not match ISA " + isa);
}

void check_identity(const Json& meta, const EntryExpectation& want) {
  const auto version = field<std::string>(meta, "library_version");
  if (version != deconvjit::version())
    reject("built by deconvjit " + version + ", this is " + deconvjit::version());
  if (field<std::string>(meta, "build_id") != DECONVJIT_BUILD_ID)
    reject("built by another build of deconvjit " + version + " (build id " +
           field<std::string>(meta, "build_id") + ", this is " + DECONVJIT_BUILD_ID + ")");
  check_isa(meta, want);
  if (field<std::string>(meta, "key") != want.key) reject("key does not match the requested kernel");
  if (field<std::string>(meta, "descriptor") != want.problem.canonical)
    reject("descriptor does not match the requested problem");
  if (!meta.contains("hints") || meta["hints"] != hints_json(want.hints))
    reject("tuning hints do not match");
}

std::vector<size_t> check_offsets(const Json& meta, int kind, const Plan& plan, uint64_t code_bytes) {
  std::vector<size_t> out;
  try {
    out = meta.at("entries").at(kind).get<std::vector<size_t>>();
  } catch (const Json::exception&) {
    reject("metadata field 'entries' is missing or malformed");
  }
  // A row family emits one function per block width; depthwise_x one per block kind.
  const size_t want = plan.algorithm == Algorithm::depthwise_x ? 1 : static_cast<size_t>(plan.ur_w);
  if (out.size() != want)
    reject("entries[" + std::to_string(kind) + "] has " + std::to_string(out.size()) +
           " functions, the plan needs " + std::to_string(want));
  for (size_t off : out)
    if (off >= code_bytes) reject("entry offset " + std::to_string(off) + " lies outside the code");
  return out;
}

}  // namespace

uint64_t fnv1a64(const void* data, size_t bytes, uint64_t h) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// Byte-wise FNV-1a runs at about one byte per multiply latency, which would dominate loading a large
// kernel; four independent word lanes are ~10x faster. Every step (xor, odd multiply, rotate) is a
// bijection of the lane, so any change to a single word always changes the result.
uint64_t entry_checksum(const uint8_t* header24, const uint8_t* body, size_t bytes) {
  constexpr uint64_t kPrime = 0x100000001B3ull * 0x9E3779B97F4A7C15ull | 1;
  uint64_t lane[4];
  for (int i = 0; i < 4; ++i) lane[i] = fnv1a64(header24, 24) + static_cast<uint64_t>(i) * kPrime;
  size_t i = 0;
  for (; i + 32 <= bytes; i += 32) {
    for (int l = 0; l < 4; ++l) {
      uint64_t w;
      std::memcpy(&w, body + i + 8 * l, 8);
      const uint64_t x = (lane[l] ^ w) * kPrime;
      lane[l] = (x << 31) | (x >> 33);
    }
  }
  uint64_t h = fnv1a64(lane, sizeof lane);
  h = fnv1a64(body + i, bytes - i, h);
  return fnv1a64(&bytes, sizeof bytes, h);
}

std::string disk_key(const std::string& canonical, Isa isa, const TuningHints& hints) {
  return canonical + '|' + to_string(isa) + '|' + hints_json(hints).dump();
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

bool cpu_has_feature(const std::string& name) {
  // __builtin_cpu_supports needs a literal, hence the chain.
  if (name == "avx2") return __builtin_cpu_supports("avx2");
  if (name == "fma") return __builtin_cpu_supports("fma");
  if (name == "avx512f") return __builtin_cpu_supports("avx512f");
  if (name == "avx512bw") return __builtin_cpu_supports("avx512bw");
  if (name == "avx512vl") return __builtin_cpu_supports("avx512vl");
  if (name == "avx512dq") return __builtin_cpu_supports("avx512dq");
  return false;  // a feature this library does not know cannot be vouched for
}

std::vector<uint8_t> encode_entry(const CompiledKernel& k, Isa isa, const TuningHints& hints,
                                  const std::string& key) {
  const uint8_t* code = k.code->data();
  nlohmann::ordered_json meta;
  meta["format"] = kDiskFormat;
  meta["key"] = key;
  meta["descriptor"] = k.problem.canonical;
  meta["isa"] = to_string(isa);
  meta["library_version"] = deconvjit::version();
  meta["build_id"] = DECONVJIT_BUILD_ID;
  meta["cpu_features"] = required_features(isa);
  meta["hints"] = hints_json(hints);
  meta["kernel"] = k.plan.name;
  meta["plan"] = k.plan.to_json();  // a string, so checking it needs no second parse
  meta["code_size"] = k.code->size();
  for (int kind = 0; kind < 2; ++kind) {
    std::vector<size_t> offsets;
    for (jit::KernelFn fn : k.fns[kind])
      offsets.push_back(static_cast<size_t>(reinterpret_cast<const uint8_t*>(fn) - code));
    meta["entries"].push_back(offsets);
  }
  const std::string text = meta.dump();

  std::vector<uint8_t> out(kMagic, kMagic + sizeof kMagic);
  store_le<uint32_t>(out, kDiskFormat);
  store_le<uint32_t>(out, static_cast<uint32_t>(text.size()));
  store_le<uint64_t>(out, k.code->size());
  store_le<uint64_t>(out, 0);  // checksum, filled in below
  out.insert(out.end(), text.begin(), text.end());
  out.insert(out.end(), code, code + k.code->size());
  const uint64_t sum = entry_checksum(out.data(), out.data() + kDiskHeaderBytes, out.size() - kDiskHeaderBytes);
  std::memcpy(out.data() + 24, &sum, sizeof sum);
  return out;
}

ValidEntry validate_entry(const std::vector<uint8_t>& file, const EntryExpectation& want) {
  const Header h = check_header(file);
  const Json meta = parse_meta(file, h);
  if (field<uint32_t>(meta, "format") != kDiskFormat) reject("metadata format does not match the header");
  check_identity(meta, want);
  ValidEntry v;
  // The stored plan is only compared: the kernel runs with the plan this library makes now, and the code
  // is trusted only when that plan is the one it was generated from.
  v.plan = make_plan(want.problem, want.isa, want.hints);
  if (field<std::string>(meta, "plan") != v.plan.to_json())
    reject("stored plan differs from the plan this library makes for the problem");
  if (field<std::string>(meta, "kernel") != v.plan.name) reject("kernel name does not match the plan");
  if (field<uint64_t>(meta, "code_size") != h.code_bytes) reject("code_size does not match the header");
  if (h.code_bytes == 0) reject("entry holds no code");
  for (int kind = 0; kind < 2; ++kind) v.entries[kind] = check_offsets(meta, kind, v.plan, h.code_bytes);
  const uint8_t* code = file.data() + kDiskHeaderBytes + h.meta_bytes;
  v.code.assign(code, code + h.code_bytes);
  return v;
}

EntryClaims read_claims(const std::vector<uint8_t>& file) {
  const Header h = check_header(file);
  const Json meta = parse_meta(file, h);
  EntryClaims c;
  c.key = field<std::string>(meta, "key");
  c.descriptor = field<std::string>(meta, "descriptor");
  c.isa = field<std::string>(meta, "isa");
  c.version = field<std::string>(meta, "library_version");
  c.kernel_name = field<std::string>(meta, "kernel");
  c.code_size = h.code_bytes;
  try {
    c.hints = hints_from_json(meta.at("hints"));
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
  return want;
}

}  // namespace deconvjit::detail
