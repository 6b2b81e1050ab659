// A fluent builder for transposed-convolution tests (in the style of XNNPACK's testers):
//
//   DeconvTester().rank(2).channels(8, 12).input({5, 7}).kernel({3, 3}).stride({2, 2})
//       .layout(DataFormat::NXC).isa(Isa::avx2).Test();
//
// Test() runs the JIT (compile + pack_weights + execute) on seeded random data of the chosen dtype and
// checks every output element against reference_with_bound by the rule of runtime/tolerance.hpp.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "deconvjit/deconvjit.hpp"
#include "runtime/typed_data.hpp"

namespace deconvjit::testing {

class DeconvTester {
 public:
  DeconvTester() = default;
  // Tests a descriptor as it is (e.g. one from random_descriptor); the shape setters are then ignored.
  explicit DeconvTester(Descriptor d) : fixed_(std::move(d)) {}

  DeconvTester& rank(int r) { rank_ = r; return *this; }
  DeconvTester& batch(int64_t n) { batch_ = n; return *this; }
  DeconvTester& channels(int64_t c_in, int64_t c_out) { c_in_ = c_in; c_out_ = c_out; return *this; }
  DeconvTester& groups(int64_t g) { groups_ = g; return *this; }
  DeconvTester& input(std::vector<int64_t> v) { input_ = std::move(v); return *this; }
  DeconvTester& kernel(std::vector<int64_t> v) { kernel_ = std::move(v); return *this; }
  DeconvTester& stride(std::vector<int64_t> v) { stride_ = std::move(v); return *this; }
  DeconvTester& dilation(std::vector<int64_t> v) { dilation_ = std::move(v); return *this; }
  DeconvTester& pads(std::vector<int64_t> begin, std::vector<int64_t> end) {
    pads_begin_ = std::move(begin);
    pads_end_ = std::move(end);
    return *this;
  }
  DeconvTester& output_padding(std::vector<int64_t> v) { output_padding_ = std::move(v); return *this; }
  DeconvTester& output_shape(std::vector<int64_t> v) { output_shape_ = std::move(v); return *this; }
  DeconvTester& auto_pad(AutoPad a) { auto_pad_ = a; return *this; }
  DeconvTester& layout(DataFormat f) { layout_ = f; return *this; }
  DeconvTester& weights_format(WeightsFormat f) { weights_format_ = f; return *this; }
  DeconvTester& isa(Isa i) { isa_ = i; return *this; }
  DeconvTester& threads(int n) { threads_ = n; return *this; }  // 0 = the default arena
  DeconvTester& seed(uint64_t s) { seed_ = s; return *this; }
  DeconvTester& hints(TuningHints h) { hints_ = std::move(h); return *this; }
  DeconvTester& use_cache(bool on) { use_cache_ = on; return *this; }
  // Elements left after dst (NaN sentinels, checked): they shift dst's alignment, as for a caller's tensor
  // inside a bigger buffer. (With none, dst ends at a page and starts aligned when its bytes allow.)
  DeconvTester& dst_tail(int64_t n) { dst_tail_ = n; return *this; }
  // Element type of src, weights and dst, and the type sums are kept in. Unset: f32, or what a fixed
  // descriptor says; set: they override a fixed descriptor too.
  DeconvTester& dtype(DType t) { dtype_ = t; return *this; }
  DeconvTester& accumulation(DType t) { accumulation_ = t; return *this; }
  // Changes the seeded operands before the run (to plant edge values: subnormals, infinities, NaN).
  DeconvTester& edit(std::function<void(verify::TypedOperands&)> f) { edit_ = std::move(f); return *this; }

  // The descriptor these settings describe (shapes in the chosen layouts).
  Descriptor descriptor() const;
  Options options() const;

  // GoogleTest assertions; GTEST_SKIP when the requested ISA is missing on this CPU, when f16 sums are
  // asked of a CPU without avx512_fp16 (or refused there as Unsupported: no kernels yet).
  void Test() const;

 private:
  Descriptor shaped() const;  // from the shape setters
  std::vector<int64_t> spatial_or(const std::vector<int64_t>& v, int64_t fill) const;

  std::optional<Descriptor> fixed_;
  int rank_ = 2;
  int64_t batch_ = 1, c_in_ = 4, c_out_ = 4, groups_ = 1;
  std::vector<int64_t> input_, kernel_, stride_, dilation_, pads_begin_, pads_end_, output_padding_,
      output_shape_;
  AutoPad auto_pad_ = AutoPad::Explicit;
  DataFormat layout_ = DataFormat::NCX;
  WeightsFormat weights_format_ = WeightsFormat::OIX;
  Isa isa_ = Isa::best;
  int threads_ = 0;
  uint64_t seed_ = 1;
  TuningHints hints_;
  bool use_cache_ = true;
  int64_t dst_tail_ = 0;
  std::optional<DType> dtype_, accumulation_;
  std::function<void(verify::TypedOperands&)> edit_;
};

bool cpu_has_avx512_fp16();  // arithmetic in halves (vfmadd*ph), which f16 accumulation needs

// Options that run `isa`'s own code: the ISA as a cap and as the plan's choice (under an AVX-512 cap the
// planner may choose AVX2 code on some CPUs, runtime/plan_isa.cpp; a test of AVX-512 code must not get it).
Options isa_options(Isa isa, const TuningHints& hints = {});

// Why compile() refuses data of type t (with sums in acc) on `isa` as Unsupported, judged on a tiny
// problem; nullopt when it builds such kernels. Only sums in f16 are ever excused (every dtype has
// kernels with f32 sums).
std::optional<std::string> unsupported_types(Isa isa, DType t, DType acc = DType::f32);

// Shapes of a descriptor's operands for the given layouts; shared by the builder and the generator.
std::vector<int64_t> src_shape(DataFormat f, int64_t batch, int64_t c_in, const std::vector<int64_t>& in);
std::vector<int64_t> weights_shape(WeightsFormat f, int64_t groups, int64_t c_in, int64_t c_out,
                                   const std::vector<int64_t>& kernel);

struct RandomLimits {
  int64_t max_macs = 4000;          // N * C_IN * C_OUT/G * prod(input) * prod(kernel)
  int64_t max_dst_elements = 6000;  // keeps the oracle's gather loops short too
};

// A small valid problem with every parameter drawn at random: rank 1-3, groups (incl. depthwise),
// strides 1-4, dilations 1-3, kernels 1-5 (incl. kernel < stride), negative pads, output_padding
// (incl. >= stride), output_shape (spatial or full rank) under every auto_pad, NCX/NXC, OIX/XIO/GOIX,
// odd channel counts, batch 1-3.
Descriptor random_descriptor(std::mt19937& rng, const RandomLimits& limits = {});

}  // namespace deconvjit::testing
