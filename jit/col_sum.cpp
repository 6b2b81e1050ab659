// The col family's second step (col2im; runtime/col.cpp): each output pixel is the sum of its valid taps'
// rows of the col buffer (f32, C_OUT channels each), rounded once into the data type and stored. In
// generated code, so no arithmetic on the data leaves it, in f32 as in bf16 and f16.
//
// One call sums a run of `nblocks` output pixels stored one after another (C_OUT elements each, NXC) from
// dst. `src` is a table of row pointers: for each pixel its taps' rows in the fixed tap order, then a null
// pointer; a pixel without taps is a lone null and stores zeros. The sum starts at +0 and adds the rows
// in table order, so results do not depend on threads or on the ISA.
#include <algorithm>

#include "jit/deconv_kernels.hpp"
#include "jit/generator.hpp"
#include "jit/kernel_abi.hpp"

namespace deconvjit::jit {
namespace {

using namespace Xbyak;
using detail::Plan;
using Off = KernelArgsOffsets;
constexpr int kFloat = 4;
constexpr int kChunk = 8;  // channel vectors summed at once: eight independent additions per row read

class ColSumGenerator : public Generator {
 public:
  // Code per channel vector: an addition per chunk pass and a store (bf16: rounding and its cold path).
  explicit ColSumGenerator(const Plan& pl)
      : Generator(4096 + 512 * static_cast<size_t>((pl.dst_channels + pl.lanes - 1) / pl.lanes)), pl_(pl),
        z_(pl.isa == Isa::avx512_core), lanes_(static_cast<int>(pl.lanes)),
        channels_(pl.dst_channels), vectors_((pl.dst_channels + lanes_ - 1) / lanes_),
        tail_(static_cast<int>(pl.dst_channels % lanes_)), elem_(static_cast<int>(pl.elem_bytes())) {}

  EmittedCode run() {
    EmittedCode out;
    set_io(pl_.dtype, z_, false, pl_.bf16_vcvt);
    out.entries[0].push_back(getSize());
    out.entries[1] = out.entries[0];
    body();
    emit_io_table();
    if (!z_ && tail_) {  // AVX2: vmaskmovps's lane mask for the last vector
      align(32);
      L(l_mask_);
      for (int i = 0; i < 8; ++i) dd(i < tail_ ? 0xffffffffu : 0u);
    }
    out.bytes = bytes();
    return out;
  }

 private:
  const Plan& pl_;
  const bool z_;
  const int lanes_;
  const int64_t channels_, vectors_;
  const int tail_, elem_;
  Label l_mask_;
  const Reg64 r_table = r8, r_dst = r9, r_count = r10, r_cursor = r11, r_row = rax;

  Xmm vec(int i) const { return z_ ? Xmm(Zmm(i)) : Xmm(Ymm(i)); }
  Xmm t1() const { return vec(kChunk); }
  Xmm loaded() const { return vec(kChunk + 2); }  // AVX2: the masked load of the last vector; store scratch
  Xmm mask() const { return vec(kChunk + 3); }    // AVX2: its lane mask
  bool partial(int64_t j) const { return tail_ && j == vectors_ - 1; }

  void body() {
    Label l_pixel, l_done;
    if (tail_ && z_) {
      mov(eax, (1u << tail_) - 1);
      kmovw(k1, eax);
    } else if (tail_) {
      vmovups(Ymm(mask().getIdx()), ptr[rip + l_mask_]);
    }
    mov(r_table, ptr[rdi + Off::src]);
    mov(r_dst, ptr[rdi + Off::dst]);
    mov(r_count, ptr[rdi + Off::nblocks]);
    test(r_count, r_count);
    jle(l_done, T_NEAR);
    L(l_pixel);
    for (int64_t c0 = 0; c0 < vectors_; c0 += kChunk) chunk(c0, std::min<int64_t>(kChunk, vectors_ - c0));
    lea(r_table, ptr[r_cursor + 8]);  // past the pixel's null
    add(r_dst, static_cast<uint32_t>(channels_ * elem_));
    dec(r_count);
    jnz(l_pixel, T_NEAR);
    L(l_done);
    vzeroupper();
    ret();
  }

  // Vectors [c0, c0 + m) of one pixel: zeroed, then every row of the pixel's table added, then stored.
  void chunk(int64_t c0, int64_t m) {
    Label l_row, l_rows_done;
    for (int v = 0; v < m; ++v) vxorps(vec(v), vec(v), vec(v));
    mov(r_cursor, r_table);
    L(l_row);
    mov(r_row, ptr[r_cursor]);
    test(r_row, r_row);
    jz(l_rows_done, T_NEAR);
    for (int v = 0; v < m; ++v) add_row(v, c0 + v);
    add(r_cursor, 8);
    jmp(l_row, T_NEAR);
    L(l_rows_done);
    for (int v = 0; v < m; ++v) store(v, c0 + v);
  }

  // The last vector reads only its channels (masked loads do not fault past them, at the buffer's end).
  void add_row(int v, int64_t j) {
    const Address a = ptr[r_row + j * lanes_ * kFloat];
    if (!partial(j)) return void(vaddps(vec(v), vec(v), a));
    if (z_) return void(vaddps(Zmm(v) | k1, Zmm(v), a));
    vmaskmovps(Ymm(loaded().getIdx()), Ymm(mask().getIdx()), a);
    vaddps(vec(v), vec(v), loaded());
  }

  void store(int v, int64_t j) {
    const Address a = ptr[r_dst + j * lanes_ * elem_];
    if (io16()) {
      if (partial(j)) return store_io_lanes(a, vec(v), 0, tail_, k1, t1());
      return store_io(a, vec(v), t1());
    }
    if (!partial(j)) return void(vmovups(a, vec(v)));
    if (z_) return void(vmovups(a | k1, Zmm(v)));
    store_f32_lanes(a, Ymm(v), 0, tail_, loaded());
  }
};

}  // namespace

EmittedCode emit_col_sum(const Plan& plan) { return ColSumGenerator(plan).run(); }

}  // namespace deconvjit::jit
