// The col_x family (see runtime/plan_col_x.cpp): one call computes, for `nblocks` blocks of output
// channels, one part of one output row. A tile is ur_w input vectors (16 input pixels each, AVX2 8, lanes
// along x) x the block's channels x every kernel x: the reduction walks the input channels (ic_unroll sets of
// accumulators, each summing every k-th channel) and inside each the valid z and y taps, one vector load
// and one broadcast FMA per (channel, kernel x) and vector. Then per output vector: for every kernel x a
// masked vpermi2ps picks its phase's lanes, shifted by the tap's lane offset, out of this vector's
// accumulator and the one before (the previous tile's last vector lives on the stack), and the sums are
// stored as contiguous output. AVX2 (8 lanes, 16 registers) has no opmasks and no two-register permute:
// its loads at the row's ends are vmaskmovps (its stores there plain ones of 4, 2 and 1 lanes), its FMAs
// take the weight from a broadcast register, the lanes past the row's end are cleared after the reduction
// (their zero inputs times an infinite weight would be NaNs), and each tap's shifted phase is two vpermps
// (this vector, the one before), a blend and an and with the phase's lanes.
//
// Function (kind, part): kind 0 holds Plan::main's channels, kind 1 Plan::last's; part p computes the p-th
// of x_split ranges of tiles, starting with a tile that only fills the stack (the one before the range).
#include <algorithm>
#include <vector>

#include "jit/deconv_kernels.hpp"
#include "jit/generator.hpp"
#include "jit/kernel_abi.hpp"
#include "runtime/int_math.hpp"

namespace deconvjit::jit {
namespace {

using namespace Xbyak;
using detail::Plan;
using Off = KernelArgsOffsets;
constexpr int kFloat = 4;

// Consecutive tiles of one part with the same masks, emitted as one piece (a loop when there are several:
// the code of a tile depends only on its masks). So a row costs code for its few edge tiles, however long
// it is or however far the output runs past the input (output_shape, output_padding).
struct Piece {
  int64_t first = 0, count = 1;
  bool warm = false;  // computes the tile only for the stack (the tile before a part)
};

// Where the tiles of a row lie: input lanes and output masks per tile, and the pieces of each part.
// With block_over_batch the tile's vectors are one x vector of ur_w images (vector v: image v).
struct TileMap {
  int64_t u = 1, s = 1, pad = 0, in_w = 0, out_w = 0, parts = 1, first = 0, end = 0;
  int lanes = 16;
  bool images = false;
  explicit TileMap(const Plan& pl)
      : u(pl.ur_w), s(pl.axes[2].stride), pad(pl.axes[2].pad_begin), in_w(pl.axes[2].in), out_w(pl.axes[2].out),
        parts(pl.x_split), lanes(pl.lanes), images(pl.block_over_batch) {
    detail::col_x_tiles(pl, first, end);
  }
  int64_t along_x() const { return images ? 1 : u; }  // x vectors per tile
  int64_t tile_in() const { return lanes * along_x(); }  // input pixels per tile
  int64_t x_vector(int64_t t, int64_t v) const { return t * along_x() + (images ? 0 : v); }
  // Real lanes [0, n) of input vector v of tile t.
  int in_lanes(int64_t t, int64_t v) const {
    return static_cast<int>(std::clamp<int64_t>(in_w - x_vector(t, v) * lanes, 0, lanes));
  }
  // Output x of lane 0 of output vector m of input vector v of tile t.
  int64_t out_x(int64_t t, int64_t v, int64_t m) const { return x_vector(t, v) * lanes * s + m * lanes - pad; }
  uint32_t out_bits(int64_t t, int64_t v, int64_t m) const {
    uint32_t bits = 0;
    for (int l = 0; l < lanes; ++l) {
      const int64_t x = out_x(t, v, m) + l;
      if (x >= 0 && x < out_w) bits |= 1u << l;
    }
    return bits;
  }
  bool same_masks(int64_t a, int64_t b) const {
    for (int64_t v = 0; v < u; ++v) {
      if (in_lanes(a, v) != in_lanes(b, v)) return false;
      for (int64_t m = 0; m < s; ++m)
        if (out_bits(a, v, m) != out_bits(b, v, m)) return false;
    }
    return true;
  }
  // Tiles [first, end) split into `parts` balanced ranges; each range after the row's first tile starts
  // with its predecessor, computed for the stack only (when it has input).
  std::vector<Piece> pieces(int64_t part) const {
    const int64_t tiles = end - first;
    const int64_t t0 = first + tiles * part / parts, t1 = first + tiles * (part + 1) / parts;
    std::vector<Piece> out;
    if (t0 > 0 && (t0 - 1) * tile_in() < in_w) out.push_back({t0 - 1, 1, true});
    for (int64_t t = t0; t < t1; ++t) {
      const Piece& b = out.empty() ? Piece{} : out.back();
      if (!out.empty() && !b.warm && b.first + b.count == t && same_masks(b.first, t)) {
        ++out.back().count;
        continue;
      }
      out.push_back({t, 1, false});
    }
    return out;
  }
};

// Stack frame: the channel count and the saved tile pointers, then the previous tile's last vector per
// (output channel, kernel x).
constexpr int kCountSlot = 0, kSrcSlot = 8, kWeiSlot = 16, kPrevSlot = 64;

class ColXGenerator : public Generator {
 public:
  explicit ColXGenerator(const Plan& pl) : Generator(code_bound(pl)), pl_(pl), map_(pl) {}

