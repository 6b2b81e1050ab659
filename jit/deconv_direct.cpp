// The direct family (also gemm and depthwise, which differ only in the plan's geometry and in how an
// input reaches the FMAs): register block = ur_w pixels x nv channel vectors.
#include <algorithm>
#include <cassert>

#include "jit/row_kernel.hpp"
#include "runtime/cpu.hpp"

namespace deconvjit::jit {
namespace {

using namespace Xbyak;
using detail::Plan;

class DirectGenerator : public RowKernelGenerator {
 public:
  using RowKernelGenerator::RowKernelGenerator;

 private:
  int nv() const { return bk_->vectors; }
  int n_bcast() const { return zmm() ? 2 : 1; }
  int sets() const { return detail::accumulator_sets(pl_, w_, nv()); }
  int nacc() const { return sets() * w_ * nv(); }
  Xmm acc(int p, int v, int s = 0) const { return vreg((s * w_ + p) * nv() + v); }
  // Plan::weight_regs: the block's first wr() weight vectors live in registers, the FMAs read the others.
  int wr() const { return detail::weights_in_registers(pl_, nv()); }
  Xmm wvec(int v) const { return vreg(nacc() + v); }
  Xmm bvec(int p) const { return vreg(nacc() + wr() + p % n_bcast()); }
  bool depthwise() const { return pl_.algorithm == detail::Algorithm::depthwise; }

  // bf16_even_odd: 0xffff0000 in every dword; AVX-512 keeps it in a register (plan.cpp keeps one free),
  // AVX2 reads it from the io table (bf16_odd).
  Zmm odd_mask() const { return Zmm(31); }
  Xmm odd_temp() const { return vreg(nacc() + nv() + 1); }  // the odd channels' vector (AVX2)

  void emit_prologue() override {
    assert(nacc() + wr() + n_bcast() <= detail::vector_registers(pl_.isa));
    if (pl_.bf16_even_odd && zmm()) {
      mov(eax, 0xffff0000u);
      vpbroadcastd(odd_mask(), eax);
    }
    if (zmm() && bk_->mask_lanes) {
      mov(eax, (1u << bk_->mask_lanes) - 1);
      kmovw(k1, eax);
    }
  }

  void emit_zero() override { zero_sets(0); }

  void zero_sets(int from) {
    for (int s = from; s < sets(); ++s)
      for (int p = 0; p < w_; ++p)
        for (int v = 0; v < nv(); ++v) vxorps(acc(p, v, s), acc(p, v, s), acc(p, v, s));
  }

  // Plan::acc_chains: the other sets' partial sums join set 0 before the store, in a fixed order.
  void combine_sets() {
    for (int s = 1; s < sets(); ++s)
      for (int p = 0; p < w_; ++p)
        for (int v = 0; v < nv(); ++v) vaddps(acc(p, v), acc(p, v), acc(p, v, s));
  }

  // Pairs: each step covers two channels (the odd last one too), a 32-bit slot of weights per lane.
  int64_t reduction_src_bytes() const override {
    return (pl_.ic_pairs ? 2 * detail::ic_steps(pl_) : pl_.ic_block) * pl_.src_ic_stride * seb();
  }
  int64_t reduction_wei_bytes() const override { return detail::ic_steps(pl_) * bk_->wei_ic_step * kFloat; }

  // A later pass of a split reduction starts from what the earlier passes stored (contiguous dst only).
  void emit_load_partial() override {
    assert(pl_.dst_c == 1 && !io16());  // split reductions are f32 only (plan.cpp)
    const bool masked = bk_->mask_lanes != 0;
    mov(r_sx, r_dst);
    for (int p = 0; p < w_; ++p) {
      for (int v = 0; v < nv(); ++v) {
        const Address a = ptr[r_sx + v * vbytes()];
        if (!(masked && v == nv() - 1)) {
          vmovups(acc(p, v), a);
        } else if (zmm()) {
          vmovups(Zmm(acc(p, v).getIdx()) | k1 | T_z, a);
        } else {
          vmovups(wvec(0), ptr[rip + l_mask_]);
          vmaskmovps(Ymm(acc(p, v).getIdx()), Ymm(wvec(0).getIdx()), a);
        }
      }
      if (p + 1 < w_) add_imm(r_sx, pl_.dst_pix_stride * kFloat, r_ic);
    }
    zero_sets(1);
  }

