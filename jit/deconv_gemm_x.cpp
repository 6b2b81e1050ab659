// The gemm_x family (see runtime/plan_gemm_x.cpp): NCX, K == s, no pads. A register block is V input
// vectors (ur_w along x, or rows_per_block rows of one vector) x the block's output channels x the kernel
// positions; per input channel V vector loads, one broadcast per (channel, position), V FMAs each (a wide
// block of more than 3 vectors takes the three input registers in turn: emit_wide_step). With
// bf16 pairs (Plan::ic_pairs) a step is two input channels: each vector's two rows are loaded into the
// halves of a register and interleaved (vpermw), each broadcast holds the pair's two weights, and
// vdpbf16ps does twice the FMA's work. The store interleaves the two x phases (vpermi2ps) into
// contiguous NCX output rows; on AVX2 (8 lanes, 16 registers) vunpcklps/vunpckhps and vperm2f128 do that.
// Kind 0 holds Plan::main's channels, kind 1 Plan::last's; per kind, function 0 computes a full row group
// and function 1 (when the height calls for it) the shorter last group of a plane, or with x chunks
// (Plan::x_chunk, rows of one input row each) function 0 a full chunk and function 1 the row's last. With a
// 1x1 kernel on x (stride 1) the vectors are stored as they are.
#include <algorithm>
#include <stdexcept>
#include <vector>

#include "jit/deconv_kernels.hpp"
#include "jit/generator.hpp"
#include "jit/kernel_abi.hpp"

namespace deconvjit::jit {
namespace {

using namespace Xbyak;
using detail::Plan;
using Off = KernelArgsOffsets;
constexpr int kFloat = 4;

// An input vector of a block: lanes q0 .. q0 + lanes - 1 of the row group's plane-contiguous source, so
// lane l is input row (q0 + l) / W, column (q0 + l) % W of the group. With x chunks q0 counts from the
// chunk's first pixel and stays below the chunk's width (< W): the row is then 0 and the column relative
// to the chunk, whose source and output the caller points at.
struct Vec {
  int64_t q0 = 0;
  int lanes = 16;  // real lanes
};

class GemmXGenerator : public Generator {
 public:
  explicit GemmXGenerator(const Plan& pl) : Generator(code_bound(pl)), pl_(pl) {}

