#include "jit/deconv_direct.hpp"

#include <cassert>

#include "jit/generator.hpp"
#include "jit/kernel_abi.hpp"
#include "runtime/cpu.hpp"

namespace deconvjit::jit {
namespace {

using namespace Xbyak;
using detail::BlockKind;
using detail::Plan;
using Off = KernelArgsOffsets;

constexpr int kFloat = 4;

class DirectGenerator : public Generator {
 public:
  DirectGenerator(const Plan& plan, size_t max_size) : Generator(max_size), pl_(plan) {}

  EmittedCode run() {
    EmittedCode out;
    const int kinds = pl_.has_tail() ? 2 : 1;
    for (int kind = 0; kind < kinds; ++kind) {
      const BlockKind& bk = kind == 0 ? pl_.main : pl_.last;
      for (int w = 1; w <= pl_.ur_w; ++w) {
        align(16);
        out.entries[kind].push_back(getSize());
        emit_function(bk, w);
      }
    }
    if (kinds == 1) out.entries[1] = out.entries[0];
    emit_mask_table();
    out.bytes = bytes();
    return out;
  }

 private:
  // Register map. rdi holds the KernelArgs pointer for the whole call.
  const Reg64 r_args = rdi;
  const Reg64 r_src = rsi;   // source of the current pixel block
  const Reg64 r_dst = rdx;   // destination of the current pixel block
  const Reg64 r_nblk = rcx;  // blocks left
  const Reg64 r_sz = r8, r_sy = r9, r_sx = r10;  // source at the current z / y / x tap
  const Reg64 r_wz = r11, r_wy = rax, r_wx = rbx;  // weights at the current z / y / x tap
  const Reg64 r_cz = r12, r_cy = r13, r_cx = r14;  // taps left along z / y / x
  const Reg64 r_ic = r15;                          // input-channel iterations left; also a scratch

  bool zmm() const { return pl_.isa == Isa::avx512_core; }
  Xmm vreg(int i) const { return zmm() ? Xmm(Zmm(i)) : Xmm(Ymm(i)); }
  int vbytes() const { return pl_.lanes * kFloat; }
  int n_bcast() const { return zmm() ? 2 : 1; }
  Xmm acc(int p, int v) const { return vreg(p * nv_ + v); }
  Xmm wvec(int v) const { return vreg(w_ * nv_ + v); }
  Xmm bvec(int p) const { return vreg(w_ * nv_ + nv_ + p % n_bcast()); }

  void emit_function(const BlockKind& bk, int w) {
    bk_ = &bk;
    w_ = w;
    nv_ = bk.vectors;
    assert(w_ * nv_ + nv_ + n_bcast() <= detail::vector_registers(pl_.isa));
    preamble();
    if (zmm() && bk.mask_lanes) {
      mov(eax, (1u << bk.mask_lanes) - 1);
      kmovw(k1, eax);
    }
    mov(r_src, ptr[r_args + Off::src]);
    mov(r_dst, ptr[r_args + Off::dst]);
    mov(r_nblk, ptr[r_args + Off::nblocks]);
    Label l_block, l_done;
    test(r_nblk, r_nblk);
    jle(l_done, T_NEAR);
    L(l_block);
    for (int p = 0; p < w_; ++p)
      for (int v = 0; v < nv_; ++v) vxorps(acc(p, v), acc(p, v), acc(p, v));
    emit_tap_loops();
    emit_store();
    add_imm(r_src, int64_t{w_} * pl_.src_pix_stride * kFloat, r_ic);
    add_imm(r_dst, int64_t{w_} * pl_.dst_pix_stride * kFloat, r_ic);
    dec(r_nblk);
    jnz(l_block, T_NEAR);
    L(l_done);
    postamble();
  }

  // z, y, x loops over the valid taps of the phase; counts come from the caller, steps are constants.
  void emit_tap_loops() {
    Label lz, ly, lx, z_next, y_next, l_end;
    mov(r_sz, r_src);
    mov(r_wz, ptr[r_args + Off::wei]);
    mov(r_cz, ptr[r_args + Off::nz]);
    test(r_cz, r_cz);
    jle(l_end, T_NEAR);
    L(lz);
    mov(r_sy, r_sz);
    mov(r_wy, r_wz);
    mov(r_cy, ptr[r_args + Off::ny]);
    test(r_cy, r_cy);
    jle(z_next, T_NEAR);
    L(ly);
    mov(r_sx, r_sy);
    mov(r_wx, r_wy);
    mov(r_cx, ptr[r_args + Off::nx]);
    test(r_cx, r_cx);
    jle(y_next, T_NEAR);
    L(lx);
    emit_ic_loop();
    // The ic loop left r_sx / r_wx one whole reduction further on; step to the next tap from there.
    add_imm(r_sx, (pl_.src_tap_step[2] - pl_.ic_per_group * pl_.src_ic_stride) * kFloat, r_ic);
    add_imm(r_wx, (bk_->wei_tap_step[2] - pl_.ic_per_group * bk_->wei_ic_step) * kFloat, r_ic);
    dec(r_cx);
    jnz(lx, T_NEAR);
    L(y_next);
    add_imm(r_sy, pl_.src_tap_step[1] * kFloat, r_ic);
    add_imm(r_wy, bk_->wei_tap_step[1] * kFloat, r_ic);
    dec(r_cy);
    jnz(ly, T_NEAR);
    L(z_next);
    add_imm(r_sz, pl_.src_tap_step[0] * kFloat, r_ic);
    add_imm(r_wz, bk_->wei_tap_step[0] * kFloat, r_ic);
    dec(r_cz);
    jnz(lz, T_NEAR);
    L(l_end);
  }

