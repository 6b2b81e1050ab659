// Planning for the x-vector families: depthwise_x (depthwise on NCX data with the vector along output x)
// and dot_x (1-4 output channels, the same lane algebra with a reduction over input channels).
//
// Output lane l of a vector starting at x0 (a multiple of the span, x_vector_span: the lane count or the
// largest multiple of the stride s in it, hence a multiple of s) has
// phase r_l = (l + pad) mod s and sees kernel x = r_l + s*j at input x0/s + (l + pad) div s - j, for
// j = 0 .. ceil(Kx/s) - 1 (floor division: pads may be negative). So for each j one input vector,
// permuted by the fixed index (l + pad) div s - pad div s, times a per-lane weight vector covers every
// phase of the vector at once.
#include <algorithm>
#include <limits>

#include "runtime/cpu.hpp"
#include "runtime/int_math.hpp"
#include "runtime/plan.hpp"

namespace deconvjit::detail {
namespace {

// Registers besides the accumulators: the permutation index, two input temporaries (on AVX2 border
// vectors the second also holds the weight masked to the row), and on AVX2 the lane mask of a masked
// load (AVX-512 uses opmasks).
int fixed_registers(Isa isa) { return isa == Isa::avx512_core ? 3 : 4; }

bool tile_fits(Isa isa, int u, int cb) {
  return u >= 1 && cb >= 1 && cb * u + cb + fixed_registers(isa) <= vector_registers(isa);
}

// u output vectors of cb channels. Channel planes a multiple of 4 KiB apart alias in L1 and in the store
// buffer (dla_up_dw256: 0.096 ms with 4 channels per block, 0.050 ms with one), so a block takes several
// channels only when the planes do not alias. Splitting each sum in two for more FMA chains on narrow
// rows measured no gain (0.050 / 0.050 ms), so the tile stays simple.
void choose_tile(Plan& pl, const Problem& p, const TuningHints& h, int64_t row_vectors) {
  const bool z = pl.isa == Isa::avx512_core;
  const int chains = z ? 12 : 8;  // independent FMAs that cover the FMA latency
  int64_t in_sp = 1, out_sp = 1;
  for (int64_t v : p.in) in_sp *= v;
  for (int64_t v : p.out) out_sp *= v;
  const bool aliasing = in_sp % 1024 == 0 || out_sp % 1024 == 0;
  int u = static_cast<int>(std::min<int64_t>(row_vectors, chains));
  if (h.ur_w) u = h.ur_w;
  int cb = aliasing ? 1 : std::clamp(chains / u, 1, 4);
  if (h.oc_vectors) cb = h.oc_vectors;
  while (!h.oc_vectors && cb > 1 && !tile_fits(pl.isa, u, cb)) --cb;
  check_hint(tile_fits(pl.isa, u, cb), "depthwise_x: ur_w " + std::to_string(u) + " vectors of " +
                                           std::to_string(cb) + " channels do not fit the register file");
  check_hint(std::max(in_sp, out_sp) * 4 * cb < (int64_t{1} << 31),
             "depthwise_x: " + std::to_string(cb) + " channel planes per block exceed 32-bit displacements");
  pl.ur_w = u;
  pl.oc_vectors = cb;
}

}  // namespace

namespace {

// The lane algebra's conditions, shared by depthwise_x and dot_x. Channel planes are addressed with 32-bit
// displacements, up to 4 channels per register block (a depthwise_x hint asking for more is checked in
// plan_depthwise_x). Blocks that need masks are unrolled, and there are about as many as x taps per
// output: bounded so the code stays small. Any x stride up to the lanes: where it does not divide them, each
// vector holds the largest multiple of it (x_vector_span) and stores through a mask.
bool x_vectors_fit(const Problem& p, Isa isa) {
  const int64_t s = p.stride.back();
  int64_t in_sp = 1, out_sp = 1;
  for (int64_t v : p.in) in_sp *= v;
  for (int64_t v : p.out) out_sp *= v;
  const bool small_planes = std::max(in_sp, out_sp) * 4 * 4 < (int64_t{1} << 31);
  const int64_t x_taps = (p.kernel.back() + s - 1) / s;
  return p.dilation.back() == 1 && s <= vector_lanes(isa) && small_planes && x_taps <= 16;
}

}  // namespace

// Idle lanes (stride 3 or 5: 6 or 5 of AVX2's 8, 15 of AVX-512's 16) cost depthwise far less than the
// route it had before, whole-tensor copies or a row buffer, whose transposes outweigh its few FMAs (Zen 4,
// NCX, 2 threads, every suite and holdout layer that moved, against the old default's plan by its choices,
// two passes, docs/data/x_span_default_vs_old_*): f32 AVX2 2.05x over 7 (1.71-2.44; s223 ho41 1-D
// stride 5 2.4x), AVX-512 1.72x over 10 (0.81-2.57), bf16 1.52x / 1.81x, f16 2.10x / 1.94x (0.90-3.22; the
// lows are a 7x7 input, s97 ho31, at 5-8 us). Plane tiles beat it where they applied on AVX2 (16-bit
// s23 ho01 0.52-0.67x, s97 ho31 0.62-0.69x): plane_tiles_preferred keeps them there. dot_x with idle lanes
// was mixed against the dot family's source copy (docs/data/x_span_forced_dot_x_*: 0.42-1.99, fsrcnn_x3
// 0.45x on AVX2 and 0.71x on AVX-512, s223 ho26 1.2x / 1.8x), so its default keeps whole vectors, as does
// one_channel_native (no such layer measured).
bool x_vectors_whole(const Problem& p, Isa isa) { return vector_lanes(isa) % p.stride.back() == 0; }

// NCX data, or one channel in and out (either layout: the same bytes).
bool depthwise_x_applies(const Problem& p, Isa isa) {
  const bool planes = p.data_format == DataFormat::NCX || (p.c_in == 1 && p.c_out == 1);
  return p.c_in_per_group() == 1 && p.c_out_per_group() == 1 && planes && x_vectors_fit(p, isa);
}

bool dot_x_applies(const Problem& p, Isa isa) {
  return p.groups == 1 && p.c_out <= kDotMaxOc && p.data_format == DataFormat::NCX && x_vectors_fit(p, isa);
}

// For 1-4 output channels on NCX data. dot_x saves dot's copy of the source to NXC (a pass over it that no
// kernel size changes), and with fewer than 8 input channels it fills vectors where every other family
// leaves them nearly empty. It pays, per input channel, loop and mask work at every tap and row edge, and
// a permute per FMA when one output channel shares none. So: rows of at least 64 pixels, at most 8 x taps
// per output, and with several output channels at most 4 taps per output (2 threads, NCX, ms, default
// against dot_x: flownets_flow3_up, 2 -> 2 channels, 0.031 / 0.004; fcn16s_siftflow_geo_upscore16
// 0.091 / 0.031; wavegan_up5_b16 2.16 / 1.53; gcnet_l37_crop 4.65 / 3.66; but 16 x taps segan_deconv11
// 0.114 / 0.165, a 7x7 kernel with 3 outputs resnet50_bwd_stem_b16 15.3 / 19.1, 31-pixel rows
// cdcgan_mnist_h2_b64 0.70 / 1.51, 8 taps with 3 outputs vgan_fg_g4 1.40 / 1.59; at x stride 1 there is no
// permute: 9 taps with 3 outputs lsgan_d7_b16 tuned 1.58x faster in dot_x). bf16 dot reduces channel pairs
// at twice the FMA rate on CPUs with avx512_bf16, so there only copy-bound layers, with at most 15 products
// per source element, go to dot_x (dprnn_decoder 0.086 / 0.300, pwcnet_upfeat3 with 32 products 1.31 /
// 0.93). gemm_x, where it is preferred, reads NCX in place without either cost. (1 -> 1 layers take
// depthwise_x first.)
// On AVX2 (where col_x_preferred does not take the layer) the dot family's copy of the source repays from 24
// products per source element with at most 3 output channels (its block then holds 4-12 pixels; with 4 it
// holds 2). AVX2, NCX, 2 threads, dot_x against dot, docs/data/dot_x_avx2_zen4_2t.txt: f32 sweep of every
// suite and holdout layer dot_x took: from 24 products dot won on all 10 (1.00-1.42x); below, dot_x won 6
// (1-D layers of 2-16 products: dprnn_decoder 5.2x, convtasnet_decoder 1.8x; a 1x1 layer 1.4x; 2 input
// channels 8x) and lost 3 (dbnet_head_up2 at 4 products 0.82x, a 2-channel 1-D layer at 16 0.79x, a 2-D layer
// at 16 0.95x); with 4 channels dot_x won both (1.4-1.5x). On the 17 layers the rule moves, in f32, bf16 and
// f16: 0.97-2.36x, geomean 1.48 (dcgan_g5 f32 0.73 -> 0.59 ms; with fused x taps fsrcnn_x2 7.59 -> 3.79;
// vqvae2_dec_out_b16 0.97-1.01, wavegan_up5_b16 f32 0.98).
// At x stride 1 the exception for several output channels holds up to 9 taps per output (the 3x3 kernel
// it was measured on): a 7x7 kernel at stride 1 with 4 outputs, holdout s197 ho14, ran 1.61x faster in dot
// (0.52 / 0.84 ms, AVX2, two sweeps each timing both in turn in one process,
// docs/data/dot_x_vs_dot_avx2_s19_zen4_2t.jsonl), and s53 ho43 (the same kernel on 28-pixel rows, which
// keep it from dot_x) 1.6x.
namespace {
bool dot_copy_repays_on_avx2(const Problem& p, Isa isa, int64_t taps) {
  return isa == Isa::avx2 && p.c_out <= 3 && p.c_out * taps >= 24 && dot_applies(p);
}
}  // namespace

bool dot_x_preferred(const Problem& p, Isa isa) {
  int64_t taps = 1, per_output = 1;
  for (size_t i = 0; i < p.kernel.size(); ++i) {
    taps *= p.kernel[i];
    per_output *= ceil_div(p.kernel[i], p.stride[i]);
  }
  const int64_t x_taps = ceil_div(p.kernel.back(), p.stride.back());
  const bool pairs = avx512_bf16_usable(p.dtype, isa);
  const bool no_permute = p.stride.back() == 1 && per_output <= 9;
  return p.out.back() >= 64 && x_taps <= 8 && (p.c_out == 1 || per_output <= 4 || no_permute) &&
         (!pairs || p.c_out * taps < 16) && dot_x_applies(p, isa) && x_vectors_whole(p, isa) &&
         !(gemm_x_preferred(p) && gemm_x_by_default(p, isa)) && !dot_copy_repays_on_avx2(p, isa, taps);
}

namespace {

// The strides and weight steps both x-vector families read.
void set_x_vector_geometry(Plan& pl, const Problem& p) {
  const Axis &az = pl.axes[0], &ay = pl.axes[1], &ax = pl.axes[2];
  BlockKind k;
  k.vectors = pl.oc_vectors;
  k.wei_k_floats = ceil_div(ax.kernel, ax.stride) * pl.lanes;
  k.wei_tap_step = {az.tap_k_step * ay.kernel * k.wei_k_floats, ay.tap_k_step * k.wei_k_floats, 0};
  pl.main = pl.last = k;
  const int64_t in_sp = az.in * ay.in * ax.in, out_sp = az.out * ay.out * ax.out;
  pl.src_c = in_sp, pl.src_x = 1, pl.src_n = p.c_in * in_sp;
  pl.dst_c = out_sp, pl.dst_x = 1, pl.dst_n = p.c_out * out_sp;
  pl.src_ic_stride = pl.src_c;
  pl.src_pix_stride = pl.dst_pix_stride = 1;
  pl.src_tap_step = {-az.tap_i_step * ay.in * ax.in, -ay.tap_i_step * ax.in, -1};
}

}  // namespace

// dot_x: the register block holds every output channel (at most 4) for ur_w vectors; each input channel's
// permuted vector feeds all of them, and the call walks the input channels.
void plan_dot_x(Plan& pl, const Problem& p, const TuningHints& h) {
  check_hint(h.x_split >= 0 && h.x_split <= 1, "dot_x computes whole rows (x_split 1)");
  check_hint(h.ic_block <= 0 || h.ic_block == p.c_in, "dot_x reduces over all input channels in one pass");
  check_hint(h.x_halo != 1, "dot_x masks its loads at the borders instead of a halo");
  check_hint(h.batch_block != 1 && h.oc_loop <= 1, "dot_x walks rows (no batch_block, oc_loop 1)");
  const int oc = static_cast<int>(p.c_out);
  check_hint(!h.oc_vectors || h.oc_vectors == oc, "dot_x holds all output channels (oc_vectors " +
                                                       std::to_string(oc) + ")");
  pl.algorithm = Algorithm::dot_x;
  pl.layout = LayoutPath::ncx_native;
  pl.x_split = 1;
  pl.oc_vectors = oc;
  // Enough accumulators to hide the FMA latency, within the row and the register file: a narrow row (a
  // 28-pixel output is two vectors) takes several sets of them, each summing every k-th input channel.
  const int64_t row_vectors = ceil_div(pl.axes[2].out, x_vector_span(pl));
  const int chains = pl.isa == Isa::avx512_core ? 12 : 8;
  int u = static_cast<int>(std::min<int64_t>(row_vectors, ceil_div(chains, oc)));
  while (u > 1 && !tile_fits(pl.isa, u, oc)) --u;
  if (h.ur_w) u = h.ur_w;
  int k = static_cast<int>(std::min<int64_t>({p.c_in, ceil_div(chains, u * oc), 8}));
  while (k > 1 && !tile_fits(pl.isa, u * k, oc)) --k;
  if (h.ic_unroll) k = h.ic_unroll;
  check_hint(k >= 1 && k <= 8 && tile_fits(pl.isa, u * k, oc),
             "dot_x: ur_w " + std::to_string(u) + " vectors of " + std::to_string(oc) + " channels in " +
                 std::to_string(k) + " sets (ic_unroll) do not fit the register file");
  pl.ur_w = u;
  pl.ic_unroll = k;
  pl.channels_per_call = oc;
  pl.oc_blocks = 1;
  set_x_vector_geometry(pl, p);
}

namespace {

// A call writes one output row of each of its channels: rows a plane apart, a write stream each. Where the
// output outgrows the caches (12 MB) and a call holds 8+ channels, those streams miss on every line; calls
// then take the fewest whole register blocks that still write 512 elements. Zen 4, 2 threads, NCX, every
// suite and holdout depthwise_x layer, all channels per call against 1 and 4 blocks
// (docs/data/depthwise_x_channels_per_call_zen4_2t.jsonl): from 12.8 MB 4 blocks won on AVX2 1.10-2.20x and
// on AVX-512 0.96-1.57x, one channel more over rows of 512+ (holdout s37 ho11, rows of 558, 1.64x) and less
// over short ones (mobilenetv2_bwd_dw96_b16, rows of 112, 0.79x on AVX-512); below 12 MB the caches keep the
// output and fewer channels lost (dla_up_dw256 0.37-0.85x); calls of 2-6 channels (1-D rows of 20000+) gained
// nothing (0.94-1.01x). The 17 layers the rule moves, against their old plans by hint
// (docs/data/depthwise_x_streams_ab_zen4_2t.jsonl): f32 AVX-512 1.21x (0.98-1.76; s23 ho09 1.75x), AVX2 1.56x
// (1.04-2.47; mobilenetv2_bwd_dw96_b16 2.46x, s37 ho15 2.47x); f16 and bf16 1.29x over 48 rows, 12 at
// 0.93-0.99 (holdout s71 ho24, efficientnetb0_bwd_dw144_b16, s89 ho07: rows of 56-160 at 4-12 channels per
// call).
int64_t streaming_channels(const Plan& pl, const Problem& p) {
  const int64_t dst_bytes = p.dst_elements() * pl.elem_bytes();
  if (dst_bytes < (int64_t{12} << 20)) return std::numeric_limits<int64_t>::max();
  return ceil_div(ceil_div(int64_t{512}, pl.axes[2].out), int64_t{pl.oc_vectors}) * pl.oc_vectors;
}

}  // namespace

void plan_depthwise_x(Plan& pl, const Problem& p, const TuningHints& h) {
  check_hint(h.ic_unroll >= 0 && h.ic_unroll <= 1, "depthwise_x has no input-channel loop to unroll");
  check_hint(h.x_split >= 0 && h.x_split <= 1, "depthwise_x computes whole rows (x_split 1)");
  check_hint(h.ic_block <= 1, "depthwise_x has no reduction over channels to split");
  check_hint(h.x_halo != 1, "depthwise_x masks its loads at the borders instead of a halo");
  check_hint(h.batch_block != 1 && h.oc_loop <= 1, "depthwise_x walks rows of channel planes "
                                                    "(no batch_block, oc_loop 1)");
  pl.algorithm = Algorithm::depthwise_x;
  pl.layout = LayoutPath::ncx_native;
  pl.groups = 1;
  pl.oc_per_group = p.c_out;
  const Axis &az = pl.axes[0], &ay = pl.axes[1], &ax = pl.axes[2];
  pl.ic_unroll = 1;
  pl.x_split = 1;

  choose_tile(pl, p, h, ceil_div(ax.out, x_vector_span(pl)));

  // Calls: one output row of channels_per_call channels (a multiple of the register block's channels).
  const int64_t rows = pl.batch * az.out * ay.out;
  const int64_t groups_of_cb = ceil_div(p.c_out, pl.oc_vectors);
  const int64_t chunks = std::clamp<int64_t>(ceil_div(kTargetTasks, rows), 1, groups_of_cb);
  pl.channels_per_call = ceil_div(groups_of_cb, chunks) * pl.oc_vectors;
  if (pl.channels_per_call >= 8)
    pl.channels_per_call = std::min(pl.channels_per_call, streaming_channels(pl, p));
  if (h.channels_per_call) {
    check_hint(h.channels_per_call % pl.oc_vectors == 0 && h.channels_per_call <= groups_of_cb * pl.oc_vectors,
               "depthwise_x: channels_per_call must be a multiple of oc_vectors (" +
                   std::to_string(pl.oc_vectors) + ") up to the channels rounded up to it");
    pl.channels_per_call = h.channels_per_call;
  }
  pl.oc_blocks = ceil_div(p.c_out, pl.channels_per_call);
  set_x_vector_geometry(pl, p);
}

}  // namespace deconvjit::detail