  void emit_reduction() override {
    if (pl_.ic_pairs) return emit_pair_reduction();
    const int64_t ic = pl_.ic_block;
    const int u = pl_.ic_unroll;
    const int64_t iters = ic / u;
    const int rem = static_cast<int>(ic % u);
    auto unrolled = [&] {
      if (grouped_widening())
        emit_widened_group();
      else
        for (int k = 0; k < u; ++k) emit_ic_step(k);
    };
    if (iters == 1) {
      unrolled();
      advance_ic(u);
    } else if (iters > 1) {
      Label l_ic;
      mov(r_ic, iters);
      L(l_ic);
      unrolled();
      advance_ic(u);
      dec(r_ic);
      jnz(l_ic, T_NEAR);
    }
    for (int k = 0; k < rem; ++k) emit_ic_step(k);
    if (rem) advance_ic(rem);
  }

  bool grouped_widening() const { return detail::f16_grouped_widening(pl_); }
  int slot_bytes() const { return std::max(16, 4 * pl_.ic_unroll); }  // one pixel's widened channels
  int stack_bytes() const override { return grouped_widening() ? w_ * slot_bytes() : 0; }

  void emit_widened_group() {
    const int u = pl_.ic_unroll;
    if (pl_.prefetch_src)  // (a pass reads all its pixels' channels at once: each asked for at its first)
      for (int p = 0; p < w_; ++p) prefetch_pixel(p, 0);
    for (int p = p_lo_; p < p_hi_; ++p) {
      const int idx = bvec(p).getIdx();
      const Xmm t = u == 16 ? Zmm(idx) : u == 8 ? Ymm(idx) : Xmm(idx);
      // The widening instructions read 8 bytes from memory at 2 and 4 channels: two channels go through
      // vmovd, so nothing past the group's channels is read.
      const Address a = ptr[r_sx + p * pl_.src_pix_stride * seb()];
      if (u == 2) vmovd(t, a);
      const Operand& from = u == 2 ? static_cast<const Operand&>(t) : static_cast<const Operand&>(a);
      if (pl_.dtype == DType::f16) {
        vcvtph2ps(t, from);
      } else {
        vpmovzxwd(t, from);
        vpslld(t, t, 16);
      }
      vmovups(ptr[rsp + p * slot_bytes()], t);
    }
    for (int k = 0; k < u; ++k) {
      const int64_t wofs = k * bk_->wei_ic_step * kFloat;
      load_weights(wofs);
      for (int p = p_lo_; p < p_hi_; ++p) {
        if (nv() == 1 && zmm()) {  // the widened channel straight from its slot (see embedded_broadcast)
          vfmadd231ps(acc(p, 0, k % sets()), wvec(0), ptr_b[rsp + p * slot_bytes() + 4 * k]);
          continue;
        }
        vbroadcastss(bvec(p), dword[rsp + p * slot_bytes() + 4 * k]);
        fma_pixel(p, k % sets(), wofs);
      }
    }
  }

  // bf16 pairs of input channels through vdpbf16ps: the same loop over pairs, then an odd last channel.
  void emit_pair_reduction() {
    assert(pl_.src_ic_stride == 1 && zmm());
    const int u = pl_.ic_unroll;
    const int64_t pairs = pl_.ic_block / 2, iters = pairs / u;
    const int rem = static_cast<int>(pairs % u);
    if (iters > 0) {
      Label l_ic;
      if (iters > 1) mov(r_ic, iters);
      L(l_ic);
      for (int k = 0; k < u; ++k) emit_pair_step(k, false);
      advance_ic(u);
      if (iters > 1) {
        dec(r_ic);
        jnz(l_ic, T_NEAR);
      }
    }
    for (int k = 0; k < rem; ++k) emit_pair_step(k, false);
    if (rem) advance_ic(rem);
    if (pl_.ic_block % 2) {
      emit_pair_step(0, true);
      advance_ic(1);
    }
  }

