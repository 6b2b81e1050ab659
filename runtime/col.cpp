// The col family: few input pixels and large weights (sbl_deconv1: 48 pixels, 33.5 MB of weights). The row
// families give each weight to one register block of a phase (6 pixels); here one GEMM over all input
// pixels (an inner kernel: kernel 1, stride 1, taps * C_OUT output channels) gives it to every pixel,
// and the taps' products are then summed into the output (col2im, as oneDNN's plain path does: generated
// sums, jit/col_sum.cpp, called by executor.cpp).
#include <chrono>
#include <vector>

#include "jit/deconv_kernels.hpp"
#include "runtime/compiled_kernel.hpp"
#include "runtime/cpu.hpp"
#include "runtime/half.hpp"
#include "runtime/jit_profile.hpp"
#include "runtime/memory.hpp"
#include "runtime/plan.hpp"
#include "runtime/schedule.hpp"

namespace deconvjit::detail {
namespace {

int64_t product(const std::vector<int64_t>& v) {
  int64_t n = 1;
  for (int64_t x : v) n *= x;
  return n;
}

}  // namespace

// The share of col's products that some output uses: per axis, the (output, tap) pairs that meet an
// input over all input x tap pairs. A 1x1 input cropped by pads uses few of them (pix2pix_innermost_up:
// 1 of 4 taps per axis, col 0.111 ms against the direct family's 0.03 on 2 threads).
double col_useful_share(const Problem& p) {
  double share = 1;
  for (size_t i = 0; i < p.in.size(); ++i) {
    int64_t used = 0;
    for (int64_t o = 0; o < p.out[i]; ++o)
      for (int64_t k = 0; k < p.kernel[i]; ++k) {
        const int64_t t = o + p.pads_begin[i] - k * p.dilation[i];
        used += t >= 0 && t % p.stride[i] == 0 && t / p.stride[i] < p.in[i];
      }
    share *= static_cast<double>(used) / static_cast<double>(p.in[i] * p.kernel[i]);
  }
  return share;
}

// Worth it when the weights dwarf what a register block of a phase row can reuse from L2, and the
// products of all taps stay small: measured on sbl_deconv1 (below 24 MB of weights the row families keep
// the weights in L3 and win: dcgan_g2 has 8.4 MB and runs at 97% of peak as it is; 19-20 MB layers of the
// holdout sets lost with col, 512 -> 384 channels at 7x7 pixels 0.91x, 768 -> 384 over 8 images of 2x3
// 0.60x, Zen 4 with 32 MB of L3; col's winners below have 33.6-52 MB). The pixel bound
// sits between the layers measured either side of it (NXC, 2 threads, col against the default): col won
// at 100-108 input pixels (sbl_r50_384_deconv1 1.27x, qwen25omni_bigvgan_up1 1.11x, bigvgan_up1 1.04x)
// and lost from 192 (flownets_deconv4 0.93x, pix2pix_up_1024_256 at 256 0.97x), where each weight
// already meets enough pixels in the row families' register blocks.
bool col_preferred(const Problem& p, Isa isa) {
  const int64_t pixels = product(p.in), taps = product(p.kernel);
  const int64_t weight_bytes = p.c_in * p.c_out / p.groups * taps * 4;
  const int64_t col_bytes = p.batch * pixels * taps * p.c_out * 4;
  // Sums in halves it cannot give (its GEMM and sums are f32).
  const bool possible = p.accumulation == DType::f32 && p.groups == 1 && taps > 1 &&
                        col_bytes <= (int64_t{64} << 20) && col_useful_share(p) >= 0.5;
  // Not over 4+ images of short rows: there the row families block over images, so each weight already
  // meets ur_w images in registers (16 images: sbl_r50_256_deconv1_b16 col 0.86x, a 3D layer of 2x2x2
  // pixels 0.60x; docs/data/col_types_sweep_zen4_2t.txt, f32 columns).
  const bool big_weights = pixels <= 128 && weight_bytes >= (int64_t{24} << 20) &&
                           !batch_blocking_pays(p.batch, p.out.back(), p.stride.back(), Isa::avx512_core);
  // Output channels that leave vectors half empty (and too many for the dot family), where the taps x
  // channels of col's GEMM fill them, as gemm's folded phases do (keypointrcnn_b8, 17 channels in two
  // vectors: 2.03 -> 1.36 ms on 2 threads, NXC). Only on long reductions: a col element then costs at
  // least 512 FLOPs and its write, read-back and sum are small next to them; on 20-channel inputs col
  // lost 3-6x (ov_spec_ex1, fcn8s_upscore2). On NXC data a fifth better suffices (Zen 4, 2 threads, NXC,
  // col against the row families, docs/data/col_sweep_nxc_zen4_2t.jsonl: 1D layers of 512 channels,
  // 21 -> 21x10 lanes 1.24-1.29x, 40 -> 40x16 1.15x; densepose_index_uv_b8 25 -> 25x16 1.02x); NCX data
  // would pay col's copies where col_x fills vectors along x instead (densepose_index_uv_b8 NCX: col 0.78x
  // of col_x).
  // Lanes are the ISA's (8 on AVX2: 8 or 24 channels fill them). Where gemm applies to NXC data (aligned:
  // col against gemm was measured there) its folded x phases fill lanes too, C_OUT x the stride of them:
  // that is the fill col must beat there. Zen 4, 2 threads, NXC, col against gemm on all 8 suite and
  // holdout layers where col was the default and gemm applied (docs/data/col_vs_gemm_zen4_2t.jsonl): AVX2
  // gemm 1.02-1.58x on 7 (s131 ho09, 320 -> 8 at k = s = 2: 2.48 -> 1.57 ms), 0.997 on demucs_dec6 (col
  // for its big weights, unchanged); AVX-512 gemm 1.05-1.78x where the folded channels fill 16 lanes (8 x 2,
  // 40 x 4), 0.84-1.00x where they do not (12 x 2 = 24 of 32 lanes, 19 x 2: col stays). The 24 rows that
  // left col with both changes, against col by hint (docs/data/col_rule_by_isa_flips_zen4_2t.jsonl): AVX2
  // 1.09x over 22 (s131 ho25 1.26-1.29; below 0.97: keypointrcnn_b8 NCX 0.74, whose NXC layer keeps col, and
  // s89 ho22 0.91-0.94), AVX-512 1.20x over 2.
  const int64_t oc = p.c_out, lanes = vector_lanes(isa);
  const double better = p.data_format == DataFormat::NXC ? 1.2 : 1.5;
  const Axis x = make_axis(p, p.spatial_rank - 1);
  const bool gemm_folds = p.data_format == DataFormat::NXC && gemm_applies(p, x) && gemm_aligned(x);
  const int64_t row_channels = gemm_folds ? oc * x.stride : oc;  // what the row families fill
  // f32 only: for 16-bit data col widens sources of hundreds to thousands of pixels here, which the row
  // families read at half the bytes (on the 9 such layers where f32 takes col, 16-bit col geomean 0.80-0.96,
  // 5-6 of them below 0.97; docs/data/col_types_sweep_zen4_2t.txt). Big weights come with at most 128
  // pixels, whose widened copy is small: there 16-bit col wins as f32's does (11 layers: f16 geomean 1.08
  // NXC and 1.06 NCX, gan3d_g1 0.91 the one below 0.97; AVX2 f16 1.16, none below 1.03; AVX2 bf16 1.05-1.07);
  // make_plan leaves bf16 channel pairs out (col 0.28-0.65x of them there).
  const bool fills_lanes = p.dtype == DType::f32 && oc > 4 && p.c_in >= 256 &&
                           lane_use(taps * oc, lanes) >= better * lane_use(row_channels, lanes);
  return possible && (big_weights || fills_lanes);
}

// col's own plan: the inner GEMM is planned (and compiled) as a kernel of its own; this plan names it.
void plan_col(Plan& pl, const Problem& p, Isa isa, const TuningHints& h) {
  check_hint(p.groups == 1, "algorithm col needs G=1");
  TuningHints others = h;
  others.algorithm.clear();
  check_hint(others.empty(), "algorithm col takes no other hints (its inner GEMM is planned by the "
                             "heuristic)");
  // The inner kernel is col's own ISA's code (build_col pins it the same way).
  const Plan inner = make_plan_at(resolve(col_inner_descriptor(p)), isa, {});
  pl.algorithm = Algorithm::col;
  pl.layout = p.data_format == DataFormat::NXC ? LayoutPath::nxc : LayoutPath::ncx_via_scratch;
  pl.ur_w = inner.ur_w;
  pl.oc_vectors = inner.oc_vectors;
  pl.parallel = inner.parallel;
  pl.packing = "col/" + inner.packing;
}

Descriptor col_inner_descriptor(const Problem& p) {
  Descriptor d;
  const int64_t pixels = product(p.in), taps = product(p.kernel);
  d.src = {p.batch, pixels, p.c_in};
  d.weights = {p.c_in, taps * p.c_out, 1};
  d.strides = {1};
  d.data_format = DataFormat::NXC;
  d.weights_format = WeightsFormat::OIX;
  return d;
}

Options col_inner_options(const Plan& plan, const Options& options) {
  Options inner = options;
  inner.max_isa = plan.isa;
  inner.hints = {};
  inner.hints.isa = to_string(plan.isa);  // (which also keeps the tuning database out, as plan_col does)
  return inner;
}

std::shared_ptr<const CompiledKernel> build_col(const Problem& p, const Plan& plan, const Options& options) {
  const auto t0 = std::chrono::steady_clock::now();
  auto k = std::make_shared<CompiledKernel>();
  k->problem = p;
  k->plan = plan;
  k->inner = compile(col_inner_descriptor(p), col_inner_options(plan, options));
  const jit::EmittedCode code = jit::emit_col_sum(plan);
  k->code = std::make_unique<jit::CodeBuffer>(code.bytes.data(), code.bytes.size());
  jit_profile_code(k->code->data(), k->code->size(), plan.name + "_sum");
  const uintptr_t entry = reinterpret_cast<uintptr_t>(k->code->data() + code.entries[0][0]);
  k->fns[0].push_back(reinterpret_cast<jit::KernelFn>(entry));
  for (int64_t o = 0; o < plan.axes[0].out; ++o) k->schedule.z.push_back(axis_taps(plan.axes[0], o));
  for (int64_t o = 0; o < plan.axes[1].out; ++o) k->schedule.y.push_back(axis_taps(plan.axes[1], o));
  for (int64_t o = 0; o < plan.axes[2].out; ++o) k->x_taps.push_back(axis_taps(plan.axes[2], o));
  k->compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return k;
}

// The user's weights as the inner kernel's OIX weights [C_IN][t * C_OUT + co] (f32: 16-bit weights are
// widened exactly), then its own packing.
void pack_col_weights(const CompiledKernel& k, const void* weights, float* out) {
  const Problem& p = k.problem;
  const int64_t taps = product(p.kernel), ci_n = p.c_in, co_n = p.c_out;
  const uint64_t inner_floats = size_product({ci_n, taps, co_n});
  require_memory(float_bytes(inner_floats), "packing the weights");
  std::vector<float> inner(static_cast<size_t>(inner_floats));
  for (int64_t ci = 0; ci < ci_n; ++ci)
    for (int64_t co = 0; co < co_n; ++co)
      for (int64_t t = 0; t < taps; ++t) {
        const int64_t i = p.weights_format == WeightsFormat::XIO ? (t * co_n + co) * ci_n + ci
                                                                  : (ci * co_n + co) * taps + t;
        inner[static_cast<size_t>((ci * taps + t) * co_n + co)] = static_cast<float>(load_element(weights, p.dtype, i));
      }
  pack_weights_into(*k.inner.impl(), inner.data(), out);
}

}  // namespace deconvjit::detail
