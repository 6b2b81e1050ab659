// The depthwise_x family: depthwise on NCX data, the vector along output x (see runtime/plan_depthwise_x.cpp
// for the lane algebra). One call computes one output row of `nblocks` register blocks of channels; a
// register block is cb channels x u output vectors. Function 0 holds Plan::oc_vectors channels per block,
// function 1 one channel (the remainder of a call).
// dot_x runs through the same code with one change: the cb channels of its one block are output channels
// that share one input, so each tap loads and permutes one input vector for all of them, and the block
// loops over the input channels around its tap loops.
#include <algorithm>
#include <utility>
#include <vector>

#include "jit/deconv_kernels.hpp"
#include "jit/generator.hpp"
#include "jit/kernel_abi.hpp"
#include "runtime/cpu.hpp"
#include "runtime/int_math.hpp"

namespace deconvjit::jit {
namespace {

using namespace Xbyak;
using detail::Plan;
using Off = KernelArgsOffsets;
constexpr int kFloat = 4;


// A lane range [lo, hi) of a vector that is real (loads: inside the input row; stores: inside the output
// row). lo == 0 && hi == lanes is a plain access (a store: hi == span, masked where the span is short of
// the lanes); lo >= hi means nothing to do.
struct Lanes {
  int lo = 0, hi = 0;
  bool operator==(const Lanes& o) const { return lo == o.lo && hi == o.hi; }
};

// Consecutive register blocks of a row emitted as one piece: a loop when they all need no mask.
struct Piece {
  int64_t first = 0, count = 1;
  int vectors = 0;
  bool loop = false;
};

class DepthwiseXGenerator : public Generator {
 public:
  DepthwiseXGenerator(const Plan& pl, size_t max_size, std::vector<Piece> pieces)
      : Generator(max_size), pl_(pl), pieces_(std::move(pieces)) {}

  EmittedCode run() {
    EmittedCode out;
    set_io(pl_.dtype, zmm(), false, pl_.bf16_vcvt);
    align(16);
    out.entries[0].push_back(getSize());
    emit_function(pl_.oc_vectors);
    if (pl_.oc_vectors > 1 && !reduce()) {  // (dot_x: one block holds every output channel)
      align(16);
      out.entries[1].push_back(getSize());
      emit_function(1);
    } else {
      out.entries[1] = out.entries[0];
    }
    emit_tables();
    emit_io_table();
    out.bytes = bytes();
    return out;
  }

 private:
  // Register map. rdi holds the KernelArgs pointer for the whole call.
  const Reg64 r_args = rdi;
  const Reg64 r_src = rsi, r_dst = rdx, r_wei = rcx;  // this register block's channels, row start
  const Reg64 r_nblk = r8;                            // register blocks of channels left
  const Reg64 r_xs = r9, r_xd = r10;                  // source / destination of the current x piece
  const Reg64 r_sz = r11, r_sy = rax, r_wz = rbx, r_wy = r12;  // at the current z / y tap
  const Reg64 r_cz = r13, r_cy = r14;                          // taps left along z / y
  const Reg64 r_loop = r15;                                    // blocks left in a loop piece
  const Reg64 r_tmp = rbp;  // opmask bits and 64-bit immediates

  const Plan& pl_;
  const std::vector<Piece> pieces_;
  int cb_ = 1;  // channels per register block in the function being emitted
  int set_ = 0;  // dot_x: the accumulator set the taps being emitted add to
  std::vector<Lanes> mask_table_;  // AVX2: the lane masks the masked loads use
  Label l_index_, l_masks_, l_live_;

