// A thin base over Xbyak::CodeGenerator. Code is assembled into plain read-write memory (never executed
// there) and then copied into a W^X CodeBuffer, so nothing is ever writable and executable at once.
// Generated code is position independent (relative jumps, RIP-relative data only), which lets the bytes
// be copied, dumped and reloaded anywhere.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <vector>

#include <xbyak/xbyak.h>

#include "deconvjit/deconvjit.hpp"

namespace deconvjit::jit {

class Generator : public Xbyak::CodeGenerator {
 public:
  explicit Generator(size_t max_size) : Xbyak::CodeGenerator(max_size, Xbyak::DontSetProtectRWE) {}
  std::vector<uint8_t> bytes() const { return {getCode(), getCode() + getSize()}; }

 protected:
  // SysV: rbx, rbp, r12-r15 are callee-saved; we use rbx and r12-r15.
  void preamble() {
    for (const auto& r : saved_) push(r);
  }
  void postamble() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) pop(*it);
    vzeroupper();
    ret();
  }
  // A counted loop over the valid taps of one axis: `count` loaded from `count_at` (zero or less skips the
  // body), and after each pass the source and weight pointers step by constant byte distances.
  struct TapLoop {
    Xbyak::Reg64 count, src, wei;
    int64_t src_step, wei_step;
  };
  template <typename Body>
  void emit_tap_loop(const TapLoop& t, const Xbyak::Address& count_at, const Xbyak::Reg64& tmp, Body body) {
    Xbyak::Label l_loop, l_done;
    mov(t.count, count_at);
    test(t.count, t.count);
    jle(l_done, T_NEAR);
    L(l_loop);
    body();
    add_imm(t.src, t.src_step, tmp);
    add_imm(t.wei, t.wei_step, tmp);
    dec(t.count);
    jnz(l_loop, T_NEAR);
    L(l_done);
  }

  // A store block by Plan::nt_stores: `stores(true)` (non-temporal) where `base` starts a cache line,
  // `stores(false)` elsewhere; without nt_stores only the latter. Non-temporal stores fault off alignment
  // and must fill whole lines; the plan keeps every store of a block whole lines from its first one
  // (nt_stores_possible), so `base` decides for all of them.
  template <typename Stores>
  void emit_stores_by_line(bool nt_stores, const Xbyak::Reg64& base, Stores stores) {
    if (!nt_stores) return stores(false);
    Xbyak::Label l_plain, l_done;
    test(base, 63);
    jnz(l_plain, T_NEAR);
    stores(true);
    jmp(l_done, T_NEAR);
    L(l_plain);
    stores(false);
    L(l_done);
  }

  // add reg, imm for any 64-bit immediate; `tmp` is clobbered only when the value needs 64 bits.
  void add_imm(const Xbyak::Reg64& reg, int64_t v, const Xbyak::Reg64& tmp) {
    if (v == 0) return;
    if (v >= INT32_MIN && v <= INT32_MAX) {
      add(reg, static_cast<uint32_t>(static_cast<int32_t>(v)));
    } else {
      mov(tmp, v);
      add(reg, tmp);
    }
  }

 public:
  // Tensors in 16-bit types (jit/typed_io.cpp). Kernels compute in f32 registers; these move elements of
  // the data type `t` between memory and those registers, converting on the way. Each family calls
  // set_io() first, and emit_io_table() after its last function when io16(). f32 data keeps the
  // families' own plain instructions, so f32 kernels are byte for byte what they were.
  // `paired`: the kernel sums bf16 channel pairs with vdpbf16ps, which flushes subnormal partial sums,
  // so no sum reaching a store is subnormal; bf16 stores then round with vcvtneps2bf16 (nearest even; it
  // flushes only subnormals), the same results in two uops instead of the integer rounding's eight.
  // 2 threads, NXC: 1.02-1.07x (unet_up1 3.21 -> 3.02 ms, hifigan_up4 0.337 -> 0.314), where reductions
  // of 64 pairs per output vector met eight more uops at each store.
  // `vcvt` (Plan::bf16_vcvt): the CPU has vcvtneps2bf16, so sums that may be subnormal round by it too,
  // each vector checked for subnormal lanes first (vfpclassps) and, only where it has some, rounded by
  // integers in cold code after the kernel's functions (emit_io_table). Zen 4, 2 threads, bf16 depthwise
  // NXC, where a store follows every 4 FMAs: 1.37x (dla_up_dw256, dla_up_dw64_f4).
  void set_io(DType t, bool zmm, bool paired, bool vcvt) {
    io_type_ = t;
    io_zmm_ = zmm;
    io_bf16_ne_ = (paired || vcvt) && zmm && t == DType::bf16;
    io_bf16_check_ = io_bf16_ne_ && !paired;
  }
  // bf16 by vcvtneps2bf16 (either form above): then narrow_bf16_pair is available.
  bool bf16_ne() const { return io_bf16_ne_; }
  bool io16() const { return io_type_ != DType::f32; }
  // A whole vector (16 or 8 lanes), the lanes [lo, hi) of one (others zero; only those are touched in
  // memory), and one element broadcast to all lanes. v is the f32 register.
  void load_io(const Xbyak::Xmm& v, const Xbyak::Address& a);
  void load_io_lanes(const Xbyak::Xmm& v, const Xbyak::Address& a, int lo, int hi, const Xbyak::Opmask& k);
  void broadcast_io(const Xbyak::Xmm& v, const Xbyak::Address& a);
  // bf16 read as dwords (two channels each): the odd channel of each, exactly, as f32 (its high half; the
  // even one is a 16-bit left shift). The mask comes from the io table.
  void bf16_odd(const Xbyak::Xmm& dst, const Xbyak::Xmm& src);
  // Stores f32 register v rounded to nearest even (bf16 by integer rounding: vcvtneps2bf16 flushes
  // subnormals; except after set_io's `paired`). Clobbers t1 (AVX-512: and k6).
  void store_io(const Xbyak::Address& a, const Xbyak::Xmm& v, const Xbyak::Xmm& t1);
  // store_io by a non-temporal store (AVX-512: 16 lanes, 32 bytes, to a 32-byte-aligned address).
  void store_io_nt(const Xbyak::Address& a, const Xbyak::Xmm& v, const Xbyak::Xmm& t1, const Xbyak::Xmm& t2);
  void store_io_lanes(const Xbyak::Address& a, const Xbyak::Xmm& v, int lo, int hi, const Xbyak::Opmask& k,
                      const Xbyak::Xmm& t1);
  // AVX2: lanes [lo, hi) of the f32 ymm v to a (lane 0's address) by plain stores; t: a scratch register
  // (the upper half). vmaskmovps to memory costs about 12 cycles on Zen 4, a plain store 1 or 2.
  void store_f32_lanes(const Xbyak::Address& a, const Xbyak::Ymm& v, int lo, int hi, const Xbyak::Xmm& t);
  // Lanes [lo, hi) of the 16-byte x, elements of `bytes` bytes, at b (lane 0's address): the fewest
  // aligned stores of 16, 8, 4 and 2 bytes, nothing outside the lanes touched.
  void store_xmm_lanes(const Xbyak::RegExp& b, const Xbyak::Xmm& x, int bytes, int lo, int hi);
  void emit_io_table();
  // Leaves the words of v rounded to the data type in the low half of t1 (AVX-512: all 16 lanes as
  // dwords of t1, for vpmovdw; AVX2 bf16 without `pack`: as dwords too, each word in its low half).
  // Leaves v as it is (AVX-512 bf16 uses k6).
  void narrow_io(const Xbyak::Xmm& v, const Xbyak::Xmm& t1, bool pack = true);
  // bf16_ne(): the 2 x 16 lanes of `even` and `odd` rounded to bf16 and interleaved (even, odd, even, ...)
  // into the 32 words of t1; clobbers t2, k5 and k6.
  void narrow_bf16_pair(const Xbyak::Zmm& even, const Xbyak::Zmm& odd, const Xbyak::Zmm& t1,
                        const Xbyak::Zmm& t2);
  // AVX2 bf16: the 8 lanes of `even` and `odd` rounded to nearest even into the dwords of t1, even's word
  // low and odd's high; clobbers t2.
  void narrow_bf16_interleave(const Xbyak::Ymm& even, const Xbyak::Ymm& odd, const Xbyak::Ymm& t1,
                              const Xbyak::Ymm& t2);

 private:
  void widen_io(const Xbyak::Xmm& v);  // the words in v's low half to f32 lanes
  Xbyak::Address io_lane(const Xbyak::Address& a, int lane) const;
  DType io_type_ = DType::f32;
  bool io_zmm_ = false;
  bool io_bf16_ne_ = false;     // bf16 stores round by vcvtneps2bf16 (set_io)
  bool io_bf16_check_ = false;  // ... after checking for subnormal sums (set_io's `vcvt` without `paired`)
  // The 16 lanes of v rounded to bf16 into the words of y (clobbers k6).
  void narrow_bf16_ne(const Xbyak::Ymm& y, const Xbyak::Zmm& v);
  // Out-of-line code: the rounding by integers of vectors with subnormal lanes, emitted by emit_io_table.
  std::list<Xbyak::Label> cold_labels_;
  std::vector<std::function<void()>> cold_;
  Xbyak::Label l_io_table_;
  const std::vector<Xbyak::Reg64> saved_{rbx, r12, r13, r14, r15};
};

}  // namespace deconvjit::jit