  // nv weight vectors of 16 pairs, one broadcast pair per pixel, w*nv vdpbf16ps. A lone last channel
  // is broadcast with a zero partner: its weight partner is zero too, but an infinite or NaN input times
  // zero would not be.
  void emit_pair_step(int k, bool lone) {
    const int64_t wofs = k * bk_->wei_ic_step * kFloat;
    for (int v = 0; v < nv(); ++v) vmovups(wvec(v), ptr[r_wx + wofs + v * vbytes()]);
    if (!lone) prefetch_next_block(k, 2 * k);
    for (int p = p_lo_; p < p_hi_; ++p) {
      const int64_t sofs = (p * pl_.src_pix_stride + 2 * k) * seb();
      const Zmm b(bvec(p).getIdx());
      if (lone) {
        vpbroadcastw(b, word[r_sx + sofs]);
        vpandd(b, b, ptr[rip + l_low_]);
      } else {
        vpbroadcastd(b, dword[r_sx + sofs]);
      }
      for (int v = 0; v < nv(); ++v) vdpbf16ps(Zmm(acc(p, v, k % sets()).getIdx()), Zmm(wvec(v).getIdx()), b);
    }
  }

  // AVX-512 blocks of one channel vector (at most 16 output channels) with an f32 source (or f16 widened
  // into the stack slots): each broadcast feeds a single FMA, so the FMA reads it itself (an embedded
  // {1to16} broadcast). A separate vbroadcastss per FMA held such kernels at 72% of the FMA peak on Zen 4
  // (enet_bottleneck4_0, 1 thread); with the broadcast inside the FMA, 96% (2 threads: f32 1.12-1.39x on
  // the 11 such NXC suite layers, f16 1.34-1.40x on 7). Blocks of two or more vectors share each broadcast
  // register among their FMAs and gained nothing from it (measured at two and four); bf16 pairs
  // (vpbroadcastd) neither.
  bool embedded_broadcast() const { return zmm() && nv() == 1 && !src16(); }

  void advance_ic(int n) {
    add_imm(r_sx, n * (pl_.ic_pairs ? 2 : 1) * pl_.src_ic_stride * seb(), r_ic);
    add_imm(r_wx, n * bk_->wei_ic_step * kFloat, r_ic);
  }

  // The weight vectors of one input channel (wofs bytes on) that the block keeps in registers.
  void load_weights(int64_t wofs) {
    for (int v = 0; v < wr(); ++v) vmovups(wvec(v), ptr[r_wx + wofs + v * vbytes()]);
  }

  // Pixel p's FMAs with its broadcast: the weights in registers, then those read from memory.
  void fma_pixel(int p, int set, int64_t wofs) {
    for (int v = 0; v < nv(); ++v) {
      if (v < wr())
        vfmadd231ps(acc(p, v, set), wvec(v), bvec(p));
      else
        vfmadd231ps(acc(p, v, set), bvec(p), ptr[r_wx + wofs + v * vbytes()]);
    }
  }

  // Plan::prefetch_src: the source of the next block along the row (w pixels on, where the row kernel moves
  // r_src), asked for at the offsets this block reads. Step k of an unrolled pass asks for the pixels
  // p = k (mod ic_unroll) at its own channel (bf16 pairs: channel 2k), so each pass asks once per pixel;
  // past a row's last block it asks for whatever follows, which costs nothing.
  void prefetch_next_block(int k, int channel) {
    if (!pl_.prefetch_src) return;
    for (int p = k; p < w_; p += pl_.ic_unroll) prefetch_pixel(p, channel);
  }
  void prefetch_pixel(int p, int channel) {
    prefetcht0(ptr[r_sx + ((w_ + p) * pl_.src_pix_stride + channel * pl_.src_ic_stride) * seb()]);
  }

  // One input channel: nv weight vectors, one broadcast per pixel, w*nv FMAs.
  void emit_ic_step(int k) {
    const int64_t wofs = k * bk_->wei_ic_step * kFloat;
    load_weights(wofs);
    if (depthwise()) return emit_depthwise_step();
    prefetch_next_block(k, k);
    for (int p = p_lo_; p < p_hi_; ++p) {
      const int64_t sofs = (p * pl_.src_pix_stride + k * pl_.src_ic_stride) * seb();
      if (embedded_broadcast()) {
        vfmadd231ps(acc(p, 0, k % sets()), wvec(0), ptr_b[r_sx + sofs]);
        continue;
      }
      if (src16())
        broadcast_io(bvec(p), ptr[r_sx + sofs]);
      else
        vbroadcastss(bvec(p), ptr[r_sx + sofs]);
      fma_pixel(p, k % sets(), wofs);
    }
  }

