// f32 transposes in 16x16 tiles of AVX-512 registers, for plans on AVX-512. Against the 8x8 AVX tiles a
// tile moves four times the data per call, its stores are whole cache lines, and ragged edges are the
// same tile under opmasks (nothing outside the block is read or written).
#include <immintrin.h>

#include <algorithm>

#include "runtime/transpose.hpp"

namespace deconvjit::detail {
namespace {

// Rows 0..nr-1 of nc columns in, columns 0..nc-1 of nr rows out. Pairs of rows interleave within each
// 128-bit lane, then quadruples; two rounds of 128-bit lane shuffles put lane L of column group j in
// place. With `nt` a whole column that starts a cache line leaves by a non-temporal store.
__attribute__((target("avx512f"))) void tile16(const float* in, int64_t is, float* out, int64_t os, int nr, int nc,
                                               bool nt) {
  const __mmask16 cols = static_cast<__mmask16>((1u << nc) - 1), rows = static_cast<__mmask16>((1u << nr) - 1);
  __m512 r[16], t[16], u[16];
  for (int i = 0; i < 16; ++i) r[i] = i < nr ? _mm512_maskz_loadu_ps(cols, in + i * is) : _mm512_setzero_ps();
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
  const bool whole = nr == 16;
  for (int j = 0; j < 4; ++j) {
    // Lanes (0, 2) and (1, 3) of rows 0-7, then of rows 8-15.
    const __m512 x0 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x88), y0 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xDD);
    const __m512 x1 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x88);
    const __m512 y1 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xDD);
    const __m512 col[4] = {_mm512_shuffle_f32x4(x0, x1, 0x88), _mm512_shuffle_f32x4(y0, y1, 0x88),
                           _mm512_shuffle_f32x4(x0, x1, 0xDD), _mm512_shuffle_f32x4(y0, y1, 0xDD)};
    for (int lane = 0; lane < 4; ++lane) {
      const int c = 4 * lane + j;
      if (c >= nc) continue;
      float* o = out + c * os;
      if (whole && nt && reinterpret_cast<uintptr_t>(o) % 64 == 0)
        _mm512_stream_ps(o, col[lane]);
      else if (whole)
        _mm512_storeu_ps(o, col[lane]);
      else
        _mm512_mask_storeu_ps(o, rows, col[lane]);
    }
  }
}

}  // namespace

// Tiles in the order of transpose_block's (lines finished on the side with the larger stride first).
void transpose_block_avx512(const float* in, int64_t is, float* out, int64_t os, int64_t rows, int64_t cols,
                            bool nt) {
  auto tile = [&](int64_t r, int64_t c) {
    tile16(in + r * is + c, is, out + c * os + r, os, static_cast<int>(std::min<int64_t>(16, rows - r)),
           static_cast<int>(std::min<int64_t>(16, cols - c)), nt);
  };
  if (os > is) {
    for (int64_t c = 0; c < cols; c += 16)
      for (int64_t r = 0; r < rows; r += 16) tile(r, c);
  } else {
    for (int64_t r = 0; r < rows; r += 16)
      for (int64_t c = 0; c < cols; c += 16) tile(r, c);
  }
}

}  // namespace deconvjit::detail
