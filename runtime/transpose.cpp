// 8x8 tiles in AVX registers (unpack, shuffle, lane permute), masked at ragged edges. AVX is below
// the library's floor (AVX2 + FMA), so this is always available when a kernel runs.
#include "runtime/transpose.hpp"

#include <immintrin.h>

#include <algorithm>

namespace deconvjit::detail {
namespace {

// The 8x8 tile in registers: o[c] holds column c (rows 0-7).
__attribute__((target("avx"))) inline void transpose8(const float* in, int64_t is, __m256 o[8]) {
  const __m256 r0 = _mm256_loadu_ps(in + 0 * is), r1 = _mm256_loadu_ps(in + 1 * is);
  const __m256 r2 = _mm256_loadu_ps(in + 2 * is), r3 = _mm256_loadu_ps(in + 3 * is);
  const __m256 r4 = _mm256_loadu_ps(in + 4 * is), r5 = _mm256_loadu_ps(in + 5 * is);
  const __m256 r6 = _mm256_loadu_ps(in + 6 * is), r7 = _mm256_loadu_ps(in + 7 * is);
  // Pairs of rows interleaved, then quadruples, then the 128-bit halves swapped into place.
  const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
  const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
  const __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
  const __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  o[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
  o[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  o[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
  o[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  o[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  o[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  o[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  o[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

__attribute__((target("avx"))) void tile8(const float* in, int64_t is, float* out, int64_t os) {
  __m256 o[8];
  transpose8(in, is, o);
  for (int c = 0; c < 8; ++c) _mm256_storeu_ps(out + c * os, o[c]);
}

// 16 rows of 8 columns: each column's 16 elements, one cache line where they start one, leave by two
// non-temporal stores back to back (write-combined into one line), elsewhere by plain ones.
__attribute__((target("avx"))) void tile16x8_nt(const float* in, int64_t is, float* out, int64_t os) {
  __m256 lo[8], hi[8];
  transpose8(in, is, lo);
  transpose8(in + 8 * is, is, hi);
  for (int c = 0; c < 8; ++c) {
    float* o = out + c * os;
    if (reinterpret_cast<uintptr_t>(o) % 64 == 0) {
      _mm256_stream_ps(o, lo[c]);
      _mm256_stream_ps(o + 8, hi[c]);
    } else {
      _mm256_storeu_ps(o, lo[c]);
      _mm256_storeu_ps(o + 8, hi[c]);
    }
  }
}

// A ragged tile: nr rows of nc columns (each at most 8) through the same register transpose, with masked
// loads and stores so nothing outside the block is read or written. Element-by-element copies of the
// edges cost as much as the tiles did (maskrcnn_mask rows are 28 pixels wide).
__attribute__((target("avx2"))) void tile8_partial(const float* in, int64_t is, float* out, int64_t os,
                                                   int64_t nr, int64_t nc) {
  alignas(32) float rows[8][8];
  alignas(32) float cols[8][8];
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i col_mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(nc)), lane);
  const __m256i row_mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(nr)), lane);
  for (int64_t r = 0; r < 8; ++r)
    _mm256_store_ps(rows[r], r < nr ? _mm256_maskload_ps(in + r * is, col_mask) : _mm256_setzero_ps());
  tile8(&rows[0][0], 8, &cols[0][0], 8);
  for (int64_t c = 0; c < nc; ++c) _mm256_maskstore_ps(out + c * os, row_mask, _mm256_load_ps(cols[c]));
}

// One row or one column: nothing to transpose, a strided copy (one channel's plane to or from NXC).
// Through the 8x8 tiles it would take a ragged tile, with one-element masked stores, per 8 elements
// (hed_dsn5_up, one channel in and out, spent most of its time in those copies).
template <typename In, typename Out, typename Move>
bool degenerate(const In* in, int64_t is, Out* out, int64_t os, int64_t rows, int64_t cols, Move move) {
  if (rows != 1 && cols != 1) return false;
  const int64_t n = rows * cols, in_step = rows == 1 ? 1 : is, out_step = rows == 1 ? os : 1;
  for (int64_t i = 0; i < n; ++i) out[i * out_step] = move(in[i * in_step]);
  return true;
}

}  // namespace

// Lines are finished on the side with the larger stride before the loop moves on: strides that are
// multiples of 4 KiB (channel planes of 64x64, 128x128, ...) put every line of that side into one cache
// set, so more than a few half-written lines in flight would thrash L1 and L2. Tiles of `tile_rows` rows
// (8, or a line's for transpose_block_nt) by 8 columns.
template <typename In, typename Out, typename Tile>
void full_tiles(const In* in, int64_t is, Out* out, int64_t os, int64_t rf, int64_t cf, Tile tile,
                int64_t tile_rows = 8) {
  if (os > is) {
    for (int64_t c = 0; c < cf; c += 8)
      for (int64_t r = 0; r < rf; r += tile_rows) tile(in + r * is + c, is, out + c * os + r, os);
  } else {
    for (int64_t r = 0; r < rf; r += tile_rows)
      for (int64_t c = 0; c < cf; c += 8) tile(in + r * is + c, is, out + c * os + r, os);
  }
}

void transpose_block(const float* in, int64_t is, float* out, int64_t os, int64_t rows, int64_t cols) {
  if (degenerate(in, is, out, os, rows, cols, [](float v) { return v; })) return;
  const int64_t rf = rows / 8 * 8, cf = cols / 8 * 8;
  full_tiles(in, is, out, os, rf, cf, tile8);
  if (rows > rf)
    for (int64_t c = 0; c < cols; c += 8)
      tile8_partial(in + rf * is + c, is, out + c * os + rf, os, rows - rf, std::min<int64_t>(8, cols - c));
  if (cols > cf)
    for (int64_t r = 0; r < rf; r += 8) tile8_partial(in + r * is + cf, is, out + cf * os + r, os, 8, cols - cf);
}

// The AVX2 row buffer's flush of rows of whole lines (Plan::nt_stores): tiles of a line's rows (16 f32,
// 32 16-bit elements) by 8 columns (full_tiles); the ragged rest through transpose_block. The caller
// fences.
template <typename T, typename Tile>
void lines_nt(const T* in, int64_t is, T* out, int64_t os, int64_t rows, int64_t cols, Tile tile) {
  constexpr int64_t line = 64 / sizeof(T);
  const int64_t rf = rows / line * line, cf = cols / 8 * 8;
  if (rf == 0 || cf == 0) return transpose_block(in, is, out, os, rows, cols);
  full_tiles(in, is, out, os, rf, cf, tile, line);
  if (rows > rf) transpose_block(in + rf * is, is, out + rf, os, rows - rf, cols);
  if (cols > cf) transpose_block(in + cf, is, out + cf * os, os, rf, cols - cf);
}

void transpose_block_nt(const float* in, int64_t is, float* out, int64_t os, int64_t rows, int64_t cols) {
  lines_nt(in, is, out, os, rows, cols, tile16x8_nt);
}

// 16-bit elements (bf16, f16) move as bits: 8x8 tiles through three rounds of interleaving (SSE2), the
// tiles' order as above; ragged edges element by element.
namespace {

// o[c] holds column c (rows 0-7).
inline void transpose8_u16(const uint16_t* in, int64_t is, __m128i o[8]) {
  __m128i r[8], t[8], u[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i * is));
  for (int i = 0; i < 4; ++i) {  // pairs of rows, word by word
    t[2 * i] = _mm_unpacklo_epi16(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm_unpackhi_epi16(r[2 * i], r[2 * i + 1]);
  }
  for (int h = 0; h < 2; ++h)  // quadruples of rows, pair by pair: u[4h + j] holds columns 2j, 2j + 1
    for (int i = 0; i < 2; ++i) {
      u[4 * h + 2 * i] = _mm_unpacklo_epi32(t[4 * h + i], t[4 * h + 2 + i]);
      u[4 * h + 2 * i + 1] = _mm_unpackhi_epi32(t[4 * h + i], t[4 * h + 2 + i]);
    }
  for (int j = 0; j < 4; ++j) {  // rows 0-3 and 4-7 of columns 2j and 2j + 1
    o[2 * j] = _mm_unpacklo_epi64(u[j], u[4 + j]);
    o[2 * j + 1] = _mm_unpackhi_epi64(u[j], u[4 + j]);
  }
}

void tile8_u16(const uint16_t* in, int64_t is, uint16_t* out, int64_t os) {
  __m128i o[8];
  transpose8_u16(in, is, o);
  for (int c = 0; c < 8; ++c) _mm_storeu_si128(reinterpret_cast<__m128i*>(out + c * os), o[c]);
}

// 32 rows of 8 columns: each column's 32 elements (a line where they start one) by four non-temporal
// 16-byte stores back to back, as tile16x8_nt does for f32.
void tile32x8_u16_nt(const uint16_t* in, int64_t is, uint16_t* out, int64_t os) {
  __m128i q[4][8];
  for (int k = 0; k < 4; ++k) transpose8_u16(in + 8 * k * is, is, q[k]);
  for (int c = 0; c < 8; ++c) {
    auto* o = reinterpret_cast<__m128i*>(out + c * os);
    const bool line = reinterpret_cast<uintptr_t>(o) % 64 == 0;
    for (int k = 0; k < 4; ++k) line ? _mm_stream_si128(o + k, q[k][c]) : _mm_storeu_si128(o + k, q[k][c]);
  }
}

}  // namespace

void transpose_block(const uint16_t* in, int64_t is, uint16_t* out, int64_t os, int64_t rows, int64_t cols) {
  if (degenerate(in, is, out, os, rows, cols, [](uint16_t v) { return v; })) return;
  const int64_t rf = rows / 8 * 8, cf = cols / 8 * 8;
  full_tiles(in, is, out, os, rf, cf, tile8_u16);
  for (int64_t c = 0; c < cols; ++c)  // the rows past rf, every column; then the columns past cf
    for (int64_t r = rf; r < rows; ++r) out[c * os + r] = in[r * is + c];
  for (int64_t c = cf; c < cols; ++c)
    for (int64_t r = 0; r < rf; ++r) out[c * os + r] = in[r * is + c];
}

void transpose_block_nt(const uint16_t* in, int64_t is, uint16_t* out, int64_t os, int64_t rows, int64_t cols) {
  lines_nt(in, is, out, os, rows, cols, tile32x8_u16_nt);
}

namespace {

// Eight elements widened: bf16 is f32's upper half; f16 through F16C (part of the library's AVX2 floor).
__attribute__((target("avx2,f16c"))) void widen8(const uint16_t* in, float* out, bool f16) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in));
  _mm256_storeu_ps(out, f16 ? _mm256_cvtph_ps(h)
                            : _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)));
}

// One element, by the same instruction as widen8 (f16 NaNs come out alike, quieted).
__attribute__((target("f16c"))) float widen1(uint16_t h, bool f16) {
  return f16 ? _cvtsh_ss(h) : _mm_cvtss_f32(_mm_castsi128_ps(_mm_cvtsi32_si128(static_cast<int>(uint32_t{h} << 16))));
}

}  // namespace

// widen8 inlined (the same target): with a call per 8 elements, the widened copy of an f16 col layer's
// 1.7 MB source took a tenth of its time (a 512 -> 12 layer on AVX2, 1 thread: 1.02 -> 0.90 ms).
__attribute__((target("avx2,f16c"))) void widen(const uint16_t* in, float* out, int64_t n, DType type) {
  const bool f16 = type == DType::f16;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) widen8(in + i, out + i, f16);
  for (; i < n; ++i) out[i] = widen1(in[i], f16);
}

// An 8x8 tile moved as bits (tile8_u16) into a small buffer, then widened row by row.
void transpose_block(const uint16_t* in, int64_t is, float* out, int64_t os, int64_t rows, int64_t cols,
                     DType type) {
  const bool f16 = type == DType::f16;
  if (degenerate(in, is, out, os, rows, cols, [f16](uint16_t v) { return widen1(v, f16); })) return;
  const int64_t rf = rows / 8 * 8, cf = cols / 8 * 8;
  full_tiles(in, is, out, os, rf, cf, [f16](const uint16_t* i, int64_t si, float* o, int64_t so) {
    alignas(16) uint16_t tile[64];
    tile8_u16(i, si, tile, 8);
    for (int j = 0; j < 8; ++j) widen8(tile + 8 * j, o + j * so, f16);
  });
  for (int64_t c = 0; c < cols; ++c)
    for (int64_t r = rf; r < rows; ++r) out[c * os + r] = widen1(in[r * is + c], f16);
  for (int64_t c = cf; c < cols; ++c)
    for (int64_t r = 0; r < rf; ++r) out[c * os + r] = widen1(in[r * is + c], f16);
}

}  // namespace deconvjit::detail