  // Depthwise: the channels are the vector lanes, so inputs are whole vectors, not broadcasts. The last
  // vector of a tail block is loaded under the mask: past the last channel may lie past the buffer.
  void emit_depthwise_step() {
    if (pl_.bf16_even_odd) return emit_even_odd_step();
    for (int p = 0; p < w_; ++p)
      for (int v = 0; v < nv(); ++v) {
        const Address a = ptr[r_sx + (p * pl_.src_pix_stride + v * pl_.lanes) * seb()];
        const bool masked = bk_->mask_lanes && v == nv() - 1;
        if (!src16() && !masked) {
          vfmadd231ps(acc(p, v), wvec(v), a);
          continue;
        }
        load_depthwise_src(bvec(0), a, masked);
        vfmadd231ps(acc(p, v), wvec(v), bvec(0));
      }
  }

  // One source vector of channels as f32 into `dst` (masked: only the block's last lanes).
  void load_depthwise_src(const Xmm& dst, const Address& a, bool masked) {
    if (src16()) {
      if (masked)
        load_io_lanes(dst, a, 0, bk_->mask_lanes, k1);
      else
        load_io(dst, a);
    } else if (!masked) {
      vmovups(dst, a);
    } else if (zmm()) {
      vmovups(Zmm(dst.getIdx()) | k1 | T_z, a);
    } else {
      vmovups(dst, ptr[rip + l_mask_]);
      vmaskmovps(Ymm(dst.getIdx()), Ymm(dst.getIdx()), a);
    }
  }

  // A whole pair of bf16 channel vectors as dwords: the even channels into `even`, the odd into `odd`.
  void load_even_odd(const Xmm& even, const Xmm& odd, const Address& a) {
    if (zmm()) {
      vpslld(Zmm(even.getIdx()), a, 16);
      vpandd(Zmm(odd.getIdx()), odd_mask(), a);
    } else {
      vmovdqu(Ymm(even.getIdx()), a);
      bf16_odd(odd, even);
      vpslld(even, even, 16);
    }
  }

  // Plan::fused_x_taps: tap t of pixel p reads source pixel p + k t (k source pixels per x tap, negative),
  // so the n taps of a block of w pixels read w + (n - 1) |k| of them, each loaded (and widened) once
  // here for every tap whose weights it meets. The pixels go in the order that gives each accumulator its
  // taps in the tap loop's order (t ascending): the sums are the loop's, bit for bit. (Delaying tap t's
  // FMAs by t pixels, to space an accumulator's taps further apart, measured the same on all 12 depthwise
  // suite layers in the three types, within 2%; not kept.)
  Xmm ftap(int i) const { return vreg(nacc() + i); }
  void emit_fused_x(int n) override {
    const int per = pl_.bf16_even_odd ? 2 : 1;  // channel vectors per load
    assert(nacc() + per * (n + 1) + (pl_.bf16_even_odd && zmm()) <= detail::vector_registers(pl_.isa));
    const int64_t k = pl_.src_tap_step[2] / pl_.src_pix_stride, wstep = bk_->wei_tap_step[2] * kFloat;
    assert(k < 0);
    const int64_t hi = w_ - 1, lo = k * (n - 1);  // the pixels read, loaded from hi down to lo
    const Xmm src0 = ftap(per * n), src1 = ftap(per * n + 1);
    for (int g = 0; g < nv() / per; ++g) {
      for (int t = 0; t < n; ++t)
        for (int h = 0; h < per; ++h)
          vmovups(ftap(t * per + h), ptr[r_wx + t * wstep + (g * per + h) * vbytes()]);
      for (int64_t j = hi; j >= lo; --j) {
        const Address a = ptr[r_sx + (j * pl_.src_pix_stride + g * per * pl_.lanes) * seb()];
        if (per == 2)
          load_even_odd(src0, src1, a);
        else
          load_depthwise_src(src0, a, bk_->mask_lanes && g == nv() - 1);
        for (int t = 0; t < n; ++t) {
          const int64_t p = j - k * t;
          if (p < 0 || p >= w_) continue;
          for (int h = 0; h < per; ++h)
            vfmadd231ps(acc(static_cast<int>(p), g * per + h), ftap(t * per + h), h ? src1 : src0);
        }
      }
    }
  }

