// The dot family, for very few output channels: the vector lanes run over input channels, each output
// channel of each pixel keeps one accumulator, and a horizontal sum finishes every output. Register
// block = ur_w pixels x C_OUT/G accumulators.
#include <cassert>
#include <cstdint>
#include <vector>

#include "jit/row_kernel.hpp"
#include "runtime/cpu.hpp"

namespace deconvjit::jit {
namespace {

using namespace Xbyak;
using detail::Plan;

class DotGenerator : public RowKernelGenerator {
 public:
  using RowKernelGenerator::RowKernelGenerator;

 private:
  int n_oc() const { return bk_->vectors; }
  Xmm acc(int p, int o) const { return vreg(p * n_oc() + o); }
  Xmm wvec(int o) const { return vreg(w_ * n_oc() + o); }
  Xmm xvec() const { return vreg(w_ * n_oc() + n_oc()); }
  int64_t full_vectors() const { return pl_.ic_vectors - (pl_.ic_tail_lanes ? 1 : 0); }

  void emit_prologue() override {
    assert(w_ * n_oc() + n_oc() + 1 <= detail::vector_registers(pl_.isa));
    assert(pl_.src_ic_stride == 1);
    if (zmm() && pl_.ic_tail_lanes) {  // (pairs: a mask of up to 32 words)
      mov(eax, static_cast<uint32_t>((uint64_t{1} << pl_.ic_tail_lanes) - 1));
      kmovd(k1, eax);
    }
    if (zmm() && io16()) {  // the lanes of one pixel's outputs (or one, when they lie apart)
      mov(eax, (1u << (gathered_store() ? n_oc() : 1)) - 1);
      kmovw(k5, eax);
    }
  }

  void emit_zero() override {
    for (int p = 0; p < w_; ++p)
      for (int o = 0; o < n_oc(); ++o) vxorps(acc(p, o), acc(p, o), acc(p, o));
  }

  int64_t reduction_src_bytes() const override { return full_vectors() * src_vbytes(); }
  int src_vbytes() const { return pl_.lanes * static_cast<int>(seb()) * (pl_.ic_pairs ? 2 : 1); }
  int64_t reduction_wei_bytes() const override { return full_vectors() * vbytes(); }

  void emit_reduction() override {
    emit_even_odd_pairs();
    const int64_t full = full_vectors() - 2 * detail::dot_even_odd_pairs(pl_);
    if (full == 1) {
      emit_step(false);
      add(r_sx, src_vbytes());
      add(r_wx, vbytes());
    } else if (full > 1) {
      Label l_ic;
      mov(r_ic, full);
      L(l_ic);
      emit_step(false);
      add(r_sx, src_vbytes());
      add(r_wx, vbytes());
      dec(r_ic);
      jnz(l_ic, T_NEAR);
    }
    if (pl_.ic_tail_lanes) emit_step(true);  // at the pointers the full vectors left
  }

  // One input-channel vector: C_OUT weight vectors, one input vector per pixel. The tail vector is
  // loaded under a mask (zeroing the lanes past the last channel, which may lie past the buffer); its
  // weights are zero-padded.
  void emit_step(bool tail) {
    const int64_t oc_stride = pl_.ic_vectors * vbytes();
    for (int o = 0; o < n_oc(); ++o) vmovups(wvec(o), ptr[r_wx + o * oc_stride]);
    for (int p = 0; p < w_; ++p) {
      const Address a = ptr[r_sx + p * pl_.src_pix_stride * seb()];
      prefetch_next_block(p);
      if (pl_.ic_pairs) {  // 32 bf16 channels as they are: vdpbf16ps pairs them with the weights
        if (tail)
          vmovdqu16(Zmm(xvec().getIdx()) | k1 | T_z, a);
        else
          vmovdqu16(Zmm(xvec().getIdx()), a);
        for (int o = 0; o < n_oc(); ++o)
          vdpbf16ps(Zmm(acc(p, o).getIdx()), Zmm(wvec(o).getIdx()), Zmm(xvec().getIdx()));
        continue;
      }
      load_src(a, tail);
      for (int o = 0; o < n_oc(); ++o) vfmadd231ps(acc(p, o), wvec(o), xvec());
    }
  }

  // Plan::prefetch_src: pixel p's vector (or pair) at this step in the next block along the row (w pixels
  // on, where the row kernel moves r_src); past a row's last block whatever follows, which costs nothing.
  void prefetch_next_block(int p) {
    if (pl_.prefetch_src) prefetcht0(ptr[r_sx + (w_ + p) * pl_.src_pix_stride * seb()]);
  }

