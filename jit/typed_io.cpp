// Moving bf16 / f16 elements between memory and f32 registers (see Generator::set_io). Widening is exact
// (bf16: a 16-bit shift; f16: vcvtph2ps). Narrowing rounds to nearest even: f16 through vcvtps2ph, bf16
// with integer arithmetic, or where the CPU has it by vcvtneps2bf16, which flushes subnormal inputs to
// zero: vectors with such lanes then take the integer rounding (narrow_bf16_ne). Masked accesses touch
// only the lanes asked for: AVX-512 through opmasks on words, AVX2 loads one word at a time and stores by
// the fewest plain stores (store_xmm_lanes; only the ragged edges of rows and channel tails take these
// paths). k6 is the scratch opmask of every rounding here.
#include <algorithm>
#include <cassert>

#include "jit/generator.hpp"

namespace deconvjit::jit {

using namespace Xbyak;

namespace {
// The bf16 constants, one 64-byte row each (AVX2 reads the first 32 bytes): rounding, the mask of each
// dword's high half (bf16_odd), and vpermw's indices for narrow_bf16_pair.
constexpr int kOne = 0, kHalfMinusOne = 64, kQuiet = 128, kHighHalf = 192, kInterleave = 256;
Xmm half_of(const Xmm& v, bool zmm) { return zmm ? Xmm(Ymm(v.getIdx())) : Xmm(v.getIdx()); }
}  // namespace

Address Generator::io_lane(const Address& a, int lane) const { return word[a.getRegExp() + 2 * lane]; }

void Generator::widen_io(const Xmm& v) {
  if (io_type_ == DType::bf16) {
    vpmovzxwd(v, half_of(v, io_zmm_));
    vpslld(v, v, 16);
  } else {
    vcvtph2ps(v, half_of(v, io_zmm_));
  }
}

void Generator::load_io(const Xmm& v, const Address& a) {
  if (io_type_ == DType::bf16) {
    vpmovzxwd(v, a);
    vpslld(v, v, 16);
  } else {
    vcvtph2ps(v, a);
  }
}

void Generator::load_io_lanes(const Xmm& v, const Address& a, int lo, int hi, const Opmask& k) {
  if (io_zmm_) {
    vmovdqu16(Ymm(v.getIdx()) | k | T_z, a);
  } else {
    const Xmm x(v.getIdx());
    vpxor(x, x, x);
    for (int i = lo; i < hi; ++i) vpinsrw(x, x, io_lane(a, i), static_cast<uint8_t>(i));
  }
  widen_io(v);
}

void Generator::bf16_odd(const Xmm& dst, const Xmm& src) {
  const Address high = ptr[rip + l_io_table_ + kHighHalf];
  if (io_zmm_)
    vpandd(Zmm(dst.getIdx()), Zmm(src.getIdx()), high);
  else
    vpand(Ymm(dst.getIdx()), Ymm(src.getIdx()), high);
}

void Generator::broadcast_io(const Xmm& v, const Address& a) {
  if (io_type_ == DType::bf16) {
    vpbroadcastw(v, io_lane(a, 0));
    vpslld(v, v, 16);
  } else {
    vpbroadcastw(half_of(v, io_zmm_), io_lane(a, 0));
    vcvtph2ps(v, half_of(v, io_zmm_));
  }
}

// bf16: add 0x7fff plus the lowest kept bit, keep the upper half. For a NaN that goes wrong only where the
// payload sits in the low half: kept alone it truncates to infinity (0x7f800001), and a low half of 0x8000
// or more carries an upper half of 0x7fff or 0xffff into -0 or +0. AVX-512 keeps NaNs' upper halves, made
// quiet. AVX2 does not look: every value it narrows is a sum of products of bf16 values (their low halves
// zero) and x86 arithmetic returns a quieted operand NaN or the default NaN, so every NaN reaching a store
// has a zero low half (and its quiet bit set) and the addition leaves its upper half as it is. The guard (a
// compare, a shift, an or and a blend per vector) was a third of the rounding's uops, paid on every store.
void Generator::narrow_io(const Xmm& v, const Xmm& t1, bool pack) {
  const Address one = ptr[rip + l_io_table_ + kOne], bias = ptr[rip + l_io_table_ + kHalfMinusOne],
                quiet = ptr[rip + l_io_table_ + kQuiet];
  if (io_type_ == DType::f16) {
    vcvtps2ph(half_of(t1, io_zmm_), v, 0);  // imm 0: round to nearest even
    return;
  }
  vpsrld(t1, v, 16);
  if (io_zmm_) {
    vpandd(t1, t1, one);
    vpaddd(t1, t1, v);
    vpaddd(t1, t1, bias);
    vpsrld(t1, t1, 16);
    vcmpps(k6, v, v, 3);  // unordered: NaN
    vpsrld(t1 | k6, v, 16);
    vpord(t1 | k6, t1, quiet);
    return;
  }
  vpand(t1, t1, one);  // AVX2: no NaN guard (see above)
  vpaddd(t1, t1, v);
  vpaddd(t1, t1, bias);
  vpsrld(t1, t1, 16);
  if (!pack) return;  // each dword's low half holds its bf16
  vpackusdw(t1, t1, t1);  // per 128-bit lane: the four words twice
  vpermq(Ymm(t1.getIdx()), Ymm(t1.getIdx()), 0x08);
}

// vcvtneps2bf16 rounds as narrow_io does but flushes subnormal lanes; with io_bf16_check_ a vector that
// has some (vfpclassps class 0x20) jumps to cold code that rounds it by integers and comes back.
void Generator::narrow_bf16_ne(const Ymm& y, const Zmm& v) {
  vcvtneps2bf16(y, v);
  if (!io_bf16_check_) return;
  Label& cold = cold_labels_.emplace_back();
  Label& back = cold_labels_.emplace_back();
  vfpclassps(k6, v, 0x20);
  kortestw(k6, k6);
  jnz(cold, T_NEAR);
  L(back);
  cold_.push_back([this, &cold, &back, y, v] {
    L(cold);
    narrow_io(v, Zmm(y.getIdx()));
    vpmovdw(y, Zmm(y.getIdx()));
    jmp(back, T_NEAR);
  });
}

void Generator::narrow_bf16_pair(const Zmm& even, const Zmm& odd, const Zmm& t1, const Zmm& t2) {
  vcvtne2ps2bf16(t1, odd, even);  // even's words, then odd's
  vmovdqu16(t2, ptr[rip + l_io_table_ + kInterleave]);
  vpermw(t1, t2, t1);
  if (!io_bf16_check_) return;
  Label& cold = cold_labels_.emplace_back();
  Label& back = cold_labels_.emplace_back();
  vfpclassps(k5, even, 0x20);
  vfpclassps(k6, odd, 0x20);
  kortestw(k5, k6);
  jnz(cold, T_NEAR);
  L(back);
  cold_.push_back([this, &cold, &back, even, odd, t1, t2] {
    L(cold);
    narrow_io(even, t1);
    narrow_io(odd, t2);
    vpslld(t2, t2, 16);
    vpord(t1, t1, t2);
    jmp(back, T_NEAR);
  });
}

// AVX2 bf16 for the even/odd store: narrow_io's rounding of both vectors (without its pack), the even
// vector's words shifted down and the odd one's kept high by one word blend: 10 uops per pair of vectors
// before the store, against 20 with the NaN guard and a shift and an or to interleave.
void Generator::narrow_bf16_interleave(const Ymm& even, const Ymm& odd, const Ymm& t1, const Ymm& t2) {
  narrow_io(even, t1, false);
  const Address one = ptr[rip + l_io_table_ + kOne], bias = ptr[rip + l_io_table_ + kHalfMinusOne];
  vpsrld(t2, odd, 16);  // narrow_io without its final shift: the word stays high
  vpand(t2, t2, one);
  vpaddd(t2, t2, odd);
  vpaddd(t2, t2, bias);
  vpblendw(t1, t1, t2, 0xaa);  // the odd words from t2's high halves
}

// f16 on AVX-512 converts into a register and stores that: vcvtps2ph's memory form costs Zen 5 far more
// (unet_up1 f16 NXC, 2 threads: 7.32 -> 6.64 ms, the f32 kernel's 6.61; linknet_final 4.02 -> 3.76).
void Generator::store_io(const Address& a, const Xmm& v, const Xmm& t1) {
  if (io_bf16_ne_) {
    narrow_bf16_ne(Ymm(t1.getIdx()), Zmm(v.getIdx()));
    return vmovdqu16(a, Ymm(t1.getIdx()));
  }
  if (io_zmm_ && io_type_ == DType::f16) {
    vcvtps2ph(Ymm(t1.getIdx()), Zmm(v.getIdx()), 0);
    return vmovdqu16(a, Ymm(t1.getIdx()));
  }
  narrow_io(v, t1);
  if (io_zmm_)
    vpmovdw(a, t1);
  else
    vmovdqu(a, Xmm(t1.getIdx()));
}

void Generator::store_io_nt(const Address& a, const Xmm& v, const Xmm& t1, const Xmm& t2) {
  const Ymm half(t2.getIdx());
  if (io_type_ == DType::f16) {
    vcvtps2ph(half, Zmm(v.getIdx()), 0);
  } else if (io_bf16_ne_) {
    narrow_bf16_ne(half, Zmm(v.getIdx()));
  } else {
    narrow_io(v, t1);
    vpmovdw(half, Zmm(t1.getIdx()));
  }
  vmovntdq(a, half);
}

void Generator::store_io_lanes(const Address& a, const Xmm& v, int lo, int hi, const Opmask& k,
                               const Xmm& t1) {
  if (io_bf16_ne_) {
    narrow_bf16_ne(Ymm(t1.getIdx()), Zmm(v.getIdx()));
    return vmovdqu16(a | k, Ymm(t1.getIdx()));
  }
  if (io_zmm_ && io_type_ == DType::f16) {
    vcvtps2ph(Ymm(t1.getIdx()), Zmm(v.getIdx()), 0);
    return vmovdqu16(a | k, Ymm(t1.getIdx()));
  }
  narrow_io(v, t1);
  if (io_zmm_) return vpmovdw(a | k, t1);
  store_xmm_lanes(a.getRegExp(), Xmm(t1.getIdx()), 2, lo, hi);
}

void Generator::store_f32_lanes(const Address& a, const Ymm& v, int lo, int hi, const Xmm& t) {
  const RegExp b = a.getRegExp();
  if (lo < 4) store_xmm_lanes(b, Xmm(v.getIdx()), 4, lo, std::min(hi, 4));
  if (hi <= 4) return;
  if (lo <= 4 && hi == 8) return vextractf128(ptr[b + 16], v, 1);
  const Xmm upper(t.getIdx());
  vextractf128(upper, v, 1);
  store_xmm_lanes(b + 16, upper, 4, std::max(lo, 4) - 4, hi - 4);
}

void Generator::store_xmm_lanes(const RegExp& b, const Xmm& x, int bytes, int lo, int hi) {
  assert(0 <= lo && lo <= hi && hi * bytes <= 16 && (bytes == 2 || bytes == 4));
  for (int at = lo * bytes, end = hi * bytes; at < end;) {
    int size = 16;
    while (at % size != 0 || at + size > end) size /= 2;
    const Address m = ptr[b + at];
    if (size == 16)
      vmovups(m, x);
    else if (size == 8)
      at == 0 ? vmovq(m, x) : vmovhps(m, x);
    else if (size == 4)
      at == 0 ? vmovd(m, x) : vpextrd(m, x, static_cast<uint8_t>(at / 4));
    else
      vpextrw(m, x, static_cast<uint8_t>(at / 2));
    at += size;
  }
}

void Generator::emit_io_table() {
  if (!io16()) return;
  for (const auto& block : cold_) block();
  align(64);
  L(l_io_table_);
  for (uint32_t c : {1u, 0x7fffu, 0x40u, 0xffff0000u})
    for (int i = 0; i < 16; ++i) dd(c);
  for (int i = 0; i < 16; ++i) {  // kInterleave: word 2i from word i (even), 2i + 1 from word 16 + i (odd)
    dw(static_cast<uint16_t>(i));
    dw(static_cast<uint16_t>(16 + i));
  }
}

}  // namespace deconvjit::jit
