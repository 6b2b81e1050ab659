#include "bench/onednn_deconv.hpp"

#include <omp.h>

#include <dnnl.hpp>
#include <numeric>
#include <optional>
#include <vector>

namespace deconvjit::bench {

using dnnl::memory;

namespace {

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// Row-major strides of `sizes`, innermost last, starting from `inner`.
memory::dims packed_strides(const std::vector<int64_t>& sizes, int64_t inner) {
  memory::dims s(sizes.size());
  for (size_t i = sizes.size(); i-- > 0;) {
    s[i] = inner;
    inner *= sizes[i];
  }
  return s;
}

// oneDNN always names data dims {N, C, spatial...}; the strides say where the user keeps them.
memory::desc user_data_md(const Problem& p, int64_t channels, const std::vector<int64_t>& spatial) {
  memory::dims dims{p.batch, channels};
  dims.insert(dims.end(), spatial.begin(), spatial.end());
  const int64_t plane = std::accumulate(spatial.begin(), spatial.end(), int64_t{1}, std::multiplies<>());
  memory::dims strides;
  if (p.data_format == DataFormat::NCX) {
    strides = {channels * plane, plane};
    const memory::dims s = packed_strides(spatial, 1);
    strides.insert(strides.end(), s.begin(), s.end());
  } else {
    strides = {channels * plane, 1};
    const memory::dims s = packed_strides(spatial, channels);
    strides.insert(strides.end(), s.begin(), s.end());
  }
  return memory::desc(dims, memory::data_type::f32, strides);
}

bool grouped(const Problem& p) { return p.groups > 1; }

// Deconvolution weights are {OC, IC, K...} in oneDNN, {G, OC/G, IC/G, K...} with groups.
memory::dims weights_dims(const Problem& p) {
  memory::dims dims;
  if (grouped(p)) dims.push_back(p.groups);
  dims.push_back(p.c_out_per_group());
  dims.push_back(p.c_in_per_group());
  dims.insert(dims.end(), p.kernel.begin(), p.kernel.end());
  return dims;
}

// Our weights as strides over oneDNN's dims, so oneDNN's reorder does the transposition (no host copy).
// OIX and the group form are [G][IC/G][OC/G][K...]; XIO is [K...][OC/G][C_IN] with C_IN = G x IC/G.
memory::desc user_weights_md(const Problem& p) {
  const int64_t icg = p.c_in_per_group(), ocg = p.c_out_per_group();
  const int64_t taps = std::accumulate(p.kernel.begin(), p.kernel.end(), int64_t{1}, std::multiplies<>());
  memory::dims g, o, i, k;
  if (p.weights_format == WeightsFormat::XIO) {
    g = {icg}, o = {p.c_in}, i = {1};
    k = packed_strides(p.kernel, ocg * p.c_in);
  } else {
    g = {icg * ocg * taps}, o = {taps}, i = {ocg * taps};
    k = packed_strides(p.kernel, 1);
  }
  memory::dims strides = grouped(p) ? g : memory::dims{};
  strides.insert(strides.end(), {o[0], i[0]});
  strides.insert(strides.end(), k.begin(), k.end());
  return memory::desc(weights_dims(p), memory::data_type::f32, strides);
}

dnnl::deconvolution_forward::primitive_desc make_pd(const Problem& p, const memory::desc& src,
                                                    const memory::desc& dst) {
  memory::dims strides, dilates, pad_l, pad_r;
  for (int a = 0; a < p.spatial_rank; ++a) {
    strides.push_back(p.stride[a]);
    dilates.push_back(p.dilation[a] - 1);  // oneDNN counts the gaps, 0 = dense
    pad_l.push_back(p.pads_begin[a]);
    // Whatever makes oneDNN's output size equal ours: output_padding and output_shape both end up here.
    pad_r.push_back((p.in[a] - 1) * p.stride[a] + (p.kernel[a] - 1) * p.dilation[a] + 1 - p.pads_begin[a] -
                    p.out[a]);
  }
  const memory::desc weights(weights_dims(p), memory::data_type::f32, memory::format_tag::any);
  dnnl::deconvolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::deconvolution_direct,
                                      src, weights, dst, strides, dilates, pad_l, pad_r);
  return dnnl::deconvolution_forward::primitive_desc(d, engine());
}

// A primitive with its weights already in the layout it chose.
struct Variant {
  dnnl::deconvolution_forward::primitive_desc pd;
  dnnl::deconvolution_forward prim;
  memory weights;