  // One pixel's input-channel vector into xvec() as f32 (the tail under its mask; a widened source is f32).
  void load_src(const Address& a, bool tail) {
    if (src16()) {
      if (tail)
        load_io_lanes(xvec(), a, 0, pl_.ic_tail_lanes, k1);
      else
        load_io(xvec(), a);
    } else if (!tail) {
      vmovups(xvec(), a);
    } else if (zmm()) {
      vmovups(Zmm(xvec().getIdx()) | k1 | T_z, a);
    } else {
      vmovups(xvec(), ptr[rip + l_mask_]);
      vmaskmovps(Ymm(xvec().getIdx()), Ymm(xvec().getIdx()), a);
    }
  }

  // Plan::fused_x_taps: a phase's n x taps in one pass per input-channel vector. Tap t of pixel p reads
  // source pixel p + k t (k source pixels per x tap, negative), so the block's w pixels read w + (n - 1)|k|
  // source vectors instead of w n: each is loaded (and widened) once for every tap whose weights it meets,
  // from the last pixel down, which gives each accumulator its taps in ascending order. The tap loop runs
  // taps outside the channel vectors, this runs them inside: the same products, summed in another order.
  Xmm ftap(int t, int o) const { return vreg((w_ + 1 + t) * n_oc() + 1 + o); }  // past xvec()
  void emit_fused_x(int n) override {
    assert(!pl_.ic_pairs && !pl_.bf16_even_odd);
    assert((w_ + 1 + n) * n_oc() + 1 <= detail::vector_registers(pl_.isa));
    const int64_t full = full_vectors();
    if (full > 0) {
      Label l_ic;
      if (full > 1) mov(r_ic, full);
      L(l_ic);
      emit_fused_step(n, false);
      add(r_sx, src_vbytes());
      add(r_wx, vbytes());
      if (full > 1) {
        dec(r_ic);
        jnz(l_ic, T_NEAR);
      }
    }
    if (pl_.ic_tail_lanes) emit_fused_step(n, true);
  }

  void emit_fused_step(int n, bool tail) {
    const int64_t oc_stride = pl_.ic_vectors * vbytes(), wstep = bk_->wei_tap_step[2] * kFloat;
    const int64_t k = pl_.src_tap_step[2] / pl_.src_pix_stride;
    assert(k < 0 && k * pl_.src_pix_stride == pl_.src_tap_step[2]);
    for (int t = 0; t < n; ++t)
      for (int o = 0; o < n_oc(); ++o) vmovups(ftap(t, o), ptr[r_wx + t * wstep + o * oc_stride]);
    auto meets = [&](int64_t j, int t) { return j - k * t >= 0 && j - k * t < w_; };
    for (int p = 0; p < w_; ++p) prefetch_next_block(p);  // (the next block's taps reach back into this one)
    for (int64_t j = w_ - 1; j >= k * (n - 1); --j) {
      bool used = false;  // (a block narrower than |k| pixels skips some between its taps' runs)
      for (int t = 0; t < n; ++t) used |= meets(j, t);
      if (!used) continue;
      load_src(ptr[r_sx + j * pl_.src_pix_stride * seb()], tail);
      for (int t = 0; t < n; ++t)
        if (meets(j, t))
          for (int o = 0; o < n_oc(); ++o) vfmadd231ps(acc(static_cast<int>(j - k * t), o), ftap(t, o), xvec());
    }
  }

  // bf16_even_odd: each whole pair of input-channel vectors (2 x lanes bf16 channels) is read as dwords and
  // split by a shift (even channels) and a mask (odd ones), each against its half of the packed weights;
  // vpmovzxwd would cost a shuffle per vector. Where registers allow, both halves' weights stay in registers
  // and each pixel's pair is loaded once; otherwise (AVX2 with three output channels) the even halves run
  // first and the odd ones load the pixels again.
  Xmm tvec() const { return vreg(w_ * n_oc() + n_oc() + 1); }
  Xmm wodd(int o) const { return vreg(w_ * n_oc() + n_oc() + 2 + o); }
  bool one_load() const { return w_ * n_oc() + 2 * n_oc() + 2 <= detail::vector_registers(pl_.isa); }

  void load_pair(const Xmm& v, const Address& a) {
    if (zmm())
      vmovdqu32(Zmm(v.getIdx()), a);
    else
      vmovdqu(Ymm(v.getIdx()), a);
  }