  bool zmm() const { return pl_.isa == Isa::avx512_core; }
  bool reduce() const { return pl_.algorithm == detail::Algorithm::dot_x; }
  int64_t eb() const { return pl_.elem_bytes(); }  // one src or dst element (weights are f32)
  int lanes() const { return pl_.lanes; }
  // Output x per vector (detail::x_vector_span): all lanes, or the lanes up to a multiple of the stride.
  int span() const { return static_cast<int>(detail::x_vector_span(pl_)); }
  int64_t stride() const { return pl_.axes[2].stride; }
  int64_t x_taps() const { return pl_.main.wei_k_floats / lanes(); }
  // Pads may be negative: floor division and its non-negative remainder.
  int64_t pad_div() const { return detail::floor_div(pl_.axes[2].pad_begin, stride()); }
  int64_t pad_mod() const { return detail::floor_mod(pl_.axes[2].pad_begin, stride()); }
  // Lanes of the loaded input vector that the permutation reads.
  int needed_lanes() const { return static_cast<int>((span() - 1 + pad_mod()) / stride() + 1); }
  int64_t per_channel_floats() const {
    return pl_.axes[0].kernel * pl_.axes[1].kernel * pl_.main.wei_k_floats;
  }

  Xmm vreg(int i) const { return zmm() ? Xmm(Zmm(i)) : Xmm(Ymm(i)); }
  // vpermps takes Ymm operands; a Zmm passed as one keeps its width.
  Ymm wide(const Xmm& x) const { return zmm() ? Ymm(Zmm(x.getIdx())) : Ymm(x.getIdx()); }
  int nregs() const { return detail::vector_registers(pl_.isa); }
  // dot_x keeps ic_unroll sets of accumulators (set_ is the one being filled), summed before the store.
  int sets() const { return reduce() ? pl_.ic_unroll : 1; }
  Xmm acc(int c, int u) const { return acc_in(set_, c, u); }
  Xmm acc_in(int s, int c, int u) const { return vreg((s * cb_ + c) * pl_.ur_w + u); }
  Xmm idx() const { return vreg(nregs() - 1); }
  Xmm temp(int i) const { return vreg(nregs() - 2 - i % 2); }
  Xmm ymask() const { return vreg(nregs() - 4); }
  Xmm wvec(int c) const { return vreg(sets() * cb_ * pl_.ur_w + c); }  // below the fixed ones (tile_fits)

  // Input lanes that vector u of block b reads at x tap j (relative to the loaded vector).
  Lanes load_lanes(int64_t b, int u, int64_t j) const {
    const int64_t first = (b * pl_.ur_w + u) * span() / stride() + pad_div() - j;
    const int64_t in = pl_.axes[2].in;
    if (first >= 0 && first + lanes() <= in) return {0, lanes()};
    const int lo = static_cast<int>(std::clamp<int64_t>(-first, 0, lanes()));
    const int hi = static_cast<int>(std::clamp<int64_t>(in - first, 0, needed_lanes()));
    return {lo, hi};
  }
  // Output lanes whose input lies inside the row, for loaded lanes [lo, hi): lane l reads loaded lane
  // (l + pad mod s) div s (the permutation), inside [lo, hi) exactly for l in [s*lo - pad mod s,
  // s*hi - pad mod s). Contiguous, so the same Lanes (and AVX2 mask table) describe it. Lanes past the
  // span are never stored: they count as outside.
  Lanes in_row_lanes(const Lanes& l) const {
    const int64_t s = stride(), m = pad_mod();
    return {static_cast<int>(std::clamp<int64_t>(s * l.lo - m, 0, span())),
            static_cast<int>(std::clamp<int64_t>(s * l.hi - m, 0, span()))};
  }
  Lanes store_lanes(int64_t b, int u) const {
    const int64_t x0 = (b * pl_.ur_w + u) * span();
    return {0, static_cast<int>(std::clamp<int64_t>(pl_.axes[2].out - x0, 0, span()))};
  }