  EmittedCode run() {
    EmittedCode out;
    set_io(pl_.dtype, zmm(), pl_.ic_pairs, pl_.bf16_vcvt);
    const int kinds = pl_.has_tail() ? 2 : 1;
    for (int kind = 0; kind < kinds; ++kind)
      for (int part = 0; part < pl_.x_split; ++part) {
        align(16);
        out.entries[kind].push_back(getSize());
        emit_function(kind == 0 ? pl_.main.vectors : pl_.last.vectors, part);
      }
    if (kinds == 1) out.entries[1] = out.entries[0];
    emit_tables();
    emit_io_table();
    out.bytes = bytes();
    return out;
  }

 private:
  // Register map. rdi holds the KernelArgs pointer for the whole call.
  const Reg64 r_args = rdi;
  const Reg64 r_src = rsi, r_dst = rdx, r_wei = rcx;  // the row (first valid tap), this block
  const Reg64 r_nblk = r8;                            // blocks left
  const Reg64 r_xs = r9, r_xd = r10;                  // the tile's source and output
  const Reg64 r_sz = r11, r_sy = rax, r_wz = rbx, r_wy = r12;  // at the current z / y tap
  const Reg64 r_cz = r13, r_cy = r14;                          // taps left along z / y
  const Reg64 r_loop = r15;                                    // tiles left in a loop piece
  const Reg64 r_tmp = rbp;

  const Plan& pl_;
  const TileMap map_;
  int cb_ = 1;
  Label l_index_, l_pairs_, l_masks_, l_phases_;
  std::vector<std::pair<int, int>> masks_;  // AVX2: the lane ranges [lo, hi) of l_masks_

  bool zmm() const { return pl_.isa == Isa::avx512_core; }
  int lanes() const { return pl_.lanes; }
  uint32_t all_lanes() const { return (1u << lanes()) - 1; }
  Xmm vreg(int i) const { return zmm() ? Xmm(Zmm(i)) : Xmm(Ymm(i)); }
  int u_n() const { return pl_.ur_w; }
  int64_t s() const { return pl_.axes[2].stride; }
  int64_t kx_n() const { return pl_.axes[2].kernel; }
  int64_t d_n() const { return (kx_n() - 1) / s() + 1; }  // lane shifts 0 .. d_n - 1
  int64_t pad() const { return pl_.axes[2].pad_begin; }
  int64_t in_w() const { return pl_.axes[2].in; }
  int64_t out_w() const { return pl_.axes[2].out; }
  int64_t eb() const { return pl_.elem_bytes(); }
  int64_t tile_in() const { return map_.tile_in(); }  // input pixels per tile (per image)
  int64_t tile_out() const { return tile_in() * s(); }  // output q per tile
  bool images() const { return pl_.block_over_batch; }
  // Element offsets of input vector u and of output vector (u, m) of channel c, from the tile's start.
  int64_t src_at(int u) const { return images() ? u * pl_.src_n : u * lanes(); }
  int64_t dst_at(int c, int u, int64_t m) const {
    return c * pl_.dst_c + (images() ? u * pl_.dst_n + m * lanes() : (u * s() + m) * lanes());
  }
  int columns() const { return static_cast<int>(cb_ * kx_n()); }
  // The previous x vector's sums per (channel, kernel x): of the tile's last vector, or of each image.
  int prev_vectors() const { return images() ? u_n() : 1; }
  int frame() const { return kPrevSlot + 64 * static_cast<int>(pl_.oc_vectors * kx_n() * prev_vectors()); }