  void emit_even_odd_pairs() {
    const int64_t pairs = detail::dot_even_odd_pairs(pl_);
    if (pairs == 0) return;
    const int64_t oc_stride = pl_.ic_vectors * vbytes();
    auto pixel = [&](int p) { return ptr[r_sx + p * pl_.src_pix_stride * seb()]; };
    Label l_pair;
    if (pairs > 1) mov(r_ic, pairs);
    L(l_pair);
    if (one_load()) {
      for (int o = 0; o < n_oc(); ++o) {
        vmovups(wvec(o), ptr[r_wx + o * oc_stride]);
        vmovups(wodd(o), ptr[r_wx + vbytes() + o * oc_stride]);
      }
      for (int p = 0; p < w_; ++p) {
        prefetch_next_block(p);
        load_pair(xvec(), pixel(p));
        vpslld(tvec(), xvec(), 16);
        bf16_odd(xvec(), xvec());
        for (int o = 0; o < n_oc(); ++o) {
          vfmadd231ps(acc(p, o), wvec(o), tvec());
          vfmadd231ps(acc(p, o), wodd(o), xvec());
        }
      }
    } else {
      for (int odd = 0; odd < 2; ++odd) {
        for (int o = 0; o < n_oc(); ++o) vmovups(wvec(o), ptr[r_wx + odd * vbytes() + o * oc_stride]);
        for (int p = 0; p < w_; ++p) {
          if (!odd) prefetch_next_block(p);
          load_pair(xvec(), pixel(p));
          if (odd)
            bf16_odd(xvec(), xvec());
          else
            vpslld(xvec(), xvec(), 16);
          for (int o = 0; o < n_oc(); ++o) vfmadd231ps(acc(p, o), wvec(o), xvec());
        }
      }
    }
    add(r_sx, 2 * src_vbytes());
    add(r_wx, 2 * vbytes());
    if (pairs > 1) {
      dec(r_ic);
      jnz(l_pair, T_NEAR);
    }
  }

  // Sum of the lanes of vector register i into its lowest lane; t is clobbered.
  void horizontal_sum(int i, int t) {
    if (zmm()) {
      vextractf64x4(Ymm(t), Zmm(i), 1);
      vaddps(Ymm(i), Ymm(i), Ymm(t));
      vextractf32x4(Xmm(t), Ymm(i), 1);
    } else {
      vextractf128(Xmm(t), Ymm(i), 1);
    }
    vaddps(Xmm(i), Xmm(i), Xmm(t));
    vmovhlps(Xmm(t), Xmm(t), Xmm(i));
    vaddps(Xmm(i), Xmm(i), Xmm(t));
    vmovshdup(Xmm(t), Xmm(i));
    vaddss(Xmm(i), Xmm(i), Xmm(t));
  }

  // 16-bit outputs of one pixel side by side (NXC, at most 4 channels) are rounded together: their sums
  // go into the lanes of one register, so one conversion serves them all (bf16 rounding is ~9 instructions).
  bool gathered_store() const { return io16() && pl_.dst_c == 1 && n_oc() <= 4; }

  void emit_store() override {
    if (gathered_store()) return emit_gathered_store();
    if (tree_store()) return emit_tree_store();
    mov(r_sx, r_dst);
    for (int p = 0; p < w_; ++p) {
      for (int o = 0; o < n_oc(); ++o) {
        horizontal_sum(acc(p, o).getIdx(), xvec().getIdx());
        const Address a = ptr[r_sx + o * pl_.dst_c * eb()];
        if (io16())
          store_io_lanes(a, acc(p, o), 0, 1, k5, xvec());
        else
          vmovss(a, Xmm(acc(p, o).getIdx()));
      }
      if (p + 1 < w_) add_imm(r_sx, pl_.dst_pix_stride * eb(), r_ic);
    }
  }

  // f32 on AVX-512 with 3+ accumulators: each 16 of them are summed together, by halving steps that pair
  // two registers into one (two shuffles and an add per pair) until one register holds all 16 sums: 45
  // instructions where 16 horizontal sums take 128 (with 8 output channels or fewer, every output sums so
  // few products that the sums took up to half the kernel's instructions). Each step adds the same lanes
  // as horizontal_sum does (256-bit halves, then 128, 64, 32), so the results are bit for bit the same.
  // Zen 4, 2 threads, against horizontal sums on the 64 suite and holdout rows of the dot family (f32,
  // AVX-512; docs/data/dot_tree_store_ab_zen4_2t.jsonl): 1.03x geomean, up to 1.24x (dbnet_head_up2),
  // 1.21x (dprnn_decoder). Not with groups: there each group's task writes a few channels of the same
  // output lines as the next group's, on the other thread, and the burst of stores at the end made that
  // contention worse (holdout s11 ho15 and s89 ho32, 0.88-0.96x on 2 threads, 1.03-1.15x on 1).
  bool tree_store() const {
    if (!zmm() || io16() || w_ * n_oc() < 3 || pl_.groups > 1) return false;
    const int64_t far = ((w_ - 1) * pl_.dst_pix_stride + (n_oc() - 1) * pl_.dst_c) * eb();
    return far <= INT32_MAX;
  }

