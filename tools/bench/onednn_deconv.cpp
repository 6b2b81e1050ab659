#include "bench/onednn_deconv.hpp"

#include <omp.h>

#include <dnnl.hpp>
#include <algorithm>
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

// oneDNN always names data dims {N, C, spatial...}; the strides say where the data lives in layout `f`.
memory::data_type data_type(DType t) {
  switch (t) {
    case DType::bf16: return memory::data_type::bf16;
    case DType::f16: return memory::data_type::f16;
    case DType::f32: break;
  }
  return memory::data_type::f32;
}

memory::desc data_md(const Problem& p, DataFormat f, int64_t channels, const std::vector<int64_t>& spatial) {
  memory::dims dims{p.batch, channels};
  dims.insert(dims.end(), spatial.begin(), spatial.end());
  const int64_t plane = std::accumulate(spatial.begin(), spatial.end(), int64_t{1}, std::multiplies<>());
  memory::dims strides;
  if (f == DataFormat::NCX) {
    strides = {channels * plane, plane};
    const memory::dims s = packed_strides(spatial, 1);
    strides.insert(strides.end(), s.begin(), s.end());
  } else {
    strides = {channels * plane, 1};
    const memory::dims s = packed_strides(spatial, channels);
    strides.insert(strides.end(), s.begin(), s.end());
  }
  return memory::desc(dims, data_type(p.dtype), strides);
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
  return memory::desc(weights_dims(p), data_type(p.dtype), strides);
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
  const memory::desc weights(weights_dims(p), data_type(p.dtype), memory::format_tag::any);
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
          const void* user_weights)
      : pd(make_pd(p, src, dst)), prim(pd), weights(pd.weights_desc(), engine()) {
    memory user(user_weights_md(p), engine(), const_cast<void*>(user_weights));
    dnnl::reorder(user, weights).execute(s, user, weights);
    s.wait();
  }
};

// src and dst as plain tensors in one layout.
struct Plain {
  memory src, dst;
};

memory own_like(const memory::desc& md) { return memory(md, engine()); }

}  // namespace

struct OnednnDeconv::State {
  dnnl::stream stream{engine()};
  int user;        // index of the caller's layout in `plain`: 0 NCX, 1 NXC
  Plain plain[2];  // the caller's buffers in its layout, this object's own in the other
  // Each absent when oneDNN has no implementation for it (a 16-bit type in an old oneDNN); `why` says so.
  std::optional<Variant> ncx, nxc, any;
  std::string why;
  memory src_any, dst_any;                           // in the formats `any` chose, filled once from src
  std::optional<dnnl::reorder> to_any[2], from_any[2];  // absent where `any` chose that plain layout

  State(const Problem& p, const void* src_ptr, const void* weights, void* dst_ptr)
      : user(p.data_format == DataFormat::NXC),
        plain{make_plain(p, DataFormat::NCX, src_ptr, dst_ptr), make_plain(p, DataFormat::NXC, src_ptr, dst_ptr)} {
    try_variant(ncx, p, plain[0].src.get_desc(), plain[0].dst.get_desc(), weights);
    try_variant(nxc, p, plain[1].src.get_desc(), plain[1].dst.get_desc(), weights);
    try_variant(any, p, any_like(plain[0].src.get_desc()), any_like(plain[0].dst.get_desc()), weights);
    dnnl::reorder(plain[user].src, plain[1 - user].src).execute(stream, plain[user].src, plain[1 - user].src);
    if (any) prepare_any();
    stream.wait();
  }

  // Builds `v`, or leaves it empty and keeps the first refusal; other failures (a bad mapping) propagate.
  void try_variant(std::optional<Variant>& v, const Problem& p, const memory::desc& src, const memory::desc& dst,
                   const void* weights) {
    try {
      v.emplace(p, src, dst, stream, weights);
    } catch (const dnnl::error& e) {
      if (p.dtype == DType::f32 || e.status != dnnl_unimplemented) throw;
      if (why.empty()) why = std::string("onednn: unsupported for ") + to_string(p.dtype);
    }
  }

  void prepare_any() {
    src_any = own_like(any->pd.src_desc());
    dst_any = own_like(any->pd.dst_desc());
    dnnl::reorder(plain[user].src, src_any).execute(stream, plain[user].src, src_any);
    for (int l = 0; l < 2; ++l) {
      if (any->pd.src_desc() != plain[l].src.get_desc()) to_any[l].emplace(plain[l].src, src_any);
      if (any->pd.dst_desc() != plain[l].dst.get_desc()) from_any[l].emplace(dst_any, plain[l].dst);
    }
  }

  // The caller's buffers in the caller's layout; this object's own in the other.
  static Plain make_plain(const Problem& p, DataFormat f, const void* src, void* dst) {
    const memory::desc s = data_md(p, f, p.c_in, p.in), d = data_md(p, f, p.c_out, p.out);
    if (f != p.data_format) return {own_like(s), own_like(d)};
    return {memory(s, engine(), const_cast<void*>(src)), memory(d, engine(), dst)};
  }

