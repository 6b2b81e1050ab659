// Transposes in AVX-512 registers for plans on AVX-512 (the row buffer's flush of rows of whole lines,
// flush_in_tiles): f32 in 16x16 tiles, 16-bit elements in 32x16. Against the 8x8 tiles of transpose.cpp a
// tile moves four (eight) times the data per call, its stores are whole cache lines (non-temporal where
// asked), and ragged columns are the same tile under opmasks (nothing outside the block is read or
// written); rows short of a whole tile go to transpose_block.
#include <immintrin.h>

#include <algorithm>

#include "runtime/transpose.hpp"

// Everything here runs only under plans for AVX-512 (F, BW, VL: avx512_core).
#define DECONVJIT_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12's AVX-512 headers pass _mm512_undefined_ps() as the pass-through of unmasked shuffles, which its
// -Wuninitialized then reports from inside the headers.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace deconvjit::detail {
namespace {

// A 16x16 transpose of 32-bit elements: pairs of rows interleave within each 128-bit lane, then
// quadruples; two rounds of 128-bit lane shuffles put lane L of column group j in place.
DECONVJIT_AVX512 void transpose16(const __m512* r, __m512* col) {
  __m512 t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  // u[4q + j], lane L: column 4L + j of rows 4q .. 4q + 3.
  for (int q = 0; q < 16; q += 4) {
    u[q + 0] = _mm512_shuffle_ps(t[q], t[q + 2], 0x44);
    u[q + 1] = _mm512_shuffle_ps(t[q], t[q + 2], 0xEE);
    u[q + 2] = _mm512_shuffle_ps(t[q + 1], t[q + 3], 0x44);
    u[q + 3] = _mm512_shuffle_ps(t[q + 1], t[q + 3], 0xEE);
  }
  for (int j = 0; j < 4; ++j) {
    // Lanes (0, 2) and (1, 3) of rows 0-7, then of rows 8-15.
    const __m512 x0 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x88), y0 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xDD);
    const __m512 x1 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x88);
    const __m512 y1 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xDD);
    col[j] = _mm512_shuffle_f32x4(x0, x1, 0x88);
    col[4 + j] = _mm512_shuffle_f32x4(y0, y1, 0x88);
    col[8 + j] = _mm512_shuffle_f32x4(x0, x1, 0xDD);
    col[12 + j] = _mm512_shuffle_f32x4(y0, y1, 0xDD);
  }
}

// A tile's column: 64 bytes (a whole run of rows), non-temporally where asked and it starts a line.
inline bool stream_to(const void* o, bool nt) { return nt && reinterpret_cast<uintptr_t>(o) % 64 == 0; }

// f32: 16 rows of nc columns (at most 16) in, nc columns of 16 rows out.
DECONVJIT_AVX512 void tile16(const float* in, int64_t is, float* out, int64_t os, int nc, bool nt) {
  const __mmask16 cols = static_cast<__mmask16>((1u << nc) - 1);
  __m512 r[16], col[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_maskz_loadu_ps(cols, in + i * is);
  transpose16(r, col);
  for (int c = 0; c < nc; ++c) {
    float* o = out + c * os;
    if (stream_to(o, nt))
      _mm512_stream_ps(o, col[c]);
    else
      _mm512_storeu_ps(o, col[c]);
  }
}

// 16-bit elements: 32 rows of nc columns. Rows 2p and 2p + 1 join into one vector of 32-bit pairs (element
// c holds both rows' column c), so the 32-bit transpose moves pairs of rows: a column comes out as 32
// rows, 64 bytes.
DECONVJIT_AVX512 void tile32x16(const uint16_t* in, int64_t is, uint16_t* out, int64_t os, int nc, bool nt) {
  const __mmask16 cols = static_cast<__mmask16>((1u << nc) - 1);
  __m512 r[16], col[16];
  for (int p = 0; p < 16; ++p) {
    const __m512i lo = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(cols, in + 2 * p * is));
    const __m512i hi = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(cols, in + (2 * p + 1) * is));
    r[p] = _mm512_castsi512_ps(_mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
  }
  transpose16(r, col);
  for (int c = 0; c < nc; ++c) {
    __m512i* o = reinterpret_cast<__m512i*>(out + c * os);
    if (stream_to(o, nt))
      _mm512_stream_si512(o, _mm512_castps_si512(col[c]));
    else
      _mm512_storeu_si512(o, _mm512_castps_si512(col[c]));
  }
}

// Tiles in the order of transpose_block's (lines finished on the side with the larger stride first), over
// the rows that fill whole tiles; the rows left over (fewer than a tile) go to transpose_block's 8x8 tiles,
// where a tile of mostly masked rows would cost as much as a whole one (16-bit rows of 4 pixels: dcgan_g1
// bf16 NCX 0.075 -> 0.091 ms).
template <typename T, typename Tile>
void tiles(const T* in, int64_t is, T* out, int64_t os, int64_t rows, int64_t cols, int tile_rows, Tile tile) {
  const int64_t whole = rows / tile_rows * tile_rows;
  auto one = [&](int64_t r, int64_t c) {
    tile(in + r * is + c, is, out + c * os + r, os, static_cast<int>(std::min<int64_t>(16, cols - c)));
  };
  if (os > is) {
    for (int64_t c = 0; c < cols; c += 16)
      for (int64_t r = 0; r < whole; r += tile_rows) one(r, c);
  } else {
    for (int64_t r = 0; r < whole; r += tile_rows)
      for (int64_t c = 0; c < cols; c += 16) one(r, c);
  }
  if (rows > whole) transpose_block(in + whole * is, is, out + whole, os, rows - whole, cols);
}

}  // namespace

void transpose_block_avx512(const float* in, int64_t is, float* out, int64_t os, int64_t rows, int64_t cols,
                            bool nt) {
  tiles(in, is, out, os, rows, cols, 16,
        [nt](const float* i, int64_t si, float* o, int64_t so, int nc) { tile16(i, si, o, so, nc, nt); });
}

void transpose_block_avx512(const uint16_t* in, int64_t is, uint16_t* out, int64_t os, int64_t rows, int64_t cols,
                            bool nt) {
  tiles(in, is, out, os, rows, cols, 32,
        [nt](const uint16_t* i, int64_t si, uint16_t* o, int64_t so, int nc) { tile32x16(i, si, o, so, nc, nt); });
}

}  // namespace deconvjit::detail