  EmittedCode run() {
    EmittedCode out;
    set_io(pl_.dtype, zmm(), pl_.ic_pairs, pl_.bf16_vcvt);
    const int kinds = pl_.has_tail() ? 2 : 1;
    const int64_t height = pl_.axes[1].in, rows = pl_.rows_per_block, chunk = pl_.x_chunk;
    // Variants: the full row group and the plane's last, shorter one; with x chunks (one row each), the
    // full chunk and the row's last.
    const int64_t tail = chunk ? row_in() - (detail::x_chunks(pl_) - 1) * chunk : 0;
    for (int kind = 0; kind < kinds; ++kind)
      for (int variant = 0; variant < 2; ++variant) {
        const int64_t r = chunk ? 1 : variant == 0 ? rows : height % rows;
        if (r == 0) continue;
        extent_ = chunk ? (variant == 0 ? chunk : tail) : row_in();
        align(16);
        out.entries[kind].push_back(getSize());
        emit_function(kind == 0 ? pl_.main.vectors : pl_.last.vectors, static_cast<int>(r));
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
  const Reg64 r_src = rsi, r_dst = rdx;  // the row group: first input row, first output row
  const Reg64 r_nblk = rcx;              // row groups left
  const Reg64 r_s = r8, r_w = r9;        // source and weights at the current input channel
  const Reg64 r_ic = r10, r_tmp = r11;   // channel iterations left; opmask bits and big immediates

  const Plan& pl_;
  int channels_ = 1;  // output channels of the block kind being emitted
  int rows_ = 1;      // input rows of the row group being emitted
  int64_t extent_ = 0;  // input pixels of each row a call covers (the row, or an x chunk)
  Label l_index_, l_pairs_, l_mask_;

  int64_t positions() const { return pl_.axes[0].kernel * pl_.axes[1].kernel * pl_.axes[2].kernel; }
  int columns() const { return static_cast<int>(channels_ * positions()); }
  int64_t plane_in() const { return pl_.src_c; }
  int64_t out_sp() const { return pl_.dst_c; }
  int64_t row_in() const { return pl_.axes[2].in; }
  int64_t row_out() const { return pl_.axes[2].out; }
  int64_t eb() const { return pl_.elem_bytes(); }  // one src or dst element (weights are f32)

  // AVX-512: accumulators 0-23, input vectors 24-26, broadcasts 27-28, the store's tables 29-30 and its
  // interleaved output 31. AVX2: accumulators 0-11, input vectors 12-14, the broadcast 15 (before it, in a
  // step, the mask of a ragged load); at the store 12-13 hold the unpacked pair, 14 the output, 15 the
  // stores' scratch.
  bool zmm() const { return pl_.isa == Isa::avx512_core; }
  Xmm vreg(int i) const { return zmm() ? Xmm(Zmm(i)) : Xmm(Ymm(i)); }
  Xmm acc(int v, int c) const { return vreg(v * columns() + c); }
  Xmm xvec(int v) const { return vreg((zmm() ? 24 : 12) + v); }
  Xmm bvec(int c) const { return zmm() ? vreg(27 + c % 2) : vreg(15); }
  Ymm load_mask() const { return Ymm(15); }
  Zmm idx(int half) const { return Zmm(29 + half); }
  Zmm pair_index() const { return Zmm(29); }  // bf16 pairs, during the reduction (the store reloads idx)
  bool pairs() const { return pl_.ic_pairs; }
  int64_t step_in() const { return (pairs() ? 2 : 1) * plane_in(); }  // source elements per step
  Xmm temp() const { return vreg(zmm() ? 31 : 14); }
  Xmm store_scratch() const { return zmm() ? bvec(0) : Xmm(Ymm(15)); }

  static size_t code_bound(const Plan& pl);
  std::vector<std::vector<Vec>> blocks() const;
  void emit_function(int channels, int rows);
  void emit_block(const std::vector<Vec>& vs);
  void emit_ic_step(const std::vector<Vec>& vs, int k, bool single = false);
  void emit_wide_step(const std::vector<Vec>& vs, int k);
  void emit_loads(const std::vector<Vec>& vs, int k);
  void emit_load(const Xmm& x, const Vec& vec, int k);
  void emit_pair_loads(const std::vector<Vec>& vs, int k, bool single);
  void emit_store(const std::vector<Vec>& vs);
  void emit_half_store(const Address& a, int first, int end);  // output positions [first, end) of temp()
  void emit_plain_store(const std::vector<Vec>& vs);
  void interleave(int half, const Xmm& even, const Xmm& odd);  // half of the pair's outputs into temp()
  void emit_lanes_store(const Address& a, const Xmm& from, int first, int end);
  void emit_tables();
};

// The register blocks of one row group: balanced runs of ur_w vectors along the row (or along the whole
// plane, Plan::flat_plane, where vectors run on across rows), or the rows_per_block rows of one vector
// each together.
std::vector<std::vector<Vec>> GemmXGenerator::blocks() const {
  const int64_t lanes = pl_.lanes;
  std::vector<std::vector<Vec>> out;
  if (pl_.rows_per_block > 1 && !pl_.flat_plane) {
    out.emplace_back();
    for (int r = 0; r < rows_; ++r) out.back().push_back(Vec{r * row_in(), static_cast<int>(row_in())});
    return out;
  }
  const int64_t extent = pl_.flat_plane ? rows_ * row_in() : extent_;
  const int64_t nv = (extent + lanes - 1) / lanes, count = (nv + pl_.ur_w - 1) / pl_.ur_w;
  int64_t q = 0;
  for (int64_t b = 0; b < count; ++b) {
    const int64_t width = nv / count + (b < nv % count ? 1 : 0);
    out.emplace_back();
    for (int64_t i = 0; i < width; ++i, q += lanes)
      out.back().push_back(Vec{q, static_cast<int>(std::min<int64_t>(lanes, extent - q))});
  }
  return out;
}

void GemmXGenerator::emit_function(int channels, int rows) {
  channels_ = channels;
  rows_ = rows;
  preamble();
  mov(r_src, ptr[r_args + Off::src]);
  mov(r_dst, ptr[r_args + Off::dst]);
  mov(r_nblk, ptr[r_args + Off::nblocks]);
  Label l_group, l_done;
  test(r_nblk, r_nblk);
  jle(l_done, T_NEAR);
  L(l_group);
  for (const std::vector<Vec>& vs : blocks()) emit_block(vs);
  add_imm(r_src, rows_ * row_in() * eb(), r_tmp);
  add_imm(r_dst, rows_ * pl_.axes[1].stride * row_out() * eb(), r_tmp);
  dec(r_nblk);
  jnz(l_group, T_NEAR);
  L(l_done);
  postamble();
}

void GemmXGenerator::emit_block(const std::vector<Vec>& vs) {
  for (size_t v = 0; v < vs.size(); ++v)
    for (int c = 0; c < columns(); ++c) vxorps(acc(v, c), acc(v, c), acc(v, c));
  mov(r_s, r_src);
  mov(r_w, ptr[r_args + Off::wei]);
  // (bf16 pairs: a step is a pair of channels; an odd last channel is a step of its own)
  const bool odd = pairs() && pl_.ic_per_group % 2 == 1;
  const int64_t steps = pairs() ? pl_.ic_per_group / 2 : pl_.ic_per_group;
  const int64_t u = pl_.ic_unroll, iters = steps / u, rem = steps % u;
  if (pairs()) {  // words: the first channel's lanes in the low half, the second's in the high half
    for (size_t v = 0; v < vs.size(); ++v) {
      const uint32_t lo = (1u << vs[v].lanes) - 1;  // lanes <= 16
      mov(r_tmp.cvt32(), lo);
      kmovd(Opmask(1 + static_cast<int>(v)), r_tmp.cvt32());
      mov(r_tmp.cvt32(), lo << 16);
      kmovd(Opmask(4 + static_cast<int>(v)), r_tmp.cvt32());
    }
    vmovups(pair_index(), ptr[rip + l_pairs_]);
  }
  auto advance = [&](int64_t n) {
    add_imm(r_s, n * step_in() * eb(), r_tmp);
    add_imm(r_w, n * columns() * kFloat, r_tmp);
  };
  if (iters > 0) {
    Label l_ic;
    mov(r_ic, iters);
    L(l_ic);
    for (int k = 0; k < u; ++k) emit_ic_step(vs, k);
    advance(u);
    dec(r_ic);
    jnz(l_ic, T_NEAR);
  }
  for (int k = 0; k < rem; ++k) emit_ic_step(vs, k);
  if (odd) emit_ic_step(vs, static_cast<int>(rem), true);
  emit_store(vs);
}

// A pair's rows as words 0-15 and 16-31 of each vector (the second loaded from 32 bytes before its row
// under the high mask, so only its own words are read), then interleaved into dword lanes. `single`: an
// odd last channel, whose partner stays zero.
void GemmXGenerator::emit_pair_loads(const std::vector<Vec>& vs, int k, bool single) {
  for (size_t v = 0; v < vs.size(); ++v) {
    const int m = static_cast<int>(v);
    const int64_t at = k * step_in() + vs[v].q0;
    vmovdqu16(xvec(m) | Opmask(1 + m) | T_z, ptr[r_s + at * eb()]);
    if (!single) vmovdqu16(xvec(m) | Opmask(4 + m), ptr[r_s + (at + plane_in()) * eb() - 32]);
    vpermw(xvec(m), pair_index(), xvec(m));
  }
}

// One input channel's vectors, the ragged end of a row under a zeroing mask.
void GemmXGenerator::emit_loads(const std::vector<Vec>& vs, int k) {
  for (size_t v = 0; v < vs.size(); ++v) emit_load(xvec(static_cast<int>(v)), vs[v], k);
}

void GemmXGenerator::emit_load(const Xmm& x, const Vec& vec, int k) {
  const Address a = ptr[r_s + (k * plane_in() + vec.q0) * eb()];
  if (vec.lanes == pl_.lanes) {
    io16() ? load_io(x, a) : vmovups(x, a);
    return;
  }
  if (!zmm()) {  // AVX2: 16-bit elements inserted one by one; f32 under a mask from the table (lanes 0 .. lanes-1)
    if (io16()) return load_io_lanes(x, a, 0, vec.lanes, k1);
    vmovups(load_mask(), ptr[rip + l_mask_ + (pl_.lanes - vec.lanes) * kFloat]);
    return vmaskmovps(x, load_mask(), a);
  }
  mov(r_tmp.cvt32(), (1u << vec.lanes) - 1);
  kmovw(k1, r_tmp.cvt32());
  io16() ? load_io_lanes(x, a, 0, vec.lanes, k1) : vmovups(x | k1 | T_z, a);
}

// One input channel (or pair): the block's input vectors, then per (output channel, kernel position)
// one broadcast weight and one FMA per vector.
void GemmXGenerator::emit_ic_step(const std::vector<Vec>& vs, int k, bool single) {
  if (vs.size() > 3) return emit_wide_step(vs, k);
  if (pairs())
    emit_pair_loads(vs, k, single);
  else
    emit_loads(vs, k);
  for (int c = 0; c < columns(); ++c) {
    // One vector: the weight feeds a single FMA, which reads it itself (an embedded broadcast; see
    // deconv_direct.cpp). nnunet3d_up320 NCX (rows of one vector) 0.64 -> 0.48 ms on Zen 4, 2 threads.
    if (vs.size() == 1 && !pairs() && zmm()) {
      vfmadd231ps(acc(0, c), xvec(0), ptr_b[r_w + (k * columns() + c) * kFloat]);
      continue;
    }
    vbroadcastss(bvec(c), ptr[r_w + (k * columns() + c) * kFloat]);
    for (size_t v = 0; v < vs.size(); ++v) {
      if (pairs())
        vdpbf16ps(acc(v, c), xvec(v), bvec(c));
      else
        vfmadd231ps(acc(v, c), xvec(v), bvec(c));
    }
  }
}

// A wide block (more than the three input registers; Plan::ur_w, see runtime/plan_gemm_x.cpp): the
// broadcasts of every output column first (at most 5, in registers 27-31, which the reduction leaves
// free), then each vector loaded into one of the input registers in turn and used by every column (f32,
// one column: read by its FMA).
void GemmXGenerator::emit_wide_step(const std::vector<Vec>& vs, int k) {
  if (pairs() || columns() > 5) throw std::logic_error("gemm_x: wide blocks take no bf16 pairs, 5 columns at most");
  auto bcast = [](int c) { return Zmm(27 + c); };
  for (int c = 0; c < columns(); ++c) vbroadcastss(bcast(c), ptr[r_w + (k * columns() + c) * kFloat]);
  for (size_t v = 0; v < vs.size(); ++v) {
    const int m = static_cast<int>(v);
    const Address a = ptr[r_s + (k * plane_in() + vs[v].q0) * eb()];
    if (vs[v].lanes == pl_.lanes && !io16() && columns() == 1) {
      vfmadd231ps(acc(m, 0), bcast(0), a);
      continue;
    }
    const Xmm x = xvec(m % 3);
    emit_load(x, vs[v], k);
    for (int c = 0; c < columns(); ++c) vfmadd231ps(acc(m, c), x, bcast(c));
  }
}

// Stride 1 on x (a 1x1 kernel there): lane l of a vector is output x ix + l of its input row's output
// row, stored as it is, one store per input row the lanes belong to.
void GemmXGenerator::emit_plain_store(const std::vector<Vec>& vs) {
  const int64_t ky_n = pl_.axes[1].kernel, kz_n = pl_.axes[0].kernel, out_h = pl_.axes[1].out;
  for (size_t v = 0; v < vs.size(); ++v)
    for (int co = 0; co < channels_; ++co)
      for (int64_t kz = 0; kz < kz_n; ++kz)
        for (int64_t ky = 0; ky < ky_n; ++ky) {
          const int c = static_cast<int>(co * positions() + kz * ky_n + ky);
          for (int a = 0; a < vs[v].lanes;) {  // lanes [a, b) lie in one input row
            const int64_t iy = (vs[v].q0 + a) / row_in(), ix = (vs[v].q0 + a) % row_in();
            const int b = static_cast<int>(std::min<int64_t>(vs[v].lanes, a + row_in() - ix));
            const int64_t row = kz * out_h + pl_.axes[1].stride * iy + ky;
            const int64_t base = co * out_sp() + row * row_out() + ix - a;
            emit_lanes_store(ptr[r_dst + base * eb()], acc(static_cast<int>(v), c), a, b);
            a = b;
          }
        }
}

// Per (vector, output channel, z and y position) the kx = 0 and kx = 1 sums interleave into twice the lanes
// of outputs, out[2l + kx] = acc_kx[l], stored half a vector (8 input lanes on AVX-512, 4 on AVX2) at a
// time: one store per input row the half's lanes belong to, of only its lanes when it is not the whole half.
void GemmXGenerator::emit_store(const std::vector<Vec>& vs) {
  if (pl_.axes[2].stride == 1) return emit_plain_store(vs);
  if (zmm()) {
    vmovups(idx(0), ptr[rip + l_index_]);
    vmovups(idx(1), ptr[rip + l_index_ + 64]);
  }
  const int64_t ky_n = pl_.axes[1].kernel, kz_n = pl_.axes[0].kernel, out_h = pl_.axes[1].out;
  const int half_lanes = pl_.lanes / 2;
  for (size_t v = 0; v < vs.size(); ++v)
    for (int co = 0; co < channels_; ++co)
      for (int64_t kz = 0; kz < kz_n; ++kz)
        for (int64_t ky = 0; ky < ky_n; ++ky) {
          const int c0 = static_cast<int>(co * positions() + (kz * ky_n + ky) * 2);
          for (int half = 0; half < 2; ++half) {
            const int lo = half * half_lanes, hi = std::min(vs[v].lanes, lo + half_lanes);
            if (lo >= hi) continue;
            interleave(half, acc(v, c0), acc(v, c0 + 1));
            for (int a = lo; a < hi;) {  // lanes [a, b) lie in one input row
              const int64_t iy = (vs[v].q0 + a) / row_in(), ix = (vs[v].q0 + a) % row_in();
              const int b = static_cast<int>(std::min<int64_t>(hi, a + row_in() - ix));
              const int64_t row = kz * out_h + pl_.axes[1].stride * iy + ky;
              // Output position j of this half holds input lane lo + j / 2.
              const int64_t base = co * out_sp() + row * row_out() + 2 * ix - 2 * (a - lo);
              emit_half_store(ptr[r_dst + base * eb()], 2 * (a - lo), 2 * (b - lo));
              a = b;
            }
          }
        }
}

// out[2l + kx] = acc_kx[l] for the input lanes of `half` (8 on AVX-512, 4 on AVX2). AVX2 unpacks the pair
// once, at half 0, into registers 12-13 (lanes 0-1 | 4-5 and 2-3 | 6-7 interleaved), and each half takes
// one 128-bit lane of each.
void GemmXGenerator::interleave(int half, const Xmm& even, const Xmm& odd) {
  if (zmm()) {
    vmovaps(temp(), idx(half));
    return vpermi2ps(Zmm(temp().getIdx()), Zmm(even.getIdx()), Zmm(odd.getIdx()));
  }
  const Ymm low(12), high(13);
  if (half == 0) {
    vunpcklps(low, Ymm(even.getIdx()), Ymm(odd.getIdx()));
    vunpckhps(high, Ymm(even.getIdx()), Ymm(odd.getIdx()));
  }
  vperm2f128(Ymm(temp().getIdx()), low, high, half == 0 ? 0x20 : 0x31);
}

void GemmXGenerator::emit_half_store(const Address& a, int first, int end) { emit_lanes_store(a, temp(), first, end); }

// Lanes [first, end) of `from` to a's lanes [first, end). 16-bit: rounded on the way out, with a broadcast
// register (free by now) as scratch. AVX2 stores a partial vector by plain stores of its lanes.
void GemmXGenerator::emit_lanes_store(const Address& a, const Xmm& from, int first, int end) {
  const bool whole = first == 0 && end == pl_.lanes;
  if (whole) return io16() ? store_io(a, from, store_scratch()) : vmovups(a, from);
  if (!zmm()) {
    const Ymm y(from.getIdx());
    if (io16()) return store_io_lanes(a, y, first, end, k2, store_scratch());
    return store_f32_lanes(a, y, first, end, store_scratch());
  }
  mov(r_tmp.cvt32(), ((1u << end) - 1) & ~((1u << first) - 1));
  kmovw(k2, r_tmp.cvt32());
  if (io16())
    store_io_lanes(a, from, first, end, k2, store_scratch());
  else
    vmovups(a | k2, from);
}

void GemmXGenerator::emit_tables() {
  align(64);
  L(l_index_);
  for (int i = 0; i < 32; ++i) dd(static_cast<uint32_t>((i % 2) * 16 + i / 2));
  L(l_pairs_);  // word 2j <- j (first channel), word 2j + 1 <- 16 + j (second)
  for (int j = 0; j < 16; ++j) dd(static_cast<uint32_t>(j) | static_cast<uint32_t>(16 + j) << 16);
  L(l_mask_);  // AVX2: 8 set dwords, then 8 clear; read from (8 - lanes) dwords in
  for (int j = 0; j < 16; ++j) dd(j < 8 ? 0xffffffffu : 0u);
}

size_t GemmXGenerator::code_bound(const Plan& pl) {
  const size_t positions = static_cast<size_t>(pl.axes[0].kernel * pl.axes[1].kernel * pl.axes[2].kernel);
  const size_t columns = positions * static_cast<size_t>(pl.oc_vectors);
  const size_t vecs = static_cast<size_t>(std::max({3, pl.ur_w, pl.rows_per_block}));
  const size_t step = vecs * 3 + columns * (1 + vecs);
  const size_t block = 256 + (pl.ic_unroll * 2) * step * 12 + vecs * columns * 4 * 12;
  const int64_t extent = pl.flat_plane ? pl.axes[1].in * pl.axes[2].in : pl.x_chunk ? pl.x_chunk : pl.axes[2].in;
  // (as many blocks as vectors when they held 3 at most; wide blocks keep that slack per 3 of their vectors)
  const size_t nblocks = static_cast<size_t>((extent + 15) / 16 / std::max(1, pl.ur_w / 3) + 2);
  return (pl.dtype == DType::f32 ? 1 : 3) * (4096 + 4 * nblocks * (block + vecs * columns * 2 * 24));
}

}  // namespace

EmittedCode emit_gemm_x(const Plan& plan) {
  GemmXGenerator gen(plan);
  return gen.run();
}

}  // namespace deconvjit::jit
