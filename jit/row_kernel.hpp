// The skeleton every row-kernel family shares: one function per (block kind, pixels per block) that runs
// `nblocks` register blocks along a row segment, each accumulating over the valid z, y, x taps and then
// storing, and one per (block kind, Plan::edges pattern) that runs one border block with its x taps
// unrolled. A family supplies the reduction over input channels at one tap, and the store.
#pragma once

#include <cstddef>
#include <vector>

#include "jit/deconv_kernels.hpp"
#include "jit/generator.hpp"
#include "jit/kernel_abi.hpp"
#include "runtime/plan.hpp"

namespace deconvjit::jit {

class RowKernelGenerator : public Generator {
 public:
  RowKernelGenerator(const detail::Plan& plan, size_t max_size) : Generator(max_size), pl_(plan) {}
  EmittedCode run();

 protected:
  static constexpr int kFloat = 4;  // packed weights (and f32 data)

  // Register map. rdi holds the KernelArgs pointer for the whole call.
  const Xbyak::Reg64 r_args = rdi;
  const Xbyak::Reg64 r_src = rsi;   // source of the current pixel block
  const Xbyak::Reg64 r_dst = rdx;   // destination of the current pixel block
  const Xbyak::Reg64 r_nblk = rcx;  // blocks left
  const Xbyak::Reg64 r_sz = r8, r_sy = r9, r_sx = r10;    // source at the current z / y / x tap
  const Xbyak::Reg64 r_wz = r11, r_wy = rax, r_wx = rbx;  // weights at the current z / y / x tap
  const Xbyak::Reg64 r_cz = r12, r_cy = r13, r_cx = r14;  // taps left along z / y / x
  const Xbyak::Reg64 r_ic = r15;  // reduction iterations left; also a scratch for 64-bit immediates
  const Xbyak::Reg64 r_wob = rbp;  // weights of the current channel block when a call walks several

  bool zmm() const { return pl_.isa == Isa::avx512_core; }
  Xbyak::Xmm vreg(int i) const { return zmm() ? Xbyak::Xmm(Xbyak::Zmm(i)) : Xbyak::Xmm(Xbyak::Ymm(i)); }
  int vbytes() const { return pl_.lanes * kFloat; }  // a vector of weights, or of f32 accumulators
  int64_t eb() const { return pl_.elem_bytes(); }     // one dst element (and src, unless widened)
  int64_t seb() const { return pl_.src_elem_bytes(); }  // one element of the source the kernel reads
  bool src16() const { return io16() && !pl_.widen_src; }  // a 16-bit source, widened as it is read

  // Hooks. The reduction starts at r_sx / r_wx and may move them; it reports how far (bytes).
  virtual void emit_zero() = 0;
  virtual void emit_reduction() = 0;
  virtual int64_t reduction_src_bytes() const = 0;
  virtual int64_t reduction_wei_bytes() const = 0;
  virtual void emit_store() = 0;
  virtual void emit_load_partial() {}  // accumulators from dst; needed when the plan splits the reduction
  virtual void emit_prologue() {}  // e.g. opmasks; runs once per function
  virtual void emit_tables() {}    // RIP-relative constants, after all functions
  virtual int stack_bytes() const { return 0; }  // scratch at [rsp, rsp + n) during a call
  // Plan::fused_x_taps: all n x taps of a call (2 <= n <= fused_x_taps) in one pass, from r_sx / r_wx
  // at the first tap (which it may leave anywhere: the y loop resets them).
  virtual void emit_fused_x(int n) { (void)n; }

  const detail::Plan& pl_;
  const detail::BlockKind* bk_ = nullptr;
  int w_ = 1;
  // The pixels [p_lo_, p_hi_) of the block the reduction works on: all of them, but in an edge block's
  // taps (Plan::edges), whose other pixels would read the halo's zeros. emit_reduction honours them.
  int p_lo_ = 0, p_hi_ = 1;
  const detail::EdgeBlock* edge_ = nullptr;  // the edge block being emitted, if any

 private:
  void emit_function(const detail::BlockKind& bk, int w);
  void emit_block();
  void emit_tap_loops();
  void emit_x_taps();
  void emit_edge_x_taps();
};

}  // namespace deconvjit::jit