  // bf16 depthwise, 2 * lanes channels per vector pair: dword i holds channels 2i (low half) and 2i + 1
  // (high half), so a shift widens the even ones and a mask the odd ones: no shuffle, where widening
  // each vector (vpmovzxwd) costs one per FMA. AVX-512 reads memory in both; AVX2 loads once (its
  // shifts take no memory operand).
  void emit_even_odd_step() {
    const Xmm even = bvec(0), odd = zmm() ? bvec(1) : odd_temp();
    for (int p = 0; p < w_; ++p)
      for (int m = 0; m < nv() / 2; ++m) {
        load_even_odd(even, odd, ptr[r_sx + (p * pl_.src_pix_stride + m * 2 * pl_.lanes) * seb()]);
        vfmadd231ps(acc(p, 2 * m), wvec(2 * m), even);
        vfmadd231ps(acc(p, 2 * m + 1), wvec(2 * m + 1), odd);
      }
  }

  // The store of emit_even_odd_step's accumulators: both rounded to bf16, interleaved into 2 * lanes
  // channels (AVX-512 may store non-temporally; 16-bit data on AVX2 never does, nt_stores_possible), by
  // vcvtne2ps2bf16 and one vpermw where the CPU has them, on AVX2 by narrow_bf16_interleave.
  void emit_even_odd_store(bool nt) {
    const Xmm t1 = wvec(0), t2 = bvec(0);
    mov(r_sx, r_dst);
    for (int p = 0; p < w_; ++p) {
      for (int m = 0; m < nv() / 2; ++m) {
        const Address a = ptr[r_sx + m * 2 * pl_.lanes * eb()];
        if (bf16_ne()) {
          const Zmm out(t1.getIdx());
          const Zmm even(acc(p, 2 * m).getIdx()), odd(acc(p, 2 * m + 1).getIdx());
          narrow_bf16_pair(even, odd, out, Zmm(t2.getIdx()));
          nt ? vmovntdq(a, out) : vmovdqu32(a, out);
          continue;
        }
        if (!zmm()) {
          narrow_bf16_interleave(Ymm(acc(p, 2 * m).getIdx()), Ymm(acc(p, 2 * m + 1).getIdx()), Ymm(t1.getIdx()),
                                 Ymm(t2.getIdx()));
          vmovdqu(a, Ymm(t1.getIdx()));
          continue;
        }
        // AVX-512 without vcvtneps2bf16: integer rounding of both, the odd words shifted into place.
        narrow_io(acc(p, 2 * m), t1, false);
        narrow_io(acc(p, 2 * m + 1), t2, false);
        vpslld(t2, t2, 16);
        vpord(Zmm(t1.getIdx()), Zmm(t1.getIdx()), Zmm(t2.getIdx()));
        nt ? vmovntdq(a, Zmm(t1.getIdx())) : vmovdqu32(a, Zmm(t1.getIdx()));
      }
      if (p + 1 < w_) add_imm(r_sx, pl_.dst_pix_stride * eb(), r_ic);
    }
  }

  void emit_store() override {
    combine_sets();
    if (pl_.dst_c != 1) return emit_scatter_store();
    emit_stores_by_line(pl_.kernel_nt_stores(), r_dst, [&](bool nt) { emit_contiguous_store(nt); });
  }

  void emit_contiguous_store(bool nt) {
    if (pl_.bf16_even_odd) return emit_even_odd_store(nt);
    if (io16()) return emit_typed_store(nt);
    emit_f32_store(nt);
  }

  void emit_f32_store(bool nt) {
    const bool masked = bk_->mask_lanes != 0;
    mov(r_sx, r_dst);
    for (int p = 0; p < w_; ++p) {
      for (int v = 0; v < nv(); ++v) {
        const Address a = ptr[r_sx + v * vbytes()];
        if (masked && v == nv() - 1) {
          if (zmm())
            vmovups(a | k1, Zmm(acc(p, v).getIdx()));
          else
            store_f32_lanes(a, Ymm(acc(p, v).getIdx()), 0, bk_->mask_lanes, wvec(0));
        } else if (nt) {
          vmovntps(a, acc(p, v));
        } else {
          vmovups(a, acc(p, v));
        }
      }
      if (p + 1 < w_) add_imm(r_sx, pl_.dst_pix_stride * kFloat, r_ic);
    }
  }