  void emit_ic_loop() {
    const int64_t ic = pl_.ic_per_group;
    const int u = pl_.ic_unroll;
    const int64_t iters = ic / u;
    const int rem = static_cast<int>(ic % u);
    if (iters == 1) {
      for (int k = 0; k < u; ++k) emit_ic_step(k);
      advance_ic(u);
    } else if (iters > 1) {
      Label l_ic;
      mov(r_ic, iters);
      L(l_ic);
      for (int k = 0; k < u; ++k) emit_ic_step(k);
      advance_ic(u);
      dec(r_ic);
      jnz(l_ic, T_NEAR);
    }
    for (int k = 0; k < rem; ++k) emit_ic_step(k);
    if (rem) advance_ic(rem);
  }

  void advance_ic(int n) {
    add_imm(r_sx, n * pl_.src_ic_stride * kFloat, r_ic);
    add_imm(r_wx, n * bk_->wei_ic_step * kFloat, r_ic);
  }

  // One input channel: nv weight vectors, one broadcast per pixel, w*nv FMAs.
  void emit_ic_step(int k) {
    const int64_t wofs = k * bk_->wei_ic_step * kFloat;
    for (int v = 0; v < nv_; ++v) vmovups(wvec(v), ptr[r_wx + wofs + v * vbytes()]);
    if (pl_.algorithm == detail::Algorithm::depthwise) return emit_depthwise_step();
    for (int p = 0; p < w_; ++p) {
      const int64_t sofs = (p * pl_.src_pix_stride + k * pl_.src_ic_stride) * kFloat;
      vbroadcastss(bvec(p), ptr[r_sx + sofs]);
      for (int v = 0; v < nv_; ++v) vfmadd231ps(acc(p, v), wvec(v), bvec(p));
    }
  }

  // Depthwise: the channels are the vector lanes, so inputs are whole vectors, not broadcasts. The last
  // vector of a tail block is loaded under the mask: past the last channel may lie past the buffer.
  void emit_depthwise_step() {
    for (int p = 0; p < w_; ++p)
      for (int v = 0; v < nv_; ++v) {
        const Address a = ptr[r_sx + (p * pl_.src_pix_stride + v * pl_.lanes) * kFloat];
        const bool masked = bk_->mask_lanes && v == nv_ - 1;
        if (!masked) {
          vfmadd231ps(acc(p, v), wvec(v), a);
        } else if (zmm()) {
          vmovups(Zmm(bvec(0).getIdx()) | k1 | T_z, a);
          vfmadd231ps(acc(p, v), wvec(v), bvec(0));
        } else {
          vmovups(bvec(0), ptr[rip + l_mask_]);
          vmaskmovps(Ymm(bvec(0).getIdx()), Ymm(bvec(0).getIdx()), a);
          vfmadd231ps(acc(p, v), wvec(v), bvec(0));
        }
      }
  }

  void emit_store() {
    if (pl_.dst_c != 1) return emit_scatter_store();
    const bool masked = bk_->mask_lanes != 0;
    if (masked && !zmm()) vmovups(wvec(0), ptr[rip + l_mask_]);
    mov(r_sx, r_dst);
    for (int p = 0; p < w_; ++p) {
      for (int v = 0; v < nv_; ++v) {
        const Address a = ptr[r_sx + v * vbytes()];
        if (masked && v == nv_ - 1) {
          if (zmm())
            vmovups(a | k1, Zmm(acc(p, v).getIdx()));
          else
            vmaskmovps(a, Ymm(wvec(0).getIdx()), Ymm(acc(p, v).getIdx()));
        } else {
          vmovups(a, acc(p, v));
        }
      }
      if (p + 1 < w_) add_imm(r_sx, pl_.dst_pix_stride * kFloat, r_ic);
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
      for (int v = 0; v < nv_; ++v) {
        if (bk_->mask_lanes && v == nv_ - 1)
          kmovw(k2, k1);
        else
          kxnorw(k2, k2, k2);
        vscatterdps(ptr[r_sx + idx * kFloat + static_cast<int32_t>(v * vec_stride)] | k2,
                    Zmm(acc(p, v).getIdx()));
      }
      if (p + 1 < w_) add_imm(r_sx, pl_.dst_pix_stride * kFloat, r_ic);
    }
  }

  // AVX2 has no opmask: its masked stores read lane masks from this RIP-relative table.
  void emit_mask_table() {
    align(32);
    L(l_mask_);
    const int lanes = pl_.last.mask_lanes;
    for (int i = 0; i < 8; ++i) dd(i < lanes ? 0xffffffffu : 0u);
    if (pl_.dst_c == 1) return;
    align(64);
    L(l_index_);
    for (int i = 0; i < pl_.lanes; ++i) dd(static_cast<uint32_t>(i * pl_.dst_c));
  }

  const Plan& pl_;
  const BlockKind* bk_ = nullptr;
  int w_ = 1, nv_ = 1;
  Label l_mask_, l_index_;
};

// Generous upper bound: every instruction at most 12 bytes.
size_t code_bound(const Plan& pl) {
  size_t total = 4096;
  for (const BlockKind* bk : {&pl.main, &pl.last}) {
    const size_t nv = bk->vectors;
    for (size_t w = 1; w <= static_cast<size_t>(pl.ur_w); ++w) {
      const size_t step = nv + w + w * nv;
      total += 512 + 2 * pl.ic_unroll * step * 12 + w * (nv + 2) * 24;
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