  static memory::desc any_like(const memory::desc& md) {
    return memory::desc(md.dims(), md.data_type(), memory::format_tag::any);
  }

  void execute(Variant& v, const memory& src, const memory& dst) {
    v.prim.execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, v.weights}, {DNNL_ARG_DST, dst}});
  }

  // `any` on tensors of layout `l`, paying the reorders a user holding plain tensors pays.
  void any_from(int l) {
    if (to_any[l]) to_any[l]->execute(stream, plain[l].src, src_any);
    execute(*any, to_any[l] ? src_any : plain[l].src, from_any[l] ? dst_any : plain[l].dst);
    if (from_any[l]) from_any[l]->execute(stream, dst_any, plain[l].dst);
  }

  const memory& result_of(OnednnRun r) const {
    switch (r) {
      case OnednnRun::plain_ncx:
      case OnednnRun::any_from_ncx: return plain[0].dst;
      case OnednnRun::plain_nxc:
      case OnednnRun::any_from_nxc: return plain[1].dst;
      case OnednnRun::any_kernel: break;
    }
    return dst_any;
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

std::unique_ptr<OnednnDeconv> OnednnDeconv::create(const Problem& p, const void* src, const void* weights,
                                                   void* dst, std::string* why) {
  try {
    auto s = std::make_unique<State>(p, src, weights, dst);
    *why = s->why;
    if (!s->ncx && !s->nxc && !s->any) return nullptr;
    return std::unique_ptr<OnednnDeconv>(new OnednnDeconv(std::move(s)));
  } catch (const std::exception& e) {
    *why = e.what();
    return nullptr;
  }
}

OnednnDeconv::OnednnDeconv(std::unique_ptr<State> s) : s_(std::move(s)) {}
OnednnDeconv::~OnednnDeconv() = default;

bool OnednnDeconv::has(OnednnRun r) const {
  switch (r) {
    case OnednnRun::plain_ncx: return s_->ncx.has_value();
    case OnednnRun::plain_nxc: return s_->nxc.has_value();
    default: return s_->any.has_value();
  }
}

void OnednnDeconv::run(OnednnRun r) {
  State& s = *s_;
  switch (r) {
    case OnednnRun::plain_ncx: s.execute(*s.ncx, s.plain[0].src, s.plain[0].dst); break;
    case OnednnRun::plain_nxc: s.execute(*s.nxc, s.plain[1].src, s.plain[1].dst); break;
    case OnednnRun::any_from_ncx: s.any_from(0); break;
    case OnednnRun::any_from_nxc: s.any_from(1); break;
    case OnednnRun::any_kernel: s.execute(*s.any, s.src_any, s.dst_any); break;
  }
  s.stream.wait();
}

void OnednnDeconv::result_to_user(OnednnRun r) {
  State& s = *s_;
  memory from = s.result_of(r), to = s.plain[s.user].dst;
  if (from.get_data_handle() == to.get_data_handle()) return;
  dnnl::reorder(from, to).execute(s.stream, from, to);
  s.stream.wait();
}

std::string OnednnDeconv::impl(OnednnRun r) const {
  if (!has(r)) return "";
  switch (r) {
    case OnednnRun::plain_ncx: return s_->ncx->pd.impl_info_str();
    case OnednnRun::plain_nxc: return s_->nxc->pd.impl_info_str();
    default: return s_->any->pd.impl_info_str();
  }
}

// oneDNN's own notation for a blocked layout: dimensions a, b, c... from the outermost stride in, upper
// case when blocked, then the inner blocks ("aBcd16b" is nChw16c).
std::string OnednnDeconv::any_src_format() const {
  if (!s_->any) return "";
  const dnnl_memory_desc_t& md = s_->any->pd.src_desc().data;
  if (md.format_kind != dnnl_blocked) return "not blocked";
  const dnnl_blocking_desc_t& b = md.format_desc.blocking;
  std::vector<int> order(static_cast<size_t>(md.ndims));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return b.strides[x] > b.strides[y]; });
  std::string tag;
  for (int d : order) {
    const bool blocked = std::find(b.inner_idxs, b.inner_idxs + b.inner_nblks, d) != b.inner_idxs + b.inner_nblks;
    tag += static_cast<char>((blocked ? 'A' : 'a') + d);
  }
  for (int i = 0; i < b.inner_nblks; ++i) {
    tag += std::to_string(b.inner_blks[i]) + static_cast<char>('a' + b.inner_idxs[i]);
  }
  return tag;
}

const char* to_string(OnednnRun r) {
  switch (r) {
    case OnednnRun::plain_ncx: return "ncx";
    case OnednnRun::plain_nxc: return "nxc";
    case OnednnRun::any_from_ncx: return "any+reorders from ncx";
    case OnednnRun::any_from_nxc: return "any+reorders from nxc";
    case OnednnRun::any_kernel: return "any";
  }
  return "?";
}

}  // namespace deconvjit::bench
