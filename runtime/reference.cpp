// The scalar oracle (semantics.md section 4), in the gather form: every output element is written exactly
// once, as a double-precision sum over the (input position, tap) pairs that land on it. It trusts only the
// resolved Problem, so it stays independent of the planner and the JIT.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>

#include "deconvjit/deconvjit.hpp"
#include "runtime/buffer.hpp"
#include "runtime/half.hpp"
#include "runtime/reference.hpp"

namespace deconvjit {
namespace {

constexpr int kAxes = 3;  // every problem is lifted to 3 spatial axes; missing outer axes have size 1

// One input position i and tap k that reach a given output position on one axis.
struct Tap {
  int64_t i, k;
};

// For each output position o on one axis, the (i, k) with o + pb - k*d == i*s and 0 <= i < X.
// Computed once per axis so the inner loops only visit contributing pairs.
std::vector<std::vector<Tap>> taps_per_output(int64_t X, int64_t K, int64_t s, int64_t d, int64_t pb,
                                              int64_t Y) {
  std::vector<std::vector<Tap>> taps(static_cast<size_t>(Y));
  for (int64_t o = 0; o < Y; ++o) {
    for (int64_t k = 0; k < K; ++k) {
      const int64_t t = o + pb - k * d;  // = i*s; may be negative when pads are negative or o is small
      if (t < 0 || t % s != 0) continue;  // t >= 0 first, so % and / never see a negative operand
      const int64_t i = t / s;
      if (i < X) taps[static_cast<size_t>(o)].push_back({i, k});
    }
  }
  return taps;
}

// Element strides of the operands in the user's layouts, with spatial axes lifted to 3.
struct Geometry {
  std::array<int64_t, kAxes> in{}, k{}, out{};
  int64_t cin = 0, cout = 0, cig = 0, cog = 0;
  // src/dst: offset = n*batch + c*chan + z*sp[0] + y*sp[1] + x*sp[2]
  int64_t src_batch = 0, src_chan = 0, dst_batch = 0, dst_chan = 0;
  std::array<int64_t, kAxes> src_sp{}, dst_sp{};
  // weights: offset = ci*w_ci + co_in_group*w_co + kz*w_k[0] + ky*w_k[1] + kx*w_k[2]
  int64_t w_ci = 0, w_co = 0;
  std::array<int64_t, kAxes> w_k{};
};

// Row-major strides of a 3-axis spatial box in which each point holds `inner` elements.
std::array<int64_t, kAxes> box_strides(const std::array<int64_t, kAxes>& dims, int64_t inner) {
  std::array<int64_t, kAxes> st{};
  int64_t acc = inner;
  for (int a = kAxes - 1; a >= 0; --a) {
    st[a] = acc;
    acc *= dims[a];
  }
  return st;
}

int64_t volume(const std::array<int64_t, kAxes>& dims) { return dims[0] * dims[1] * dims[2]; }

// Activations: NCX puts channels outside the spatial box, NXC inside it.
void activation_strides(DataFormat f, const std::array<int64_t, kAxes>& dims, int64_t channels,
                        int64_t& batch, int64_t& chan, std::array<int64_t, kAxes>& sp) {
  batch = channels * volume(dims);
  if (f == DataFormat::NCX) {
    chan = volume(dims);
    sp = box_strides(dims, 1);
  } else {
    chan = 1;
    sp = box_strides(dims, channels);
  }
}

Geometry make_geometry(const Problem& p) {
  Geometry g;
  const int lift = kAxes - p.spatial_rank;
  for (int a = 0; a < kAxes; ++a) {
    const bool real = a >= lift;
    g.in[a] = real ? p.in[a - lift] : 1;
    g.k[a] = real ? p.kernel[a - lift] : 1;
    g.out[a] = real ? p.out[a - lift] : 1;
  }
  g.cin = p.c_in;
  g.cout = p.c_out;
  g.cig = p.c_in_per_group();
  g.cog = p.c_out_per_group();
  activation_strides(p.data_format, g.in, g.cin, g.src_batch, g.src_chan, g.src_sp);
  activation_strides(p.data_format, g.out, g.cout, g.dst_batch, g.dst_chan, g.dst_sp);
  if (p.weights_format == WeightsFormat::XIO) {  // [K..., C_OUT/G, C_IN]
    g.w_ci = 1;
    g.w_co = g.cin;
    g.w_k = box_strides(g.k, g.cog * g.cin);
  } else {  // OIX [C_IN, C_OUT/G, K...]; GOIX [G, C_IN/G, C_OUT/G, K...] is the same memory
    g.w_k = box_strides(g.k, 1);
    g.w_co = volume(g.k);
    g.w_ci = g.cog * g.w_co;
  }
  return g;
}

// Per-axis tap lists, padded to 3 axes (a lifted axis has the single pair i = 0, k = 0).
std::array<std::vector<std::vector<Tap>>, kAxes> axis_taps(const Problem& p, const Geometry& g) {
  std::array<std::vector<std::vector<Tap>>, kAxes> taps;
  const int lift = kAxes - p.spatial_rank;
  for (int a = 0; a < kAxes; ++a) {
    if (a < lift) {
      taps[a] = {{Tap{0, 0}}};
      continue;
    }
    const int r = a - lift;
    taps[a] = taps_per_output(g.in[a], g.k[a], p.stride[r], p.dilation[r], p.pads_begin[r], g.out[a]);
  }
  return taps;
}

// Writes sum and sum of |terms| for every output element of the listed rows (row = (n, oz, oy) in
// row-major order; all rows when `only` is null); `abs_sum` may be null.
void gather(const Problem& p, const float* src, const float* weights, double* dst, double* abs_sum,
            const std::vector<int64_t>* only = nullptr, const std::vector<int64_t>* only_x = nullptr) {
  const Geometry g = make_geometry(p);
  const auto taps = axis_taps(p, g);
  // Rows of outputs in parallel: each output is still one sum in a fixed order, so the result does not
  // depend on the threads; it only makes the oracle usable on large layers (the tuner checks them). With
  // few rows (a 1-D layer has one per image) the rows are cut into parts, so that every thread has work:
  // the tuner's budget includes this oracle (dac_up1, one row of 688 outputs x 768 channels, took most
  // of its 20 s on one thread).
  const int64_t rows = only ? static_cast<int64_t>(only->size()) : p.batch * g.out[0] * g.out[1];
  const int64_t xs = only_x ? static_cast<int64_t>(only_x->size()) : g.out[2];
  const int64_t parts = rows >= 64 ? 1 : std::min<int64_t>(xs, (64 + rows - 1) / rows);
  tbb::parallel_for(int64_t{0}, rows * parts, [&](int64_t t) {
    const int64_t i = t / parts, part = t % parts;
    const int64_t row = only ? (*only)[static_cast<size_t>(i)] : i;
    const int64_t oy = row % g.out[1], oz = row / g.out[1] % g.out[0], n = row / (g.out[1] * g.out[0]);
    for (int64_t xi = part * xs / parts; xi < (part + 1) * xs / parts; ++xi) {
      const int64_t ox = only_x ? (*only_x)[static_cast<size_t>(xi)] : xi;
      const auto& tz = taps[0][oz];
      const auto& ty = taps[1][oy];
      const auto& tx = taps[2][ox];
      const int64_t dst_at = n * g.dst_batch + oz * g.dst_sp[0] + oy * g.dst_sp[1] + ox * g.dst_sp[2];
      for (int64_t co = 0; co < g.cout; ++co) {
        const int64_t grp = co / g.cog, co_g = co % g.cog;
        double sum = 0.0, mag = 0.0;
        for (int64_t ci = grp * g.cig; ci < (grp + 1) * g.cig; ++ci) {
          const float* x = src + n * g.src_batch + ci * g.src_chan;
          const float* w = weights + ci * g.w_ci + co_g * g.w_co;
          for (const Tap& a : tz) {
            for (const Tap& b : ty) {
              for (const Tap& c : tx) {
                const double term =
                    static_cast<double>(x[a.i * g.src_sp[0] + b.i * g.src_sp[1] + c.i * g.src_sp[2]]) *
                    static_cast<double>(w[a.k * g.w_k[0] + b.k * g.w_k[1] + c.k * g.w_k[2]]);
                sum += term;
                mag += std::fabs(term);
              }
            }
          }
        }
        dst[dst_at + co * g.dst_chan] = sum;
        if (abs_sum) abs_sum[dst_at + co * g.dst_chan] = mag;
      }
    }
  });
}

void check_inputs(const Problem& p, const ConstBuffer& src, const ConstBuffer& weights) {
  detail::check_buffer(src, p.dtype, p.src_elements(), "reference: src");
  detail::check_buffer(weights, p.dtype, p.weights_elements(), "reference: weights");
}

// An operand as floats for the gather. Every bf16 and f16 value is exactly a float, so widening 16-bit
// operands once up front loses nothing and keeps one float inner loop (no per-element type switch);
// f32 operands are read in place, so the f32 oracle costs what it always did.
class Widened {
 public:
  Widened(const void* data, DType t, int64_t n) {
    if (t == DType::f32) {
      ptr_ = static_cast<const float*>(data);
      return;
    }
    copy_.resize(static_cast<size_t>(n));
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, 1 << 16), [&](const tbb::blocked_range<int64_t>& r) {
      for (int64_t i = r.begin(); i < r.end(); ++i)
        copy_[static_cast<size_t>(i)] = static_cast<float>(detail::load_element(data, t, i));
    });
    ptr_ = copy_.data();
  }
  const float* get() const { return ptr_; }