  Variant(const Problem& p, const memory::desc& src, const memory::desc& dst, dnnl::stream& s,
          const float* user_weights)
      : pd(make_pd(p, src, dst)), prim(pd), weights(pd.weights_desc(), engine()) {
    memory user(user_weights_md(p), engine(), const_cast<float*>(user_weights));
    dnnl::reorder(user, weights).execute(s, user, weights);
    s.wait();
  }
};

}  // namespace

struct OnednnDeconv::State {
  dnnl::stream stream{engine()};
  memory src, dst;  // the caller's buffers, in the user's layout
  Variant a, b;
  // (b)'s own layouts, with reorders built once as a user would; absent when oneDNN chose the user's layout.
  memory src_b, dst_b;
  std::optional<dnnl::reorder> to_b, from_b;

  State(const Problem& p, const float* src_ptr, const float* weights, float* dst_ptr)
      : src(user_data_md(p, p.c_in, p.in), engine(), const_cast<float*>(src_ptr)),
        dst(user_data_md(p, p.c_out, p.out), engine(), dst_ptr),
        a(p, src.get_desc(), dst.get_desc(), stream, weights),
        b(p, any_like(src.get_desc()), any_like(dst.get_desc()), stream, weights),
        src_b(src),
        dst_b(dst) {
    if (b.pd.src_desc() != src.get_desc()) {
      src_b = memory(b.pd.src_desc(), engine());
      to_b.emplace(src, src_b);
    }
    if (b.pd.dst_desc() != dst.get_desc()) {
      dst_b = memory(b.pd.dst_desc(), engine());
      from_b.emplace(dst_b, dst);
    }
  }

  static memory::desc any_like(const memory::desc& md) {
    return memory::desc(md.dims(), memory::data_type::f32, memory::format_tag::any);
  }
};

void onednn_configure(Isa max_isa, int threads) {
  if (max_isa == Isa::avx2) dnnl::set_max_cpu_isa(dnnl::cpu_isa::avx2);
  if (max_isa == Isa::avx512_core) dnnl::set_max_cpu_isa(dnnl::cpu_isa::avx512_core);
  // This oneDNN runs on OpenMP, which ignores oneTBB arenas.
  if (threads > 0) omp_set_num_threads(threads);
}

std::string onednn_version() {
  const dnnl_version_t* v = dnnl::version();
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}

std::unique_ptr<OnednnDeconv> OnednnDeconv::create(const Problem& p, const float* src, const float* weights,
                                                   float* dst, std::string* why) {
  if (p.dtype != DType::f32) {
    *why = "not f32";
    return nullptr;
  }
  try {
    return std::unique_ptr<OnednnDeconv>(new OnednnDeconv(std::make_unique<State>(p, src, weights, dst)));
  } catch (const std::exception& e) {
    *why = e.what();
    return nullptr;
  }
}

OnednnDeconv::OnednnDeconv(std::unique_ptr<State> s) : s_(std::move(s)) {}
OnednnDeconv::~OnednnDeconv() = default;

void OnednnDeconv::run_user_layout() {
  State& s = *s_;
  s.a.prim.execute(s.stream, {{DNNL_ARG_SRC, s.src}, {DNNL_ARG_WEIGHTS, s.a.weights}, {DNNL_ARG_DST, s.dst}});
  s.stream.wait();
}

void OnednnDeconv::run_any_layout() {
  State& s = *s_;
  if (s.to_b) s.to_b->execute(s.stream, s.src, s.src_b);
  s.b.prim.execute(s.stream, {{DNNL_ARG_SRC, s.src_b}, {DNNL_ARG_WEIGHTS, s.b.weights}, {DNNL_ARG_DST, s.dst_b}});
  if (s.from_b) s.from_b->execute(s.stream, s.dst_b, s.dst);
  s.stream.wait();
}

std::string OnednnDeconv::impl_user_layout() const { return s_->a.pd.impl_info_str(); }
std::string OnednnDeconv::impl_any_layout() const { return s_->b.pd.impl_info_str(); }

}  // namespace deconvjit::bench