  void emit_function(int cb);
  void emit_piece(const Piece& pc);
  void emit_block(int64_t b, int vectors);
  void emit_tap(int64_t b, int vectors, int64_t j);
  void emit_store(int64_t b, int vectors);
  void emit_store_as(int64_t b, int vectors, bool nt);
  void set_opmask(const Lanes& l, const Opmask& k);
  // Lanes of x tap j whose kernel x, (l + pad) mod s + s*j, lies inside the kernel; lanes past the span
  // count as live (never stored, so nothing to mask).
  uint32_t live_lanes(int64_t j) const {
    uint32_t bits = 0;
    for (int l = 0; l < lanes(); ++l)
      if (l >= span() || detail::depthwise_x_kernel_x(pl_.axes[2], l, j) < pl_.axes[2].kernel) bits |= 1u << l;
    return bits;
  }
  int mask_index(const Lanes& l);
  void emit_tables();
};

void DepthwiseXGenerator::emit_function(int cb) {
  cb_ = cb;
  preamble();
  push(r_tmp);
  if (stride() > 1) vmovups(idx(), ptr[rip + l_index_]);
  mov(r_src, ptr[r_args + Off::src]);
  mov(r_dst, ptr[r_args + Off::dst]);
  mov(r_wei, ptr[r_args + Off::wei]);
  mov(r_nblk, ptr[r_args + Off::nblocks]);
  Label l_block, l_done;
  test(r_nblk, r_nblk);
  jle(l_done, T_NEAR);
  L(l_block);
  for (const Piece& pc : pieces_) emit_piece(pc);
  add_imm(r_src, cb * pl_.src_c * eb(), r_tmp);
  add_imm(r_dst, cb * pl_.dst_c * eb(), r_tmp);
  add_imm(r_wei, cb * per_channel_floats() * kFloat, r_tmp);
  dec(r_nblk);
  jnz(l_block, T_NEAR);
  L(l_done);
  pop(r_tmp);
  postamble();
}

void DepthwiseXGenerator::emit_piece(const Piece& pc) {
  mov(r_xs, r_src);
  add_imm(r_xs, pc.first * pl_.ur_w * span() / stride() * eb(), r_tmp);
  mov(r_xd, r_dst);
  add_imm(r_xd, pc.first * pl_.ur_w * span() * eb(), r_tmp);
  if (!pc.loop) return emit_block(pc.first, pc.vectors);
  Label l_piece;
  mov(r_loop, pc.count);
  L(l_piece);
  emit_block(pc.first, pc.vectors);  // every block of a loop piece has the masks of the first (none but
                                     // the span's store mask)
  add_imm(r_xs, int64_t{pl_.ur_w} * span() / stride() * eb(), r_tmp);
  add_imm(r_xd, int64_t{pl_.ur_w} * span() * eb(), r_tmp);
  dec(r_loop);
  jnz(l_piece, T_NEAR);
}

// z and y loops over the valid taps (counts from the caller); x taps unrolled inside.
void DepthwiseXGenerator::emit_block(int64_t b, int vectors) {
  for (int s = 0; s < sets(); ++s)
    for (int c = 0; c < cb_; ++c)
      for (int u = 0; u < vectors; ++u) vxorps(acc_in(s, c, u), acc_in(s, c, u), acc_in(s, c, u));
  const int64_t* sstep = pl_.src_tap_step.data();
  const int64_t* wstep = pl_.main.wei_tap_step.data();
  auto taps = [&] {
    mov(r_sz, r_xs);
    mov(r_wz, r_wei);
    emit_tap_loop({r_cz, r_sz, r_wz, sstep[0] * eb(), wstep[0] * kFloat}, ptr[r_args + Off::nz], r_tmp, [&] {
      mov(r_sy, r_sz);
      mov(r_wy, r_wz);
      emit_tap_loop({r_cy, r_sy, r_wy, sstep[1] * eb(), wstep[1] * kFloat}, ptr[r_args + Off::ny], r_tmp,
                    [&] {
                      for (int64_t j = 0; j < x_taps(); ++j) emit_tap(b, vectors, j);
                    });
    });
  };
  if (!reduce()) {
    taps();
  } else {
    // dot_x: every input channel into the accumulators, ic_unroll channels per step, each into its own
    // set (independent FMA chains when the block is small); the step count lives on the stack.
    const int64_t k = sets(), steps = pl_.ic_per_group / k, rest = pl_.ic_per_group % k;
    auto channel = [&](int s) {
      set_ = s;
      taps();
      add_imm(r_xs, pl_.src_c * eb(), r_tmp);
      add_imm(r_wei, cb_ * per_channel_floats() * kFloat, r_tmp);
    };
    push(r_xs);
    push(r_wei);
    if (steps > 0) {
      push(r_tmp);  // a slot for the count
      mov(qword[rsp], steps);
      Label l_ic;
      L(l_ic);
      for (int s = 0; s < k; ++s) channel(s);
      dec(qword[rsp]);
      jnz(l_ic, T_NEAR);
      pop(r_tmp);
    }
    for (int s = 0; s < rest; ++s) channel(s);
    pop(r_wei);
    pop(r_xs);
    set_ = 0;
    for (int s = 1; s < k; ++s)
      for (int c = 0; c < cb_; ++c)
        for (int u = 0; u < vectors; ++u) vaddps(acc(c, u), acc(c, u), acc_in(s, c, u));
  }
  emit_store(b, vectors);
}

// One x tap for the whole block: per channel a per-lane weight vector; per vector one (masked) load,
// the phase permutation, one FMA. Vectors whose inputs all lie outside the row are skipped.
void DepthwiseXGenerator::emit_tap(int64_t b, int vectors, int64_t j) {
  // dot_x walks hundreds of input channel rows per block, a short piece of each: more streams than the
  // hardware prefetchers follow. So each channel's piece for the next block is asked for one block ahead.
  if (reduce() && j == 0) {
    const int64_t bytes = int64_t{pl_.ur_w} * span() / stride() * eb();
    const int64_t first = (int64_t{pl_.ur_w} * span() / stride() + pad_div()) * eb();
    for (int64_t at = 0; at < bytes + 64; at += 64) prefetcht0(ptr[r_sy + first + at]);
  }
  for (int c = 0; c < cb_; ++c)
    vmovups(wvec(c), ptr[r_wy + (c * per_channel_floats() + j * lanes()) * kFloat]);
  // Lanes whose kernel x lies past the kernel have a zero weight; their inputs are zeroed too, so an
  // infinite input cannot turn into a NaN where the operation has no term at all.
  const uint32_t live = live_lanes(j);
  const bool all_live = live == (1u << lanes()) - 1;
  if (!all_live && zmm()) {
    mov(r_tmp.cvt32(), live);
    kmovw(k3, r_tmp.cvt32());
  }
  int n = 0;
  for (int u = 0; u < vectors; ++u) {
    const int n_u = n;  // dot_x: the vector loaded for the first channel serves them all
    const Lanes l = load_lanes(b, u, j);
    if (l.lo >= l.hi) continue;
    const bool full = l.lo == 0 && l.hi == lanes();
    // The converse: output lanes whose input lies outside the row have no term either, but their weight
    // may be infinite or NaN, and times the zeroed input that is a NaN. So their products are dropped:
    // AVX-512 leaves those accumulator lanes alone (merge-masked FMA), AVX2 zeroes the weight there.
    // Only such edge vectors pay; a full load has every output lane inside the row.
    const Lanes in_row = in_row_lanes(l);
    const bool edge = !(in_row.lo == 0 && in_row.hi == span());
    if (!full && zmm()) set_opmask(l, k1);
    if (edge && zmm()) set_opmask(in_row, k2);
    if (!full && !zmm()) vmovups(ymask(), ptr[rip + l_masks_ + mask_index(l) * 32]);
    for (int c = 0; c < cb_; ++c, ++n) {
      const bool load = !reduce() || c == 0;
      const int64_t ofs = ((reduce() ? 0 : c * pl_.src_c) + u * span() / stride() + pad_div() - j) * eb();
      const Address a = ptr[r_sy + ofs];
      const int tn = reduce() ? n_u : n;
      const Xmm t = temp(tn);
      // acc += t * weight; on AVX2 the masked weight goes to the other temporary, free until the next
      // channel's load.
      auto fma = [&] {
        if (!edge) return vfmadd231ps(acc(c, u), t, wvec(c));
        if (zmm()) return vfmadd231ps(Zmm(acc(c, u).getIdx()) | k2, Zmm(t.getIdx()), Zmm(wvec(c).getIdx()));
        const Xmm w = temp(tn + 1);
        vandps(w, wvec(c), ptr[rip + l_masks_ + mask_index(in_row) * 32]);
        vfmadd231ps(acc(c, u), t, w);
      };
      if (!load && !(full && stride() == 1)) {
        fma();
        continue;
      }
      if (io16()) {  // converted into t first; then the same permutation and FMA from t
        if (full)
          load_io(t, a);
        else
          load_io_lanes(t, a, l.lo, l.hi, k1);
        if (stride() > 1) vpermps(!all_live && zmm() ? wide(t) | k3 | T_z : wide(t), wide(idx()), wide(t));
        if (!all_live && !zmm()) vandps(t, t, ptr[rip + l_live_ + j * 32]);
        fma();
        continue;
      }
      if (full && stride() == 1) {  // (never an edge vector)
        vfmadd231ps(acc(c, u), wvec(c), a);
        continue;
      }
      if (!full) {
        if (zmm())
          vmovups(Zmm(t.getIdx()) | k1 | T_z, a);
        else
          vmaskmovps(t, ymask(), a);
      }
      if (stride() > 1) {  // (a stride-1 row needs no permutation, and all its lanes are live)
        const Ymm tw = wide(t), dst = !all_live && zmm() ? tw | k3 | T_z : tw;
        if (full)
          vpermps(dst, wide(idx()), a);
        else
          vpermps(dst, wide(idx()), tw);
      }
      if (!all_live && !zmm()) vandps(t, t, ptr[rip + l_live_ + j * 32]);
      fma();
    }
  }
}

// With Plan::nt_stores, whole vectors leave by non-temporal stores where this block starts a cache line
// (channels are planes of whole vectors apart, vectors along a row follow each other).
void DepthwiseXGenerator::emit_store(int64_t b, int vectors) {
  emit_stores_by_line(pl_.kernel_nt_stores(), r_xd, [&](bool nt) { emit_store_as(b, vectors, nt); });
}

void DepthwiseXGenerator::emit_store_as(int64_t b, int vectors, bool nt) {
  for (int u = 0; u < vectors; ++u) {
    const Lanes l = store_lanes(b, u);
    const bool full = l.hi == lanes();
    if (!full && zmm()) set_opmask(l, k1);
    for (int c = 0; c < cb_; ++c) {
      const Address a = ptr[r_xd + (c * pl_.dst_c + u * span()) * eb()];
      if (io16()) {
        if (full)
          store_io(a, acc(c, u), temp(0));
        else
          store_io_lanes(a, acc(c, u), l.lo, l.hi, k1, temp(0));
      } else if (full && nt)
        vmovntps(a, acc(c, u));
      else if (full)
        vmovups(a, acc(c, u));
      else if (zmm())
        vmovups(a | k1, Zmm(acc(c, u).getIdx()));
      else
        store_f32_lanes(a, Ymm(acc(c, u).getIdx()), l.lo, l.hi, temp(0));
    }
  }
}

void DepthwiseXGenerator::set_opmask(const Lanes& l, const Opmask& k) {
  const uint32_t bits = ((1u << l.hi) - 1) & ~((1u << l.lo) - 1);
  mov(r_tmp.cvt32(), bits);
  kmovw(k, r_tmp.cvt32());
}

int DepthwiseXGenerator::mask_index(const Lanes& l) {
  const auto it = std::find(mask_table_.begin(), mask_table_.end(), l);
  if (it != mask_table_.end()) return static_cast<int>(it - mask_table_.begin());
  mask_table_.push_back(l);
  return static_cast<int>(mask_table_.size()) - 1;
}

// The permutation (lane l reads loaded lane (l + pad) div s - pad div s) and the AVX2 lane masks.
void DepthwiseXGenerator::emit_tables() {
  align(64);
  L(l_index_);
  for (int l = 0; l < lanes(); ++l) dd(static_cast<uint32_t>((l + pad_mod()) / stride()));
  align(32);
  L(l_masks_);
  for (const Lanes& m : mask_table_)
    for (int l = 0; l < 8; ++l) dd(l >= m.lo && l < m.hi ? 0xffffffffu : 0u);
  L(l_live_);  // AVX2: live_lanes(j) as lane masks, 32 bytes per tap
  if (!zmm())
    for (int64_t j = 0; j < x_taps(); ++j)
      for (int l = 0; l < 8; ++l) dd(live_lanes(j) >> l & 1 ? 0xffffffffu : 0u);
}

// Blocks that need no mask at any tap, and are full, run as loops; the others are emitted one by one.
std::vector<Piece> make_pieces(const Plan& pl) {
  const int64_t lanes = pl.lanes, span = detail::x_vector_span(pl), s = pl.axes[2].stride;
  const int64_t in = pl.axes[2].in, out = pl.axes[2].out;
  const int64_t row_vectors = (out + span - 1) / span, u = pl.ur_w;
  const int64_t blocks = (row_vectors + u - 1) / u;
  const int64_t taps = pl.main.wei_k_floats / lanes, pad_div = detail::floor_div(pl.axes[2].pad_begin, s);
  auto clean = [&](int64_t b) {
    if ((b + 1) * u > row_vectors || (b + 1) * u * span > out) return false;
    const int64_t lo = b * u * span / s + pad_div - (taps - 1);
    const int64_t hi = ((b + 1) * u - 1) * span / s + pad_div + lanes;
    return lo >= 0 && hi <= in;
  };
  std::vector<Piece> pieces;
  for (int64_t b = 0; b < blocks; ++b) {
    const int vectors = static_cast<int>(std::min(u, row_vectors - b * u));
    if (clean(b) && !pieces.empty() && pieces.back().loop && pieces.back().first + pieces.back().count == b) {
      ++pieces.back().count;
      continue;
    }
    pieces.push_back({b, 1, vectors, clean(b)});
  }
  return pieces;
}

// Up to 12 bytes an instruction; per tap and vector: two masks (opmask: 2 each), per channel up to
// load, permutation, two ANDs (AVX2) and the FMA. 16-bit data: three times that (word loads on AVX2).
size_t code_bound(const Plan& pl, const std::vector<Piece>& pieces) {
  const size_t taps = static_cast<size_t>(pl.main.wei_k_floats / pl.lanes);
  const size_t block = 256 + taps * (pl.oc_vectors + static_cast<size_t>(pl.ur_w) * (4 + 5 * pl.oc_vectors)) * 12 +
                       static_cast<size_t>(pl.ur_w) * (2 + 2 * pl.oc_vectors) * 12;
  // dot_x emits its taps once per accumulator set in the step, and again for the remainder.
  const size_t copies = pl.algorithm == detail::Algorithm::dot_x ? 2 * static_cast<size_t>(pl.ic_unroll) + 1 : 1;
  return (pl.dtype == DType::f32 ? 1 : 3) * (4096 + 2 * pieces.size() * (copies * block + 64) + 64 * 32);
}

}  // namespace

EmittedCode emit_depthwise_x(const Plan& plan) {
  std::vector<Piece> pieces = make_pieces(plan);
  const size_t bound = code_bound(plan, pieces);
  DepthwiseXGenerator gen(plan, bound, std::move(pieces));
  return gen.run();
}

}  // namespace deconvjit::jit
