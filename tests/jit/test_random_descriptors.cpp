// Randomized descriptors against the double-precision reference, per ISA.
//
// random_descriptor() varies every parameter (rank 1-3, groups and depthwise, strides, dilations, kernels
// smaller than the stride, negative pads, output_padding >= stride, output_shape under every auto_pad,
// NCX/NXC, OIX/XIO/GOIX, odd channel counts, batch). Each shard draws its descriptors from its own fixed
// seed, so a failure names (ISA, shard, index) and reproduces with --gtest_filter on that shard. The
// problems are kept small (a few thousand MACs) so that thousands of them run in well under a minute.
//
// A second family of shards draws random TuningHints for each descriptor: a hint the plan cannot honour
// must be rejected with Error(InvalidArgument), and every accepted one must still be exact.
//
// bf16 and f16 (src, weights, dst in that type, f32 sums) run the small and larger families too, with a
// third of the f32 count each: their kernels share the f32 planner and emitters and differ only in loads,
// stores and packing, so a third keeps the suite fast and still draws every kind of problem hundreds of
// times. f16 sums (avx512_fp16 only) run a smaller family whose sums are short enough for the bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <optional>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deconvjit/deconvjit.hpp"
#include "runtime/tolerance.hpp"
#include "support/no_disk_cache.hpp"
#include "support/deconv_tester.hpp"

