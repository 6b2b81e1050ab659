// The direct family (also gemm and depthwise, which differ only in the plan's geometry and in how an
// input reaches the FMAs): register block = ur_w pixels x nv channel vectors.
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
  Xmm acc(int p, int v) const { return vreg(p * nv() + v); }
  Xmm wvec(int v) const { return vreg(w_ * nv() + v); }
  Xmm bvec(int p) const { return vreg(w_ * nv() + nv() + p % n_bcast()); }
  bool depthwise() const { return pl_.algorithm == detail::Algorithm::depthwise; }

  void emit_prologue() override {
    assert(w_ * nv() + nv() + n_bcast() <= detail::vector_registers(pl_.isa));
    if (zmm() && bk_->mask_lanes) {
      mov(eax, (1u << bk_->mask_lanes) - 1);
      kmovw(k1, eax);
    }
  }

  void emit_zero() override {
    for (int p = 0; p < w_; ++p)
      for (int v = 0; v < nv(); ++v) vxorps(acc(p, v), acc(p, v), acc(p, v));
  }

  int64_t reduction_src_bytes() const override { return pl_.ic_block * pl_.src_ic_stride * eb(); }
  int64_t reduction_wei_bytes() const override { return pl_.ic_block * bk_->wei_ic_step * kFloat; }

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
  }

  void emit_reduction() override {
    const int64_t ic = pl_.ic_block;
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
    add_imm(r_sx, n * pl_.src_ic_stride * eb(), r_ic);
    add_imm(r_wx, n * bk_->wei_ic_step * kFloat, r_ic);
  }

  // One input channel: nv weight vectors, one broadcast per pixel, w*nv FMAs.
  void emit_ic_step(int k) {
    const int64_t wofs = k * bk_->wei_ic_step * kFloat;
    for (int v = 0; v < nv(); ++v) vmovups(wvec(v), ptr[r_wx + wofs + v * vbytes()]);
    if (depthwise()) return emit_depthwise_step();
    for (int p = 0; p < w_; ++p) {
      const int64_t sofs = (p * pl_.src_pix_stride + k * pl_.src_ic_stride) * eb();
      if (io16())
        broadcast_io(bvec(p), ptr[r_sx + sofs]);
      else
        vbroadcastss(bvec(p), ptr[r_sx + sofs]);
      for (int v = 0; v < nv(); ++v) vfmadd231ps(acc(p, v), wvec(v), bvec(p));
    }
  }

  // Depthwise: the channels are the vector lanes, so inputs are whole vectors, not broadcasts. The last
  // vector of a tail block is loaded under the mask: past the last channel may lie past the buffer.
  void emit_depthwise_step() {
    for (int p = 0; p < w_; ++p)
      for (int v = 0; v < nv(); ++v) {
        const Address a = ptr[r_sx + (p * pl_.src_pix_stride + v * pl_.lanes) * eb()];
        const bool masked = bk_->mask_lanes && v == nv() - 1;
        if (io16()) {
          if (masked)
            load_io_lanes(bvec(0), a, 0, bk_->mask_lanes, k1);
          else
            load_io(bvec(0), a);
          vfmadd231ps(acc(p, v), wvec(v), bvec(0));
        } else if (!masked) {
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

  void emit_store() override {
    if (pl_.dst_c != 1) return emit_scatter_store();
    if (io16()) return emit_typed_store();
    const bool masked = bk_->mask_lanes != 0;
    if (masked && !zmm()) vmovups(wvec(0), ptr[rip + l_mask_]);
    mov(r_sx, r_dst);
    for (int p = 0; p < w_; ++p) {
      for (int v = 0; v < nv(); ++v) {
        const Address a = ptr[r_sx + v * vbytes()];
        if (masked && v == nv() - 1) {
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

  // 16-bit dst: rounded on the way out; the weight and broadcast registers are free by now.
  void emit_typed_store() {
    const Xmm t1 = wvec(0), t2 = vreg(w_ * nv() + nv());
    mov(r_sx, r_dst);
    for (int p = 0; p < w_; ++p) {
      for (int v = 0; v < nv(); ++v) {
        const Address a = ptr[r_sx + v * pl_.lanes * eb()];
        if (bk_->mask_lanes && v == nv() - 1)
          store_io_lanes(a, acc(p, v), 0, bk_->mask_lanes, k1, t1, t2);
        else
          store_io(a, acc(p, v), t1, t2);
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

  // AVX2 has no opmask: its masked loads and stores read lane masks from this table.
  void emit_tables() override {
    align(32);
    L(l_mask_);
    for (int i = 0; i < 8; ++i) dd(i < pl_.last.mask_lanes ? 0xffffffffu : 0u);
    if (pl_.dst_c == 1) return;
    align(64);
    L(l_index_);
    for (int i = 0; i < pl_.lanes; ++i) dd(static_cast<uint32_t>(i * pl_.dst_c));
  }

  Label l_mask_, l_index_;
};

// Generous upper bound: every instruction at most 12 bytes.
size_t code_bound(const Plan& pl) {
  size_t total = 4096;
  for (const detail::BlockKind* bk : {&pl.main, &pl.last}) {
    const size_t nv = bk->vectors;
    for (size_t w = 1; w <= static_cast<size_t>(pl.ur_w); ++w) {
      const size_t step = nv + w + w * nv;
      total += 512 + 2 * pl.ic_unroll * step * 12 + w * (nv + 2) * 24;
      if (pl.dtype != DType::f32) total += 2 * pl.ic_unroll * w * 12 + w * nv * 24 * 12;  // conversions
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