  // 16-bit dst: rounded on the way out; the weight and broadcast registers are free by now.
  void emit_typed_store(bool nt) {
    const Xmm t1 = wvec(0), t2 = bvec(0);
    mov(r_sx, r_dst);
    for (int p = 0; p < w_; ++p) {
      for (int v = 0; v < nv(); ++v) {
        const Address a = ptr[r_sx + v * pl_.lanes * eb()];
        if (bk_->mask_lanes && v == nv() - 1)
          store_io_lanes(a, acc(p, v), 0, bk_->mask_lanes, k1, t1);
        else if (nt)
          store_io_nt(a, acc(p, v), t1, t2);
        else
          store_io(a, acc(p, v), t1);
      }
      if (p + 1 < w_) add_imm(r_sx, pl_.dst_pix_stride * eb(), r_ic);
    }
  }

  // Channel-strided (NCX) output: each vector's lanes land dst_c floats apart. A scatter clears its
  // mask as it completes, so the mask is set again before each one.
  void emit_scatter_store() {
    const Zmm idx = Zmm(wvec(0).getIdx());
    vmovups(idx, ptr[rip + l_index_]);
    mov(r_sx, r_dst);
    const int64_t vec_stride = int64_t{pl_.lanes} * pl_.dst_c * kFloat;
    for (int p = 0; p < w_; ++p) {
      for (int v = 0; v < nv(); ++v) {
        if (bk_->mask_lanes && v == nv() - 1)
          kmovw(k2, k1);
        else
          kxnorw(k2, k2, k2);
        vscatterdps(ptr[r_sx + idx * kFloat + static_cast<int32_t>(v * vec_stride)] | k2,
                    Zmm(acc(p, v).getIdx()));
      }
      if (p + 1 < w_) add_imm(r_sx, pl_.dst_pix_stride * kFloat, r_ic);
    }
  }

  // AVX2 has no opmask: its masked loads read lane masks from this table (stores: store_f32_lanes).
  void emit_tables() override {
    if (pl_.ic_pairs) {
      align(64);
      L(l_low_);
      for (int i = 0; i < 16; ++i) dd(0xffffu);
    }
    align(32);
    L(l_mask_);
    for (int i = 0; i < 8; ++i) dd(i < pl_.last.mask_lanes ? 0xffffffffu : 0u);
    if (pl_.dst_c == 1) return;
    align(64);
    L(l_index_);
    for (int i = 0; i < pl_.lanes; ++i) dd(static_cast<uint32_t>(i * pl_.dst_c));
  }

  Label l_mask_, l_index_, l_low_;
};

// Generous upper bound: every instruction at most 12 bytes.
size_t code_bound(const Plan& pl) {
  size_t total = 4096;
  for (const detail::BlockKind* bk : {&pl.main, &pl.last}) {
    const size_t nv = bk->vectors;
    for (size_t w = 1; w <= static_cast<size_t>(pl.ur_w); ++w) {
      const size_t step = nv + w + w * nv;
      const size_t sets = static_cast<size_t>(detail::accumulator_sets(pl, static_cast<int>(w), bk->vectors));
      total += 512 + 2 * pl.ic_unroll * step * 12 + w * (nv + 2) * 24 + 2 * sets * w * nv * 8;
      if (pl.dtype != DType::f32) total += 2 * pl.ic_unroll * w * 12 + w * nv * 24 * 12;  // conversions
      const size_t k = static_cast<size_t>(pl.axes[2].tap_i_step);
      for (size_t n = 2; n <= static_cast<size_t>(pl.fused_x_taps); ++n)  // emit_fused_x
        total += 64 + (n * nv + (w + (n - 1) * k) * (3 + n * nv)) * 12;
    }
    for (const detail::EdgeBlock& e : pl.edges) {  // a function of its width, a reduction per tap
      const size_t w = static_cast<size_t>(e.width), step = nv + w + w * nv;
      const size_t sets = static_cast<size_t>(detail::accumulator_sets(pl, e.width, bk->vectors));
      const size_t widening = pl.dtype != DType::f32 ? 2 * pl.ic_unroll * w * 12 : 0;
      const size_t reduction = 2 * pl.ic_unroll * step * 12 + 64 + widening;
      total += 512 + static_cast<size_t>(e.taps) * reduction + w * (nv + 2) * 24 + 2 * sets * w * nv * 8 +
               (pl.dtype != DType::f32 ? w * nv * 24 * 12 : 0);
    }
  }
  return total;
}

}  // namespace

EmittedCode emit_direct(const Plan& plan) {
  DirectGenerator gen(plan, code_bound(plan));
  return gen.run();
}

}  // namespace deconvjit::jit
