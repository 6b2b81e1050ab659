#include "jit/row_kernel.hpp"

#include <cassert>

namespace deconvjit::jit {

using namespace Xbyak;
using Off = KernelArgsOffsets;

EmittedCode RowKernelGenerator::run() {
  EmittedCode out;
  // Only the direct generator's reductions honour p_lo_ / p_hi_ (edge_blocks_possible).
  assert(pl_.edges.empty() || detail::edge_blocks_possible(pl_));
  set_io(pl_.dtype, zmm(), pl_.ic_pairs, pl_.bf16_vcvt);
  const int kinds = pl_.has_tail() ? 2 : 1;
  for (int kind = 0; kind < kinds; ++kind) {
    const detail::BlockKind& bk = kind == 0 ? pl_.main : pl_.last;
    for (int w = 1; w <= pl_.ur_w; ++w) {
      align(16);
      out.entries[kind].push_back(getSize());
      emit_function(bk, w);
    }
    for (const detail::EdgeBlock& e : pl_.edges) {  // after the widths: fns[kind][ur_w + edge]
      align(16);
      out.entries[kind].push_back(getSize());
      edge_ = &e;
      emit_function(bk, e.width);
      edge_ = nullptr;
    }
  }
  if (kinds == 1) out.entries[1] = out.entries[0];
  emit_tables();
  emit_io_table();
  out.bytes = bytes();
  return out;
}

// With Plan::oc_loop > 1 each pixel block runs for oc_loop consecutive channel blocks (depthwise: the
// source channels move with the output channels); the count lives on the stack, r_wob walks the weights.
void RowKernelGenerator::emit_function(const detail::BlockKind& bk, int w) {
  bk_ = &bk;
  w_ = w;
  p_lo_ = 0;
  p_hi_ = w;
  preamble();
  const bool ob_loop = pl_.oc_loop > 1;
  if (ob_loop) {
    push(r_wob);
    push(r_wob);  // a slot for the channel-block count
  }
  if (stack_bytes()) sub(rsp, stack_bytes());
  const int ob_slot = stack_bytes();  // the channel-block count, above the scratch
  emit_prologue();
  mov(r_src, ptr[r_args + Off::src]);
  mov(r_dst, ptr[r_args + Off::dst]);
  mov(r_nblk, ptr[r_args + Off::nblocks]);
  Label l_block, l_done;
  test(r_nblk, r_nblk);
  jle(l_done, T_NEAR);
  L(l_block);
  if (ob_loop) {
    const int64_t ch = int64_t{bk.vectors} * pl_.lanes, ch_bytes = ch * pl_.elem_bytes();
    const int64_t wei_bytes = pl_.axes[0].kernel * pl_.axes[1].kernel * pl_.axes[2].kernel * bk.wei_k_floats * kFloat;
    Label l_ob;
    mov(r_wob, ptr[r_args + Off::wei]);
    mov(qword[rsp + ob_slot], pl_.oc_loop);
    L(l_ob);
    emit_block();
    add_imm(r_src, ch * seb() * pl_.src_c, r_ic);
    add_imm(r_dst, ch_bytes * pl_.dst_c, r_ic);
    add_imm(r_wob, wei_bytes, r_ic);
    dec(qword[rsp + ob_slot]);
    jnz(l_ob, T_NEAR);
    add_imm(r_src, -ch * seb() * pl_.src_c * pl_.oc_loop, r_ic);
    add_imm(r_dst, -ch_bytes * pl_.dst_c * pl_.oc_loop, r_ic);
  } else {
    emit_block();
  }
  add_imm(r_src, int64_t{w_} * pl_.src_pix_stride * seb(), r_ic);
  add_imm(r_dst, int64_t{w_} * pl_.dst_pix_stride * pl_.elem_bytes(), r_ic);
  dec(r_nblk);
  jnz(l_block, T_NEAR);
  L(l_done);
  if (stack_bytes()) add(rsp, stack_bytes());
  if (ob_loop) {
    pop(r_wob);
    pop(r_wob);
  }
  postamble();
}

void RowKernelGenerator::emit_block() {
  if (pl_.ic_blocks > 1) {
    Label l_zero, l_ready;
    cmp(qword[r_args + Off::accumulate], 0);
    je(l_zero, T_NEAR);
    emit_load_partial();
    jmp(l_ready, T_NEAR);
    L(l_zero);
    emit_zero();
    L(l_ready);
  } else {
    emit_zero();
  }
  emit_tap_loops();
  emit_store();
}

// z, y, x loops over the valid taps of the phase; counts come from the caller, steps are constants.
void RowKernelGenerator::emit_tap_loops() {
  const int64_t* sstep = pl_.src_tap_step.data();
  const int64_t* wstep = bk_->wei_tap_step.data();
  mov(r_sz, r_src);
  if (pl_.oc_loop > 1)
    mov(r_wz, r_wob);
  else
    mov(r_wz, ptr[r_args + Off::wei]);
  emit_tap_loop({r_cz, r_sz, r_wz, sstep[0] * seb(), wstep[0] * kFloat}, ptr[r_args + Off::nz], r_ic, [&] {
    mov(r_sy, r_sz);
    mov(r_wy, r_wz);
    emit_tap_loop({r_cy, r_sy, r_wy, sstep[1] * seb(), wstep[1] * kFloat}, ptr[r_args + Off::ny], r_ic, [&] {
      mov(r_sx, r_sy);
      mov(r_wx, r_wy);
      emit_x_taps();
    });
  });
}

// The x taps: a loop of reductions, or for the counts Plan::fused_x_taps covers, the family's one pass.
void RowKernelGenerator::emit_x_taps() {
  const int64_t* sstep = pl_.src_tap_step.data();
  const int64_t* wstep = bk_->wei_tap_step.data();
  // The reduction leaves r_sx / r_wx further on; the step to the next tap starts from there.
  if (edge_) return emit_edge_x_taps();
  const TapLoop x{r_cx, r_sx, r_wx, sstep[2] * seb() - reduction_src_bytes(),
                  wstep[2] * kFloat - reduction_wei_bytes()};
  if (pl_.fused_x_taps < 2) return emit_tap_loop(x, ptr[r_args + Off::nx], r_ic, [&] { emit_reduction(); });
  std::vector<Label> fused(static_cast<size_t>(pl_.fused_x_taps + 1));
  Label l_done;
  mov(r_cx, ptr[r_args + Off::nx]);
  for (int n = 2; n <= pl_.fused_x_taps; ++n) {
    cmp(r_cx, n);
    je(fused[static_cast<size_t>(n)], T_NEAR);
  }
  emit_tap_loop(x, ptr[r_args + Off::nx], r_ic, [&] { emit_reduction(); });
  for (int n = 2; n <= pl_.fused_x_taps; ++n) {
    jmp(l_done, T_NEAR);
    L(fused[static_cast<size_t>(n)]);
    emit_fused_x(n);
  }
  L(l_done);
}

// An edge block's x taps, unrolled: tap j reduces only over the pixels whose source column is real
// (detail::edge_pixels), each tap starting afresh from the row's pointers.
void RowKernelGenerator::emit_edge_x_taps() {
  for (int64_t j = 0; j < edge_->taps; ++j) {
    int64_t lo = 0, hi = 0;
    detail::edge_pixels(pl_, *edge_, j, lo, hi);
    if (lo >= hi) continue;
    mov(r_sx, r_sy);
    add_imm(r_sx, j * pl_.src_tap_step[2] * seb(), r_ic);
    mov(r_wx, r_wy);
    add_imm(r_wx, j * bk_->wei_tap_step[2] * kFloat, r_ic);
    p_lo_ = static_cast<int>(lo);
    p_hi_ = static_cast<int>(hi);
    emit_reduction();
  }
  p_lo_ = 0;
  p_hi_ = w_;
}

EmittedCode emit_kernel(const detail::Plan& plan) {
  if (detail::x_vector_family(plan.algorithm)) return emit_depthwise_x(plan);  // and dot_x
  if (plan.algorithm == detail::Algorithm::gemm_x) return emit_gemm_x(plan);
  if (plan.algorithm == detail::Algorithm::col_x) return emit_col_x(plan);
  return plan.algorithm == detail::Algorithm::dot ? emit_dot(plan) : emit_direct(plan);
}

}  // namespace deconvjit::jit