  Xmm acc_in(int set, int c, int64_t kx, int u) const {
    return vreg(static_cast<int>(((set * cb_ + c) * kx_n() + kx) * u_n() + u));
  }
  Xmm acc(int c, int64_t kx, int u) const { return acc_in(0, c, kx, u); }
  int first_free() const { return zmm() ? 28 : 12; }  // (plan_col_x.cpp: the accumulators below)
  Xmm in(int u) const { return vreg(first_free() + u); }
  bool pairs() const { return pl_.ic_pairs; }
  Zmm pair_index() const { return Zmm(31); }  // (bf16 pairs: at most 3 input vectors)
  Ymm bcast() const { return Ymm(14); }       // AVX2: the weight of the FMAs (at most 2 input vectors)
  Ymm ymask() const { return Ymm(15); }       // AVX2: the load mask of the tile's partial vectors
  Xmm temp(int i) const { return vreg(first_free() + i); }  // after the reduction
  Address prev(int c, int64_t kx, int u = 0) const {
    return ptr[rsp + kPrevSlot + 64 * ((c * kx_n() + kx) * prev_vectors() + u)];
  }
  // AVX2: the l_masks_ entry with lanes [lo, hi) set.
  Address lane_mask(int lo, int hi) {
    const std::pair<int, int> m{lo, hi};
    auto it = std::find(masks_.begin(), masks_.end(), m);
    if (it == masks_.end()) it = masks_.insert(masks_.end(), m);
    return ptr[rip + l_masks_ + static_cast<int>(it - masks_.begin()) * 32];
  }