 private:
  std::vector<float> copy_;
  const float* ptr_ = nullptr;
};

}  // namespace

void reference(const Problem& p, ConstBuffer src, ConstBuffer weights, Buffer dst) {
  check_inputs(p, src, weights);
  detail::check_buffer(dst, p.dtype, p.dst_elements(), "reference: dst");
  const int64_t n = p.dst_elements();
  std::vector<double> acc(static_cast<size_t>(n));
  const Widened x(src.data, p.dtype, p.src_elements()), w(weights.data, p.dtype, p.weights_elements());
  gather(p, x.get(), w.get(), acc.data(), nullptr);
  // The one rounding, straight from the double sum into the output type (nearest even).
  for (int64_t e = 0; e < n; ++e) detail::store_element(dst.data, p.dtype, e, acc[static_cast<size_t>(e)]);
}

namespace detail {

std::vector<int64_t> reference_rows(const Problem& p, const void* src, const void* weights,
                                    const std::vector<int64_t>& rows, const std::vector<int64_t>& xs,
                                    double* dst, double* abs_sum) {
  const Geometry g = make_geometry(p);
  const int64_t all = p.batch * g.out[0] * g.out[1];
  std::vector<int64_t> x_list = xs;
  if (x_list.empty())
    for (int64_t ox = 0; ox < g.out[2]; ++ox) x_list.push_back(ox);
  std::vector<int64_t> indices;
  for (int64_t row : rows) {
    if (row < 0 || row >= all) throw Error(Error::Kind::InvalidArgument, "reference_rows: no row " + std::to_string(row));
    const int64_t oy = row % g.out[1], oz = row / g.out[1] % g.out[0], n = row / (g.out[1] * g.out[0]);
    for (int64_t ox : x_list) {
      if (ox < 0 || ox >= g.out[2]) throw Error(Error::Kind::InvalidArgument, "reference_rows: no x " + std::to_string(ox));
      for (int64_t co = 0; co < g.cout; ++co)
        indices.push_back(n * g.dst_batch + oz * g.dst_sp[0] + oy * g.dst_sp[1] + ox * g.dst_sp[2] + co * g.dst_chan);
    }
  }
  const Widened x(src, p.dtype, p.src_elements()), w(weights, p.dtype, p.weights_elements());
  gather(p, x.get(), w.get(), dst, abs_sum, &rows, &x_list);
  return indices;
}

}  // namespace detail

void reference_with_bound(const Problem& p, ConstBuffer src, ConstBuffer weights, double* dst,
                          double* abs_sum) {
  check_inputs(p, src, weights);
  if (!dst || !abs_sum) throw Error(Error::Kind::InvalidArgument, "reference: dst and abs_sum must not be null");
  const Widened x(src.data, p.dtype, p.src_elements()), w(weights.data, p.dtype, p.weights_elements());
  gather(p, x.get(), w.get(), dst, abs_sum);
}

}  // namespace deconvjit
