#include "support/deconv_tester.hpp"

#include <gtest/gtest.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <sstream>

#include <xbyak/xbyak_util.h>

#include "runtime/half.hpp"
#include "runtime/tolerance.hpp"
#include "runtime/typed_data.hpp"
#include "support/guarded_buffer.hpp"

namespace deconvjit::testing {

std::vector<int64_t> src_shape(DataFormat f, int64_t batch, int64_t c_in, const std::vector<int64_t>& in) {
  std::vector<int64_t> s{batch};
  if (f == DataFormat::NCX) s.push_back(c_in);
  s.insert(s.end(), in.begin(), in.end());
  if (f == DataFormat::NXC) s.push_back(c_in);
  return s;
}

std::vector<int64_t> weights_shape(WeightsFormat f, int64_t groups, int64_t c_in, int64_t c_out,
                                   const std::vector<int64_t>& kernel) {
  const int64_t cog = c_out / groups;
  std::vector<int64_t> s;
  switch (f) {
    case WeightsFormat::OIX: s = {c_in, cog}; break;
    case WeightsFormat::GOIX: s = {groups, c_in / groups, cog}; break;
    case WeightsFormat::XIO:
      s = kernel;
      s.push_back(cog);
      s.push_back(c_in);
      return s;
  }
  s.insert(s.end(), kernel.begin(), kernel.end());
  return s;
}

std::vector<int64_t> DeconvTester::spatial_or(const std::vector<int64_t>& v, int64_t fill) const {
  return v.empty() ? std::vector<int64_t>(static_cast<size_t>(rank_), fill) : v;
}

Descriptor DeconvTester::descriptor() const {
  Descriptor d = fixed_ ? *fixed_ : shaped();
  if (dtype_) d.dtype = d.weights_dtype = *dtype_;
  if (accumulation_) d.accumulation = *accumulation_;
  return d;
}

Descriptor DeconvTester::shaped() const {
  Descriptor d;
  d.src = src_shape(layout_, batch_, c_in_, spatial_or(input_, 5));
  d.weights = weights_shape(weights_format_, groups_, c_in_, c_out_, spatial_or(kernel_, 3));
  d.strides = stride_;
  d.dilations = dilation_;
  d.pads_begin = pads_begin_;
  d.pads_end = pads_end_;
  d.output_padding = output_padding_;
  d.output_shape = output_shape_;
  d.auto_pad = auto_pad_;
  if (weights_format_ != WeightsFormat::GOIX) d.groups = groups_;  // GOIX carries G in its shape
  d.data_format = layout_;
  d.weights_format = weights_format_;
  return d;
}

Options isa_options(Isa isa, const TuningHints& hints) {
  Options o;
  o.max_isa = isa;
  o.hints = hints;
  if (isa != Isa::best && o.hints.isa.empty()) o.hints.isa = to_string(isa);
  return o;
}

Options DeconvTester::options() const {
  Options o = isa_options(isa_, hints_);
  o.use_cache = use_cache_;
  return o;
}

namespace {

constexpr int64_t kGuard = 16;  // sentinel elements (NaN) before dst, to catch stray writes

std::string coordinates(const Problem& p, int64_t index) {
  std::vector<int64_t> c(p.dst_shape.size());
  for (size_t a = c.size(); a-- > 0;) {
    c[a] = index % p.dst_shape[a];
    index /= p.dst_shape[a];
  }
  std::ostringstream os;
  for (size_t a = 0; a < c.size(); ++a) os << (a ? "," : "[") << c[a];
  os << "]";
  return os.str();
}

std::string report(const Problem& p, const Kernel& k, const verify::Comparison& c) {
  std::ostringstream os;
  os.precision(9);
  os << c.failures << " of " << p.dst_elements() << " elements outside tolerance; kernel " << k.name()
     << " (" << to_string(k.isa()) << ", " << to_string(p.dtype) << " data, " << to_string(p.accumulation)
     << " sums)\n  problem " << p.canonical << "\n";
  for (const auto& m : c.first) {
    os << "  dst" << coordinates(p, m.index) << " (index " << m.index << "): jit " << m.got << ", reference "
       << m.want << ", |diff| " << std::fabs(m.got - m.want) << " > tol " << m.tol << "\n";
  }
  return os.str();
}

void run_with_threads(int threads, const std::function<void()>& body) {
  if (threads <= 0) return body();
  tbb::task_arena arena(threads);
  arena.execute(body);
}

}  // namespace

bool cpu_has_avx512_fp16() {
  static const Xbyak::util::Cpu cpu;
  return cpu.has(Xbyak::util::Cpu::tAVX512_FP16);
}

std::optional<std::string> unsupported_types(Isa isa, DType t, DType acc) {
  Descriptor d;
  d.src = {1, 4, 3, 3};
  d.weights = {4, 4, 3, 3};
  d.dtype = d.weights_dtype = t;
  d.accumulation = acc;
  Options o = isa_options(isa);
  o.use_disk_cache = false;
  try {
    compile(d, o);
  } catch (const Error& e) {
    // Every dtype has kernels; only sums in f16 may be refused (no avx512_fp16, or none written yet).
    if (e.kind() == Error::Kind::Unsupported && acc != DType::f32) return std::string(e.what());
  }
  return std::nullopt;
}

namespace {

// A guarded copy of typed data (see guarded_buffer.hpp).
struct GuardedTyped {
  DType dtype;
  int64_t count;
  GuardedBytes bytes;
  GuardedTyped(const verify::TypedData& d)  // NOLINT: a copy
      : dtype(d.dtype), count(d.count), bytes(d.bytes.size(), d.bytes) {}
  ConstBuffer view() const { return {bytes.data(), dtype, static_cast<size_t>(count)}; }
};

// Sums in f16 are refused as Unsupported where the CPU lacks avx512_fp16: such tests skip (below).
bool unsupported_type(const Error& e, const Problem& p) {
  return e.kind() == Error::Kind::Unsupported && p.accumulation != DType::f32;
}

}  // namespace

void DeconvTester::Test() const {
  if (!isa_available(isa_)) GTEST_SKIP() << "ISA " << to_string(isa_) << " is not available on this CPU";
  const Descriptor d = descriptor();
  if (d.accumulation == DType::f16 && !cpu_has_avx512_fp16())
    GTEST_SKIP() << "f16 accumulation needs avx512_fp16, which this CPU lacks";
  Problem p;
  try {
    p = resolve(d);
  } catch (const std::exception& e) {
    FAIL() << "resolve rejected the test descriptor " << to_json(d) << ": " << e.what();
  }
  Kernel k;
  try {
    k = compile(d, options());
  } catch (const Error& e) {
    if (unsupported_type(e, p)) GTEST_SKIP() << "compile: " << e.what();
    FAIL() << "compile threw for " << p.canonical << ": " << e.what();
  } catch (const std::exception& e) {
    FAIL() << "compile threw for " << p.canonical << ": " << e.what();
  }
  verify::TypedOperands ops = verify::typed_operands(p, seed_);
  if (edit_) edit_(ops);
  // Every operand ends at an inaccessible page: reading or writing past any of them faults. Before dst,
  // NaN sentinels catch stray writes (its first element cannot also start at a page).
  const GuardedTyped src(ops.src), weights(ops.weights);
  verify::TypedData sentinel(p.dtype, p.dst_elements() + kGuard + dst_tail_);
  for (int64_t e = 0; e < sentinel.count; ++e) sentinel.set(e, std::numeric_limits<double>::quiet_NaN());
  GuardedTyped got(sentinel);
  const size_t elem = dtype_size(p.dtype);
  const Buffer dst(got.bytes.data() + kGuard * elem, p.dtype, static_cast<size_t>(p.dst_elements()));
  try {
    const PackedWeights packed = k.pack_weights(weights.view());
    run_with_threads(threads_, [&] { k.execute(src.view(), packed, dst); });
  } catch (const std::exception& e) {
    FAIL() << "pack/execute threw for " << p.canonical << ": " << e.what();
  }
  for (int64_t g = 0; g < kGuard; ++g) {
    ASSERT_TRUE(std::isnan(detail::load_element(got.bytes.data(), p.dtype, g)))
        << "execute wrote before dst (guard " << g << ") for " << p.canonical;
  }
  for (int64_t t = 0; t < dst_tail_; ++t) {
    ASSERT_TRUE(std::isnan(detail::load_element(got.bytes.data(), p.dtype, kGuard + p.dst_elements() + t)))
        << "execute wrote past dst (tail element " << t << ") for " << p.canonical;
  }
  std::vector<double> want(static_cast<size_t>(p.dst_elements())), mag(want.size());
  reference_with_bound(p, ops.src.view(), ops.weights.view(), want.data(), mag.data());
  const verify::Comparison c = verify::compare(p, dst, want.data(), mag.data(), p.dst_elements());
  EXPECT_TRUE(c.ok) << report(p, k, c);
}

// ---- random problems ----

namespace {

int64_t uniform(std::mt19937& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}
bool chance(std::mt19937& rng, double p) { return std::bernoulli_distribution(p)(rng); }
template <class T>
T pick(std::mt19937& rng, std::initializer_list<T> options) {
  return *(options.begin() + uniform(rng, 0, static_cast<int64_t>(options.size()) - 1));
}

// One spatial axis, with the output size it gets (before any output_shape).
struct Axis {
  int64_t x, k, s, d, pb, pe, op, y;
};

// Pads and output_padding are redrawn until the natural output size is positive.
Axis random_axis(std::mt19937& rng, int rank, AutoPad pad) {
  Axis a{};
  a.x = uniform(rng, 1, rank == 1 ? 9 : rank == 2 ? 6 : 4);
  a.k = uniform(rng, 1, 5);
  a.s = uniform(rng, 1, 4);
  a.d = chance(rng, 0.6) ? 1 : uniform(rng, 2, 3);
  const int64_t span = a.s * (a.x - 1) + a.d * (a.k - 1) + 1;
  do {
    a.pb = chance(rng, 0.4) ? 0 : uniform(rng, -2, 4);
    a.pe = chance(rng, 0.4) ? 0 : uniform(rng, -2, 4);
    a.op = chance(rng, 0.5) ? 0 : uniform(rng, 1, a.s + 1);  // up to and past the stride
    const bool explicit_pads = pad == AutoPad::Explicit;
    a.y = span - (explicit_pads ? a.pb + a.pe : 0) + a.op;
  } while (a.y < 1);
  return a;
}

// All-default lists are sometimes left empty, which the descriptor treats as the default.
std::vector<int64_t> maybe_empty(std::mt19937& rng, std::vector<int64_t> v, int64_t dflt) {
  const bool all_default = std::all_of(v.begin(), v.end(), [&](int64_t e) { return e == dflt; });
  if (all_default && chance(rng, 0.5)) v.clear();
  return v;
}

struct Channels {
  int64_t groups, c_in, c_out;
};

// Channel counts within what the MAC budget leaves, often not multiples of 8 or 16.
std::optional<Channels> random_channels(std::mt19937& rng, int64_t budget) {
  if (budget < 1) return std::nullopt;
  const int kind = static_cast<int>(uniform(rng, 0, 5));
  if (kind == 0) {  // depthwise
    const int64_t c = std::min<int64_t>(budget, pick<int64_t>(rng, {1, 3, 8, 13, 16, 19}));
    return Channels{c, c, c};
  }
  if (kind == 1) {  // grouped, several channels per group
    const int64_t g = uniform(rng, 2, 4), cig = uniform(rng, 1, 5), cog = uniform(rng, 1, 5);
    if (g * cig * cog > budget) return std::nullopt;
    return Channels{g, g * cig, g * cog};
  }
  const int64_t cin = pick<int64_t>(rng, {1, 2, 3, 4, 5, 7, 8, 9, 12, 16, 17, 24, 33});
  const int64_t cout = pick<int64_t>(rng, {1, 2, 3, 5, 6, 8, 11, 16, 17, 23, 32, 40});
  if (cin * cout > budget) return std::nullopt;
  return Channels{1, cin, cout};
}

AutoPad random_auto_pad(std::mt19937& rng) {
  if (chance(rng, 0.55)) return AutoPad::Explicit;
  return pick(rng, {AutoPad::Valid, AutoPad::SameUpper, AutoPad::SameLower});
}

// Drops the output_shape in (spatial or full rank), around the natural size.
void random_output_shape(std::mt19937& rng, Descriptor& d, const std::vector<Axis>& axes, int64_t batch,
                         int64_t c_out) {
  std::vector<int64_t> y;
  for (const Axis& a : axes) y.push_back(std::max<int64_t>(1, a.y + uniform(rng, -3, 3)));
  d.output_shape = chance(rng, 0.3) ? src_shape(d.data_format, batch, c_out, y) : y;
}

std::optional<Descriptor> try_random(std::mt19937& rng, const RandomLimits& limits) {
  const int rank = static_cast<int>(pick<int64_t>(rng, {1, 1, 2, 2, 2, 3}));
  const int64_t batch = uniform(rng, 1, 3);
  const AutoPad pad = random_auto_pad(rng);
  std::vector<Axis> axes;
  int64_t spatial = batch;
  for (int r = 0; r < rank; ++r) {
    axes.push_back(random_axis(rng, rank, pad));
    spatial *= axes.back().x * axes.back().k;
  }
  const auto ch = random_channels(rng, limits.max_macs / spatial);
  if (!ch) return std::nullopt;

  Descriptor d;
  d.auto_pad = pad;
  d.data_format = chance(rng, 0.5) ? DataFormat::NCX : DataFormat::NXC;
  d.weights_format = pick(rng, {WeightsFormat::OIX, WeightsFormat::XIO, WeightsFormat::GOIX});
  std::vector<int64_t> in, k, s, dl, pb, pe, op;
  for (const Axis& a : axes) {
    in.push_back(a.x), k.push_back(a.k), s.push_back(a.s), dl.push_back(a.d);
    pb.push_back(a.pb), pe.push_back(a.pe), op.push_back(a.op);
  }
  d.src = src_shape(d.data_format, batch, ch->c_in, in);
  d.weights = weights_shape(d.weights_format, ch->groups, ch->c_in, ch->c_out, k);
  if (d.weights_format != WeightsFormat::GOIX && (ch->groups > 1 || chance(rng, 0.5))) d.groups = ch->groups;
  d.strides = maybe_empty(rng, s, 1);
  d.dilations = maybe_empty(rng, dl, 1);
  d.pads_begin = maybe_empty(rng, pb, 0);
  d.pads_end = maybe_empty(rng, pe, 0);
  d.output_padding = maybe_empty(rng, op, 0);
  if (chance(rng, 0.35)) random_output_shape(rng, d, axes, batch, ch->c_out);

  int64_t dst = batch * ch->c_out;
  for (size_t r = 0; r < axes.size(); ++r) {
    const bool given = !d.output_shape.empty();
    const size_t at = d.output_shape.size() == axes.size() ? r : r + (d.data_format == DataFormat::NCX ? 2 : 1);
    dst *= given ? d.output_shape[at] : axes[r].y;
  }
  if (dst > limits.max_dst_elements) return std::nullopt;
  return d;
}

}  // namespace

Descriptor random_descriptor(std::mt19937& rng, const RandomLimits& limits) {
  for (;;) {
    if (auto d = try_random(rng, limits)) return *d;
  }
}

}  // namespace deconvjit::testing