namespace deconvjit {
namespace {

using testing::DeconvTester;
using testing::random_descriptor;

constexpr int kShards = 8;              // per ISA; ctest runs each shard as its own test
constexpr int kPerShard = 300;          // 8 x 300 = 2400 small descriptors per ISA
constexpr int kLargeShards = 2;
constexpr int kLargePerShard = 400;     // 800 larger ones per ISA: several register blocks per row
constexpr int kHintShards = 2;
constexpr int kHintsPerShard = 200;     // 400 hinted descriptors per ISA
constexpr int kStopAfterFailures = 10;  // one bug should not bury the log
constexpr int kHalfPerShard = kPerShard / 3;           // bf16, f16: 8 x 100 per ISA and type
constexpr int kHalfLargePerShard = kLargePerShard / 3;  // 2 x 133
constexpr int kHalfSumShards = 2;
constexpr int kHalfSumsPerShard = 100;

// Failed assertions so far in the running test (HasFailure() stays true after the first one).
int failed_parts() {
  const ::testing::TestResult* r = ::testing::UnitTest::GetInstance()->current_test_info()->result();
  int n = 0;
  for (int i = 0; i < r->total_part_count(); ++i) n += r->GetTestPartResult(i).failed();
  return n;
}

using testing::NoDiskCache;

struct ShardParam {
  Isa isa;
  int shard;
};

// Readable parameter values in test listings (ctest shows them next to each test name).
void PrintTo(const ShardParam& p, std::ostream* os) { *os << to_string(p.isa) << " shard " << p.shard; }

std::string shard_name(const ::testing::TestParamInfo<ShardParam>& info) {
  return std::string(to_string(info.param.isa)) + "_shard" + std::to_string(info.param.shard);
}

std::vector<ShardParam> shards(int n) {
  std::vector<ShardParam> v;
  for (Isa isa : {Isa::avx512_core, Isa::avx2})
    for (int s = 0; s < n; ++s) v.push_back({isa, s});
  return v;
}

uint32_t shard_seed(const ShardParam& p, uint32_t family) {
  return family * 1000003u + (p.isa == Isa::avx512_core ? 7919u : 104729u) * 31u + static_cast<uint32_t>(p.shard);
}

class RandomDescriptors : public ::testing::TestWithParam<ShardParam> {
 protected:
  void SetUp() override {
    if (!isa_available(GetParam().isa))
      GTEST_SKIP() << "ISA " << to_string(GetParam().isa) << " is not available on this CPU";
  }
  NoDiskCache no_disk_cache_;
};

TEST_P(RandomDescriptors, MatchReference) {
  const ShardParam& param = GetParam();
  std::mt19937 rng(shard_seed(param, 1));
  int failures = 0;
  for (int i = 0; i < kPerShard && failures < kStopAfterFailures; ++i) {
    const Descriptor d = random_descriptor(rng);
    SCOPED_TRACE("shard " + std::to_string(param.shard) + " descriptor #" + std::to_string(i) + ": " +
                 to_json(d));
    const int before = failed_parts();
    DeconvTester(d).isa(param.isa).seed(static_cast<uint64_t>(i) + 1).Test();
    if (failed_parts() > before) ++failures;
  }
}

INSTANTIATE_TEST_SUITE_P(Shards, RandomDescriptors, ::testing::ValuesIn(shards(kShards)), shard_name);

// Up to 25x more work per problem: full register blocks repeated along a row, several channel blocks,
// longer reductions (still serial: far below the executor's parallel threshold).
class LargerRandomDescriptors : public RandomDescriptors {};

TEST_P(LargerRandomDescriptors, MatchReference) {
  const ShardParam& param = GetParam();
  std::mt19937 rng(shard_seed(param, 3));
  testing::RandomLimits limits;
  limits.max_macs = 100000;
  limits.max_dst_elements = 40000;
  int failures = 0;
  for (int i = 0; i < kLargePerShard && failures < kStopAfterFailures; ++i) {
    const Descriptor d = random_descriptor(rng, limits);
    SCOPED_TRACE("shard " + std::to_string(param.shard) + " descriptor #" + std::to_string(i) + ": " +
                 to_json(d));
    const int before = failed_parts();
    DeconvTester(d).isa(param.isa).seed(static_cast<uint64_t>(i) + 3).use_cache(false).Test();
    if (failed_parts() > before) ++failures;
  }
}

INSTANTIATE_TEST_SUITE_P(Shards, LargerRandomDescriptors, ::testing::ValuesIn(shards(kLargeShards)),
                         shard_name);

// ---- 16-bit types ----------------------------------------------------------------------------------------

struct TypedShard {
  Isa isa;
  DType dtype, accumulation;
  int shard;
};

void PrintTo(const TypedShard& p, std::ostream* os) {
  *os << to_string(p.isa) << " " << to_string(p.dtype) << " (" << to_string(p.accumulation) << " sums) shard "
      << p.shard;
}

std::string typed_shard_name(const ::testing::TestParamInfo<TypedShard>& info) {
  const TypedShard& p = info.param;
  return std::string(to_string(p.isa)) + "_" + to_string(p.dtype) +
         (p.accumulation == DType::f32 ? "" : std::string("_") + to_string(p.accumulation) + "sums") + "_shard" +
         std::to_string(p.shard);
}

std::vector<TypedShard> typed_shards(int n) {
  std::vector<TypedShard> v;
  for (DType t : {DType::bf16, DType::f16})
    for (Isa isa : {Isa::avx512_core, Isa::avx2})
      for (int s = 0; s < n; ++s) v.push_back({isa, t, DType::f32, s});
  return v;
}

// Draws its own descriptors (other seeds than the f32 shards'), so the types together cover more shapes.
uint32_t typed_seed(const TypedShard& p, uint32_t family) {
  const uint32_t type = p.dtype == DType::bf16 ? 11u : p.accumulation == DType::f16 ? 17u : 13u;
  return shard_seed({p.isa, p.shard}, family) * type + 1u;
}

class TypedRandomDescriptors : public ::testing::TestWithParam<TypedShard> {
 protected:
  void SetUp() override {
    const TypedShard& p = GetParam();
    if (!isa_available(p.isa)) GTEST_SKIP() << "ISA " << to_string(p.isa) << " is not available on this CPU";
    if (p.accumulation == DType::f16 && !testing::cpu_has_avx512_fp16())
      GTEST_SKIP() << "f16 accumulation needs avx512_fp16, which this CPU lacks";
    if (auto why = testing::unsupported_types(p.isa, p.dtype, p.accumulation)) GTEST_SKIP() << "compile: " << *why;
  }
  // Tests `count` descriptors drawn within `limits`, skipping those `skip` rejects.
  void run(uint32_t family, int count, const testing::RandomLimits& limits,
           const std::function<bool(const Problem&)>& skip = {}) {
    const TypedShard& param = GetParam();
    std::mt19937 rng(typed_seed(param, family));
    int failures = 0;
    for (int i = 0; i < count && failures < kStopAfterFailures; ++i) {
      const Descriptor d = random_descriptor(rng, limits);
      if (skip && skip(resolve(d))) continue;
      SCOPED_TRACE(std::string(to_string(param.dtype)) + " shard " + std::to_string(param.shard) + " descriptor #" +
                   std::to_string(i) + ": " + to_json(d));
      const int before = failed_parts();
      DeconvTester(d).isa(param.isa).dtype(param.dtype).accumulation(param.accumulation)
          .seed(static_cast<uint64_t>(i) + family).use_cache(false).Test();
      if (failed_parts() > before) ++failures;
    }
  }
  NoDiskCache no_disk_cache_;
};

TEST_P(TypedRandomDescriptors, MatchReference) { run(1, kHalfPerShard, {}); }

INSTANTIATE_TEST_SUITE_P(Shards, TypedRandomDescriptors, ::testing::ValuesIn(typed_shards(kShards)),
                         typed_shard_name);

class TypedLargerRandomDescriptors : public TypedRandomDescriptors {};

TEST_P(TypedLargerRandomDescriptors, MatchReference) {
  testing::RandomLimits limits;
  limits.max_macs = 100000;
  limits.max_dst_elements = 40000;
  run(3, kHalfLargePerShard, limits);
}

INSTANTIATE_TEST_SUITE_P(Shards, TypedLargerRandomDescriptors, ::testing::ValuesIn(typed_shards(kLargeShards)),
                         typed_shard_name);

// f16 data with f16 sums (AVX-512 with avx512_fp16 only). The bound gamma(n) needs n * 2^-11 < 1 to say
// anything (runtime/tolerance.hpp); sums of more than 512 terms (n*u > 1/4) are left out so that every
// problem tested is held to a bound well below its magnitudes.
class HalfSumRandomDescriptors : public TypedRandomDescriptors {};

TEST_P(HalfSumRandomDescriptors, MatchReference) {
  run(5, kHalfSumsPerShard, {}, [](const Problem& p) { return verify::dot_length(p) > 512; });
}

std::vector<TypedShard> half_sum_shards() {
  std::vector<TypedShard> v;
  for (int s = 0; s < kHalfSumShards; ++s) v.push_back({Isa::avx512_core, DType::f16, DType::f16, s});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Shards, HalfSumRandomDescriptors, ::testing::ValuesIn(half_sum_shards()),
                         typed_shard_name);

// The property the shards check holds only for the family they draw from: every descriptor of it must be
// valid, and the family must contain every kind the library accepts. This pins the generator down, so
// a change that silently stops drawing (say) 1D NCX problems with output_shape under same_lower fails here.
TEST(RandomDescriptorFamily, IsValidAndCoversEveryKind) {
  std::mt19937 rng(12345);
  std::set<std::string> seen;
  for (int i = 0; i < 3000; ++i) {
    const Descriptor d = random_descriptor(rng);
    Problem p;
    ASSERT_NO_THROW(p = resolve(d)) << to_json(d);
    const std::string rank = "rank" + std::to_string(p.spatial_rank);
    seen.insert(rank + " " + to_string(p.data_format) + " " + to_string(d.weights_format));
    seen.insert(rank + " output_shape " + to_string(d.auto_pad) + (d.output_shape.empty() ? " absent" : " given"));
    if (p.groups > 1) seen.insert(p.c_in_per_group() == 1 && p.c_out_per_group() == 1 ? "depthwise" : "grouped");
    for (size_t a = 0; a < p.pads_begin.size(); ++a) {
      if (p.pads_begin[a] < 0 || p.pads_end[a] < 0) seen.insert("negative pad");
      if (p.pads_begin[a] > 0 || p.pads_end[a] > 0) seen.insert("positive pad");
      if (p.output_padding[a] >= p.stride[a] && p.output_padding[a] > 0) seen.insert("output_padding >= stride");
      if (p.dilation[a] > 1) seen.insert("dilation");
      if (p.kernel[a] < p.stride[a]) seen.insert("kernel < stride");
    }
    if (p.batch > 1) seen.insert("batch");
  }
  std::vector<std::string> want = {"depthwise", "grouped", "negative pad", "positive pad", "output_padding >= stride",
                                   "dilation", "kernel < stride", "batch"};
  for (int r = 1; r <= 3; ++r) {
    const std::string rank = "rank" + std::to_string(r);
    for (const char* f : {"NCX", "NXC"})
      for (const char* w : {"OIX", "XIO", "GOIX"}) want.push_back(rank + " " + f + " " + w);
    for (const char* mode : {"explicit", "valid", "same_upper", "same_lower"})
      for (const char* given : {" absent", " given"}) want.push_back(rank + " output_shape " + mode + given);
  }
  for (const std::string& kind : want) EXPECT_TRUE(seen.count(kind)) << "the family never draws: " << kind;
}

// ---- random tuning hints --------------------------------------------------------------------------------

int uniform(std::mt19937& rng, int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }

// Hints inside the documented limits: the register budget (accumulators ur_w*oc_vectors, oc_vectors weight
// vectors and the broadcast registers: 2 of 32 on AVX-512, 1 of 16 on AVX2), ic_unroll 1-8, x_split 1-5,
// and the NCX layouts (in_kernel only on AVX-512). Each field is left to the heuristic now and then.
TuningHints random_hints(std::mt19937& rng, Isa isa, const Problem& p) {
  const bool z = isa == Isa::avx512_core;
  const int regs = z ? 32 : 16, bcast = z ? 2 : 1;
  TuningHints h;
  const int max_nv = (regs - bcast - 1) / 2;  // ur_w = 1 must still fit
  const int nv = uniform(rng, 0, 3) == 0 ? 0 : (uniform(rng, 0, 3) == 0 ? uniform(rng, 1, max_nv)
                                                                        : uniform(rng, 1, z ? 4 : 3));
  h.oc_vectors = nv;
  if (uniform(rng, 0, 3) != 0) {
    const int budget_nv = nv ? nv : (z ? 4 : 2);  // the heuristic's widest choice when unset
    h.ur_w = uniform(rng, 1, (regs - budget_nv - bcast) / budget_nv);
  }
  h.ic_unroll = uniform(rng, 0, 8);
  const int halo = uniform(rng, 0, 5);  // mostly the heuristic; sometimes forced off or on
  h.x_halo = halo == 0 ? 0 : halo == 1 ? 1 : -1;
  h.x_split = uniform(rng, 0, 5);
  const bool depthwise = p.groups > 1 && p.c_in_per_group() == 1 && p.c_out_per_group() == 1;
  if (p.data_format == DataFormat::NCX) {
    const int pick = uniform(rng, 0, 4);
    if (pick == 1) h.layout = "row_buffer";
    if (pick == 2) h.layout = "scratch";
    if (pick == 3) h.layout = z && !depthwise ? "in_kernel" : "row_buffer";
    if (pick == 4) h.layout = depthwise ? "row_buffer" : "src_in_place";
    if (h.layout == "src_in_place" && h.x_halo == 1) h.x_halo = -1;  // it reads the caller's planes
  }
  // The reduction in several passes (direct and gemm families, NXC-shaped data): a divisor of C_IN/G.
  const bool nxc_shaped = p.data_format == DataFormat::NXC || h.layout == "scratch";
  if (nxc_shaped && !depthwise && uniform(rng, 0, 3) == 0) {
    std::vector<int> divisors;
    for (int d = 1; d <= p.c_in_per_group(); ++d)
      if (p.c_in_per_group() % d == 0) divisors.push_back(d);
    h.ic_block = divisors[static_cast<size_t>(uniform(rng, 0, static_cast<int>(divisors.size()) - 1))];
  }
  const int alg = uniform(rng, 0, 7);
  if (alg == 0) h.algorithm = "direct";
  if (alg == 1 && p.c_out_per_group() <= 4 && !depthwise) {  // few output channels: the dot family
    h.algorithm = "dot";
    h.oc_vectors = uniform(rng, 0, 1) ? static_cast<int>(p.c_out_per_group()) : 0;
    const int oc = static_cast<int>(p.c_out_per_group());
    h.ur_w = uniform(rng, 0, 1) ? uniform(rng, 1, (regs - oc - 1) / oc) : 0;
    h.ic_block = 0;
    if (p.data_format == DataFormat::NCX) h.layout = uniform(rng, 0, 1) ? "src_copy" : "";
  }
  // The NCX x-vector form of the dot family: all output channels per block, a few accumulator sets.
  if (alg == 2 && p.c_out_per_group() <= 4 && p.groups == 1 && p.data_format == DataFormat::NCX) {
    h = TuningHints{};
    h.algorithm = "dot_x";
    h.ic_unroll = uniform(rng, 0, 3);
    h.ur_w = uniform(rng, 0, 2);
  }
  // col_x (AVX-512, NCX, groups too): the tile within 28 accumulators, parts of rows. The planner refuses
  // what does not apply (a stride not dividing 16, pads_begin < 0, a kernel too wide).
  if (alg == 3 && z && p.data_format == DataFormat::NCX) {
    h = TuningHints{};
    h.algorithm = "col_x";
    h.ur_w = uniform(rng, 0, 4);
    h.ic_unroll = uniform(rng, 0, 2);
    h.x_split = uniform(rng, 0, 3);
    // Tiles across images where rows are one vector (the images per tile left to the planner).
    if (p.in.back() <= 16 && p.batch > 1 && uniform(rng, 0, 1)) h.batch_block = 1, h.ur_w = 0;
  }
  return h;
}

class RandomHints : public RandomDescriptors {};

TEST_P(RandomHints, AcceptedHintsAreHonouredAndExact) {
  const ShardParam& param = GetParam();
  std::mt19937 rng(shard_seed(param, 2));
  int accepted = 0, rejected = 0, failures = 0;
  std::string reasons;  // the first few rejections
  for (int i = 0; i < kHintsPerShard && failures < kStopAfterFailures; ++i) {
    const Descriptor d = random_descriptor(rng);
    const Problem p = resolve(d);
    const TuningHints h = random_hints(rng, param.isa, p);
    SCOPED_TRACE("shard " + std::to_string(param.shard) + " descriptor #" + std::to_string(i) + ": " +
                 to_json(d) + " hints: " + to_json(h));
    const int before = failed_parts();
    Options o = testing::isa_options(param.isa, h);
    o.use_cache = false;
    Kernel k;
    try {
      k = compile(d, o);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), Error::Kind::InvalidArgument) << "a hint must be rejected as such: " << e.what();
      ++rejected;
      if (std::count(reasons.begin(), reasons.end(), '\n') < 5) reasons += std::string("\n  ") + e.what();
      continue;
    }
    ++accepted;
    const auto plan = nlohmann::json::parse(k.plan_text());
    if (h.ur_w) EXPECT_EQ(plan.at("ur_w").get<int>(), h.ur_w) << k.plan_text();
    if (h.oc_vectors) EXPECT_EQ(plan.at("oc_vectors").get<int>(), h.oc_vectors) << k.plan_text();
    if (h.x_split) EXPECT_EQ(plan.at("x_split").get<int>(), h.x_split) << k.plan_text();
    if (h.algorithm == "direct") EXPECT_EQ(plan.at("algorithm").get<std::string>(), "direct");
    if (h.layout == "scratch") EXPECT_EQ(plan.at("layout").get<std::string>(), "ncx_via_scratch");
    if (h.layout == "in_kernel") EXPECT_EQ(plan.at("layout").get<std::string>(), "ncx_in_kernel");
    if (h.layout == "row_buffer") EXPECT_EQ(plan.at("layout").get<std::string>(), "ncx_row_buffer");
    if (h.layout == "src_in_place") EXPECT_EQ(plan.at("layout").get<std::string>(), "ncx_src_in_place");
    const bool halo = plan.at("halo")[0].get<int64_t>() + plan.at("halo")[1].get<int64_t>() > 0;
    // (The dot family ignores ic_block instead of rejecting it: a known bug, pinned down by
    // PlanHints.DotFamilyHonoursOrRejectsEveryHint in tests/runtime/test_plan.cpp.)
    if (h.ic_block > 0 && plan.at("algorithm") != "dot")
      EXPECT_EQ(plan.at("ic_block").get<int>(), h.ic_block) << k.plan_text();
    if (h.x_halo == 0) EXPECT_FALSE(halo);
    if (h.x_halo == 1) EXPECT_TRUE(halo);
    DeconvTester(d).isa(param.isa).hints(h).use_cache(false).seed(static_cast<uint64_t>(i) + 7).Test();
    if (failed_parts() > before) ++failures;
  }
  if (failures >= kStopAfterFailures) return;
  // Every hint lies within the documented limits; only combinations a particular problem cannot take
  // (e.g. a layout or a vector count the kernel family of that problem has no use for) may be refused.
  EXPECT_GE(accepted, 3 * (accepted + rejected) / 4) << accepted << " accepted, " << rejected << " rejected, e.g.:" << reasons;
  std::printf("[ hints    ] %s shard %d: %d accepted, %d rejected\n", to_string(param.isa), param.shard,
              accepted, rejected);
}

INSTANTIATE_TEST_SUITE_P(Shards, RandomHints, ::testing::ValuesIn(shards(kHintShards)), shard_name);

}  // namespace
}  // namespace deconvjit