  int in_lanes(int64_t t, int u) const { return map_.in_lanes(t, u); }
  int64_t out_x(int64_t t, int u, int64_t m) const { return map_.out_x(t, u, m); }
  uint32_t out_bits(int64_t t, int u, int64_t m) const { return map_.out_bits(t, u, m); }
  void emit_function(int channels, int part);
  void emit_tile(int64_t t, bool warm);
  void emit_reduction(int64_t t);
  void emit_taps(int64_t t, int set, bool single);
  void emit_tap(int64_t t, int set, bool single, const Reg64& src, const Reg64& wei);
  void emit_output(int64_t t);
  void emit_output_ymm(int64_t t, int c, int u, int64_t m);
  void emit_store(int64_t t, int c, int u, int64_t m);
  void set_mask(const Opmask& k, uint32_t bits) {  // (32 bits: word masks of bf16 pairs)
    mov(r_tmp.cvt32(), bits);
    kmovd(k, r_tmp.cvt32());
  }
  void emit_tables();
  static size_t code_bound(const Plan& pl);
};

void ColXGenerator::emit_function(int channels, int part) {
  cb_ = channels;
  preamble();
  push(r_tmp);
  sub(rsp, frame());
  mov(r_src, ptr[r_args + Off::src]);
  mov(r_dst, ptr[r_args + Off::dst]);
  mov(r_wei, ptr[r_args + Off::wei]);
  mov(r_nblk, ptr[r_args + Off::nblocks]);
  Label l_block, l_done;
  test(r_nblk, r_nblk);
  jle(l_done, T_NEAR);
  L(l_block);
  const std::vector<Piece> ps = map_.pieces(part);
  // Without a tile before the part (or with one past the input), the previous vector is zero.
  if (ps.empty() || !ps.front().warm) {
    vxorps(temp(0), temp(0), temp(0));
    for (int c = 0; c < cb_; ++c)
      for (int64_t kx = 0; kx < kx_n(); ++kx)
        for (int u = 0; u < prev_vectors(); ++u) vmovups(prev(c, kx, u), temp(0));
  }
  for (const Piece& pc : ps) {
    mov(r_xs, r_src);
    add_imm(r_xs, pc.first * tile_in() * eb(), r_tmp);
    mov(r_xd, r_dst);
    add_imm(r_xd, out_x(pc.first, 0, 0) * eb(), r_tmp);
    if (pc.count == 1) {
      emit_tile(pc.first, pc.warm);
      continue;
    }
    Label l_piece;
    mov(r_loop, pc.count);
    L(l_piece);
    emit_tile(pc.first, false);  // every tile of the piece has the first one's masks
    add_imm(r_xs, tile_in() * eb(), r_tmp);
    add_imm(r_xd, tile_out() * eb(), r_tmp);
    dec(r_loop);
    jnz(l_piece, T_NEAR);
  }
  add_imm(r_dst, cb_ * pl_.dst_c * eb(), r_tmp);
  add_imm(r_wei, detail::ic_steps(pl_) * pl_.main.wei_ic_step * kFloat, r_tmp);  // (only full blocks loop)
  dec(r_nblk);
  jnz(l_block, T_NEAR);
  L(l_done);
  add(rsp, frame());
  pop(r_tmp);
  postamble();
}

void ColXGenerator::emit_tile(int64_t t, bool warm) {
  const int sets = pl_.ic_unroll;
  for (int set = 0; set < sets; ++set)
    for (int c = 0; c < cb_; ++c)
      for (int64_t kx = 0; kx < kx_n(); ++kx)
        for (int u = 0; u < u_n(); ++u) vxorps(acc_in(set, c, kx, u), acc_in(set, c, kx, u), acc_in(set, c, kx, u));
  if (in_lanes(t, 0) > 0) emit_reduction(t);
  if (!warm) emit_output(t);
  for (int c = 0; c < cb_; ++c)
    for (int64_t kx = 0; kx < kx_n(); ++kx)
      for (int u = 0; u < prev_vectors(); ++u)
        vmovups(prev(c, kx, u), acc(c, kx, images() ? u : u_n() - 1));
}

// Every input channel, ic_unroll of them per step each into its own accumulator set; the step count lives
// on the stack, the tile's pointers too (the channel walk moves them).
void ColXGenerator::emit_reduction(int64_t t) {
  // (bf16 pairs: a step is a pair of channels; an odd last channel is a step of its own)
  const bool odd = pairs() && pl_.ic_per_group % 2 == 1;
  const int64_t whole = pairs() ? pl_.ic_per_group / 2 : pl_.ic_per_group;  // steps of two channels (pairs)
  const int64_t k = pl_.ic_unroll, steps = whole / k, rest = whole % k;
  const detail::BlockKind& bk = cb_ == pl_.main.vectors ? pl_.main : pl_.last;
  auto channel = [&](int set, bool single) {
    emit_taps(t, set, single);
    add_imm(r_xs, (pairs() ? 2 : 1) * pl_.src_c * eb(), r_tmp);
    add_imm(r_wei, bk.wei_ic_step * kFloat, r_tmp);
  };
  for (int u = 0; u < u_n(); ++u) {
    const int n = in_lanes(t, u);
    const uint32_t lo = n == lanes() ? all_lanes() : (1u << n) - 1;
    if (!zmm()) {  // (a tile's partial vectors all have the same lanes: the row's end, or each image's)
      if (n > 0 && n < lanes()) vmovups(ymask(), lane_mask(0, n));
    } else if (pairs()) {  // words: the first channel's n in the low half, the second's in the high half
      set_mask(Opmask(1 + u), lo);
      set_mask(Opmask(4 + u), lo << 16);
    } else if (n > 0 && n < lanes()) {
      set_mask(Opmask(1 + u), lo);
    }
  }
  if (pairs()) vmovups(pair_index(), ptr[rip + l_pairs_]);
  mov(ptr[rsp + kSrcSlot], r_xs);
  mov(ptr[rsp + kWeiSlot], r_wei);
  // A row with no valid z or y tap (a stride above the kernel, pads) keeps its zero sums.
  Label l_none;
  for (int a = 0; a < 2; ++a) {
    cmp(qword[r_args + (a == 0 ? Off::nz : Off::ny)], 0);
    jle(l_none, T_NEAR);
  }
  if (steps > 0) {
    mov(qword[rsp + kCountSlot], steps);
    Label l_ic;
    L(l_ic);
    for (int set = 0; set < k; ++set) channel(set, false);
    dec(qword[rsp + kCountSlot]);
    jnz(l_ic, T_NEAR);
  }
  for (int set = 0; set < rest; ++set) channel(set, false);
  if (odd) channel(static_cast<int>(rest % k), true);
  L(l_none);
  mov(r_xs, ptr[rsp + kSrcSlot]);
  mov(r_wei, ptr[rsp + kWeiSlot]);
  for (int set = 1; set < k; ++set)
    for (int c = 0; c < cb_; ++c)
      for (int64_t kx = 0; kx < kx_n(); ++kx)
        for (int u = 0; u < u_n(); ++u) vaddps(acc(c, kx, u), acc(c, kx, u), acc_in(set, c, kx, u));
  // AVX2's FMAs are not masked: past the row's end a zero input times an infinite or NaN weight left a
  // NaN where the sum has no term.
  for (int u = 0; u < u_n() && !zmm(); ++u) {
    const int n = in_lanes(t, u);
    if (n == 0 || n == lanes()) continue;
    for (int c = 0; c < cb_; ++c)
      for (int64_t kx = 0; kx < kx_n(); ++kx) vandps(acc(c, kx, u), acc(c, kx, u), lane_mask(0, n));
  }
}

// The valid z and y taps of one input channel: per tap, the tile's input vectors (masked at the row's
// end, where the FMA is masked too: a zeroed input times an infinite weight would be a NaN in a lane
// that has no term; AVX2 clears such lanes after the reduction), then one broadcast FMA per (channel,
// kernel x) and vector.
void ColXGenerator::emit_taps(int64_t t, int set, bool single) {
  const detail::BlockKind& bk = cb_ == pl_.main.vectors ? pl_.main : pl_.last;
  const int64_t* sstep = pl_.src_tap_step.data();
  const int64_t* wstep = bk.wei_tap_step.data();
  // An axis of kernel 1 has one valid tap or none, and emit_reduction skips the call's reduction when a
  // count is zero: no loop for it (a 1-D layer's channel step is then its loads and FMAs alone). Other
  // axes loop over their counts, which are at least 1 here.
  auto axis = [&](int a, const Reg64& count, const Reg64& src, const Reg64& wei, const Reg64& from_s,
                  const Reg64& from_w, auto body) {
    if (pl_.axes[a].kernel == 1) return body(from_s, from_w);
    mov(src, from_s);
    mov(wei, from_w);
    mov(count, ptr[r_args + (a == 0 ? Off::nz : Off::ny)]);
    Label l_tap;
    L(l_tap);
    body(src, wei);
    add_imm(src, sstep[a] * eb(), r_tmp);
    add_imm(wei, wstep[a] * kFloat, r_tmp);
    dec(count);
    jnz(l_tap, T_NEAR);
  };
  axis(0, r_cz, r_sz, r_wz, r_xs, r_wei, [&](const Reg64& zs, const Reg64& zw) {
    axis(1, r_cy, r_sy, r_wy, zs, zw, [&](const Reg64& ys, const Reg64& yw) { emit_tap(t, set, single, ys, yw); });
  });
}

// One (z, y) tap of one channel (or pair): the tile's input vectors at `src` (masked at the row's end, where
// the FMA is masked too on AVX-512), then one broadcast FMA per (output channel, kernel x) and vector from
// `wei`.
void ColXGenerator::emit_tap(int64_t t, int set, bool single, const Reg64& src, const Reg64& wei) {
  // Hundreds of channel rows, a short piece of each per tile: more streams than the hardware
  // prefetchers follow, so each row's piece is asked for two tiles ahead. (One tile ahead left
  // convtasnet_decoder at 1.2-2.4 ms in `deconvjit bench --vs onednn`, whose other variants evict
  // the source between batches; two tiles: 0.75-0.81, four or eight no better.) Rows of one tile go
  // without (Plan::prefetch_src).
  const int64_t ahead = 2 * tile_in() * eb();
  const int streams = !pl_.prefetch_src ? 0 : images() ? u_n() : 1;
  for (int v = 0; v < streams; ++v)
    for (int64_t at = 0; at < tile_in() * eb(); at += 64) {
      prefetcht0(ptr[src + src_at(v) * eb() + ahead + at]);
      if (pairs() && !single) prefetcht0(ptr[src + (src_at(v) + pl_.src_c) * eb() + ahead + at]);
    }
  for (int u = 0; u < u_n(); ++u) {
    const int n = in_lanes(t, u);
    if (n == 0) continue;
    const Address a = ptr[src + src_at(u) * eb()];
    if (pairs()) {
      // The pair's rows as words 0-15 and 16-31 (the second loaded from 32 bytes before its row
      // under the high mask, so only its own words are read), then interleaved into dword lanes.
      const Zmm x(in(u).getIdx());
      vmovdqu16(x | Opmask(1 + u) | T_z, a);
      if (!single) vmovdqu16(x | Opmask(4 + u), ptr[src + (pl_.src_c + src_at(u)) * eb() - 32]);
      vpermw(in(u), pair_index(), in(u));
    } else if (n == lanes())
      io16() ? load_io(in(u), a) : vmovups(in(u), a);
    else if (io16())
      load_io_lanes(in(u), a, 0, n, Opmask(1 + u));
    else if (zmm())
      vmovups(Zmm(in(u).getIdx()) | Opmask(1 + u) | T_z, a);
    else
      vmaskmovps(in(u), ymask(), a);
  }
  for (int c = 0; c < cb_; ++c)
    for (int64_t kx = 0; kx < kx_n(); ++kx) {
      const int64_t w = (c * kx_n() + kx) * kFloat;
      if (!zmm()) vbroadcastss(bcast(), ptr[wei + w]);
      for (int u = 0; u < u_n(); ++u) {
        const int n = in_lanes(t, u);
        if (n == 0) continue;
        if (!zmm()) {
          vfmadd231ps(acc_in(set, c, kx, u), in(u), bcast());
          continue;
        }
        const Zmm z(acc_in(set, c, kx, u).getIdx()), x(in(u).getIdx());
        const Zmm a = n == lanes() ? z : z | Opmask(1 + u);
        if (pairs())
          vdpbf16ps(a, x, ptr_b[wei + w]);
        else
          vfmadd231ps(a, x, ptr_b[wei + w]);
      }
    }
}

// Output vector m of input vector u covers q = L s (tile's first vector + u) + L m + lane (L lanes), lane
// l of phase l mod s at input lane (L m + l) div s. Kernel x = px + s d adds, at those lanes, its
// accumulator d lanes earlier: table (m, d) indexes the pair (this vector, the one before).
void ColXGenerator::emit_output(int64_t t) {
  for (int c = 0; c < cb_; ++c)
    for (int u = 0; u < u_n(); ++u)
      for (int64_t m = 0; m < s(); ++m) {
        if (out_bits(t, u, m) == 0) continue;
        if (!zmm()) {
          emit_output_ymm(t, c, u, m);
          continue;
        }
        const Zmm out(temp(0).getIdx()), perm(temp(1).getIdx());
        bool first = true;
        for (int64_t px = 0; px < s() && px < kx_n(); ++px) {
          uint32_t phase = 0;
          for (int l = 0; l < lanes(); ++l)
            if (l % s() == px) phase |= 1u << l;
          if (s() > 1) set_mask(k5, phase);
          for (int64_t kx = px; kx < kx_n(); kx += s()) {
            const Zmm dst = first ? out : perm;
            vmovups(dst, ptr[rip + l_index_ + 64 * (m * d_n() + kx / s())]);
            const Xmm masked = s() > 1 ? Xmm(dst | k5 | T_z) : Xmm(dst);
            const Zmm cur(acc(c, kx, u).getIdx());
            if (u > 0 && !images())
              vpermi2ps(masked, cur, Zmm(acc(c, kx, u - 1).getIdx()));
            else
              vpermi2ps(masked, cur, prev(c, kx, images() ? u : 0));
            if (!first) vaddps(out, out, perm);
            first = false;
          }
        }
        if (first) vxorps(out, out, out);
        emit_store(t, c, u, m);
      }
}

// AVX2: per (m, d) the index, then per kernel x = px + s d one vpermps of this vector and, where lanes
// reach into the vector before, one of that and a blend; lanes of other phases are cleared by an and.
void ColXGenerator::emit_output_ymm(int64_t t, int c, int u, int64_t m) {
  const Ymm out(temp(0).getIdx()), part(temp(1).getIdx()), before(temp(2).getIdx()), index(temp(3).getIdx());
  bool first = true;
  for (int64_t d = 0; d < d_n(); ++d) {
    uint8_t from_before = 0, from_this = 0;  // lanes whose index reaches into the vector before
    for (int l = 0; l < lanes(); ++l)
      ((m * lanes() + l) / s() - d < 0 ? from_before : from_this) |= static_cast<uint8_t>(1u << l);
    vmovups(index, ptr[rip + l_index_ + 4 * lanes() * (m * d_n() + d)]);
    for (int64_t px = 0; px < s() && px + s() * d < kx_n(); ++px) {
      const int64_t kx = px + s() * d;
      const Ymm dst = first ? out : part;
      auto permute_earlier = [&](const Ymm& to) {
        if (u > 0 && !images())
          vpermps(to, index, Ymm(acc(c, kx, u - 1).getIdx()));
        else
          vpermps(to, index, prev(c, kx, images() ? u : 0));
      };
      if (from_this) vpermps(dst, index, Ymm(acc(c, kx, u).getIdx()));
      if (from_before && !from_this) permute_earlier(dst);
      if (from_before && from_this) {
        permute_earlier(before);
        vblendps(dst, dst, before, from_before);
      }
      if (s() > 1) vandps(dst, dst, ptr[rip + l_phases_ + 4 * lanes() * px]);
      if (!first) vaddps(out, out, part);
      first = false;
    }
  }
  if (first) vxorps(out, out, out);
  emit_store(t, c, u, m);
}

void ColXGenerator::emit_store(int64_t t, int c, int u, int64_t m) {
  const uint32_t bits = out_bits(t, u, m);
  const Xmm out = temp(0), scratch = temp(1);
  const Address a = ptr[r_xd + dst_at(c, u, m) * eb()];
  const bool whole = bits == all_lanes();
  const int lo = __builtin_ctz(bits), hi = 32 - __builtin_clz(bits);
  if (!whole && zmm()) set_mask(k7, bits);
  if (io16()) {
    whole ? store_io(a, out, scratch) : store_io_lanes(a, out, lo, hi, k7, scratch);
  } else if (whole) {
    vmovups(a, out);
  } else if (zmm()) {
    vmovups(a | k7, Zmm(out.getIdx()));
  } else {
    store_f32_lanes(a, Ymm(out.getIdx()), lo, hi, scratch);
  }
}

void ColXGenerator::emit_tables() {
  if (pairs()) {  // (bf16 pairs only: nothing else reads it)
    align(64);
    L(l_pairs_);  // word 2j <- j (first channel), word 2j + 1 <- 16 + j (second)
    for (int j = 0; j < 16; ++j) dd(static_cast<uint32_t>(j) | static_cast<uint32_t>(16 + j) << 16);
  }
  align(64);
  L(l_index_);
  const int64_t n = lanes();
  for (int64_t m = 0; m < s(); ++m)
    for (int64_t d = 0; d < d_n(); ++d)
      for (int64_t l = 0; l < n; ++l) dd(static_cast<uint32_t>(((m * n + l) / s() - d) & (2 * n - 1)));
  if (zmm()) return;
  L(l_phases_);
  for (int64_t px = 0; px < s(); ++px)
    for (int64_t l = 0; l < n; ++l) dd(l % s() == px ? 0xffffffffu : 0u);
  L(l_masks_);
  for (const auto& [lo, hi] : masks_)
    for (int l = 0; l < n; ++l) dd(l >= lo && l < hi ? 0xffffffffu : 0u);
}

// Up to 12 bytes an instruction. A tile: the reduction's taps once per accumulator set in the step and
// again for the remainder (AVX2: a broadcast per weight, an and per accumulator after); per output vector
// and kernel x an index load, a permute and an add (AVX2: up to five instructions); the stack copies.
// Times the pieces of every part, for each block kind; then the tables (AVX2: a few lane masks).
size_t ColXGenerator::code_bound(const Plan& pl) {
  const size_t kx = static_cast<size_t>(pl.axes[2].kernel), u = static_cast<size_t>(pl.ur_w);
  const size_t cb = static_cast<size_t>(pl.oc_vectors), s = static_cast<size_t>(pl.axes[2].stride);
  const size_t taps = 256 + (u * 4 + 8) * 12 + cb * kx * (u + 1) * 12;
  const size_t reduction = 512 + (2 * static_cast<size_t>(pl.ic_unroll) + 1) * (taps + 64) + cb * kx * u * 20;
  const size_t output = cb * u * s * (96 + kx * 64 + 96);
  const size_t tile = reduction + output + cb * kx * (u + 1) * 24 + 256;
  const TileMap map(pl);
  size_t pieces = 0;
  for (int64_t part = 0; part < pl.x_split; ++part) pieces += map.pieces(part).size();
  const size_t parts = static_cast<size_t>(pl.x_split);
  return (pl.dtype == DType::f32 ? 1 : 2) * (8192 + 2 * (pieces * (tile + 128) + parts * 1024) + s * 64 * 32 + 4096);
}

}  // namespace

EmittedCode emit_col_x(const Plan& plan) {
  ColXGenerator gen(plan);
  return gen.run();
}

}  // namespace deconvjit::jit