  // One halving step over `regs` (register indices, -1 for a zero): pairs (a, b) become one register
  // whose lanes hold a's partial sums, then b's, at the step's granularity.
  std::vector<int> pair_step(const std::vector<int>& regs, int step, const Zmm& zero, const Zmm& t) {
    std::vector<int> next;
    for (size_t k = 0; k + 1 < regs.size(); k += 2) {
      const int a = regs[k], b = regs[k + 1];
      if (a < 0 && b < 0) {
        next.push_back(-1);
        continue;
      }
      const Zmm A = a >= 0 ? Zmm(a) : zero, B = b >= 0 ? Zmm(b) : zero, dst = Zmm(a >= 0 ? a : b);
      if (step == 0) {  // 256-bit halves: [a.0 + a.2, a.1 + a.3, b.0 + b.2, b.1 + b.3] in 128-bit lanes
        vshuff64x2(t, A, B, 0x44);
        vshuff64x2(dst, A, B, 0xEE);
      } else if (step == 1) {  // 128-bit lanes: [a.0 + a.1, a.2 + a.3, b.0 + b.1, b.2 + b.3]
        vshuff64x2(t, A, B, 0x88);
        vshuff64x2(dst, A, B, 0xDD);
      } else if (step == 2) {  // 64-bit halves of each 128-bit lane
        vunpcklpd(t, A, B);
        vunpckhpd(dst, A, B);
      } else {  // 32-bit pairs
        vshufps(t, A, B, 0x88);
        vshufps(dst, A, B, 0xDD);
      }
      vaddps(dst, dst, t);
      next.push_back(dst.getIdx());
    }
    return next;
  }

  // Accumulator i (pixel-major) of a group of 16 ends in lane 4 (i % 4) + i / 4 of the last register.
  void emit_tree_store() {
    const int n = w_ * n_oc();
    const Zmm zero(wvec(0).getIdx()), t(xvec().getIdx());
    vxorps(zero, zero, zero);
    for (int g = 0; g < n; g += 16) {
      std::vector<int> regs(16, -1);
      for (int i = 0; i < 16 && g + i < n; ++i)
        regs[static_cast<size_t>(i)] = acc((g + i) / n_oc(), (g + i) % n_oc()).getIdx();
      for (int step = 0; step < 4; ++step) regs = pair_step(regs, step, zero, t);
      const Zmm sums(regs[0]);
      for (int lane = 0; lane < 4; ++lane) {
        if (lane) vextractf32x4(Xmm(t.getIdx()), sums, static_cast<uint8_t>(lane));
        const Xmm x = lane ? Xmm(t.getIdx()) : Xmm(sums.getIdx());
        for (int j = 0; j < 4; ++j) {
          const int i = g + 4 * j + lane;
          if (i >= n) continue;
          const int64_t at = ((i / n_oc()) * pl_.dst_pix_stride + (i % n_oc()) * pl_.dst_c) * eb();
          vextractps(ptr[r_dst + static_cast<int32_t>(at)], x, static_cast<uint8_t>(j));
        }
      }
    }
  }

  void emit_gathered_store() {
    mov(r_sx, r_dst);
    for (int p = 0; p < w_; ++p) {
      const Xmm first(acc(p, 0).getIdx());
      for (int o = 0; o < n_oc(); ++o) horizontal_sum(acc(p, o).getIdx(), xvec().getIdx());
      for (int o = 1; o < n_oc(); ++o) vinsertps(first, first, Xmm(acc(p, o).getIdx()), static_cast<uint8_t>(o << 4));
      store_io_lanes(ptr[r_sx], acc(p, 0), 0, n_oc(), k5, xvec());
      if (p + 1 < w_) add_imm(r_sx, pl_.dst_pix_stride * eb(), r_ic);
    }
  }

  void emit_tables() override {
    align(32);
    L(l_mask_);
    for (int i = 0; i < 8; ++i) dd(i < pl_.ic_tail_lanes ? 0xffffffffu : 0u);
  }

  Label l_mask_;
};

size_t code_bound(const Plan& pl) {
  size_t total = 4096;
  const size_t oc = pl.main.vectors;
  for (size_t w = 1; w <= static_cast<size_t>(pl.ur_w); ++w)
    total += 512 + 2 * (oc + 2 * w + w * oc) * 12 + w * oc * 10 * 12;
  if (pl.fused_x_taps) {  // per width and tap count: a full and a tail step, each the weights, loads, FMAs
    const size_t k = static_cast<size_t>(-pl.src_tap_step[2] / pl.src_pix_stride);
    for (size_t w = 1; w <= static_cast<size_t>(pl.ur_w); ++w)
      for (size_t n = 2; n <= static_cast<size_t>(pl.fused_x_taps); ++n)
        total += 2 * (n * oc + 3 * (w + (n - 1) * k) + w * n * oc) * 12 + 64;
  }
  if (pl.dtype != DType::f32) total *= 3;  // conversions
  return total;
}

}  // namespace

EmittedCode emit_dot(const Plan& plan) {
  DotGenerator gen(plan, code_bound(plan));
  return gen.run();
}

}  // namespace deconvjit::jit
