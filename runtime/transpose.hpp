// out[c * out_stride + r] = in[r * in_stride + c] for r < rows, c < cols. The layout moves of the NCX
// paths (source copies, row-buffer flushes) all reduce to this.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "deconvjit/deconvjit.hpp"

namespace deconvjit::detail {

void transpose_block(const float* in, int64_t in_stride, float* out, int64_t out_stride, int64_t rows,
                     int64_t cols);
void transpose_block(const uint16_t* in, int64_t in_stride, uint16_t* out, int64_t out_stride, int64_t rows,
                     int64_t cols);
// The moves with non-temporal stores of each column's whole lines (AVX2; where a line starts): the caller
// fences them.
void transpose_block_nt(const float* in, int64_t in_stride, float* out, int64_t out_stride, int64_t rows,
                        int64_t cols);
void transpose_block_nt(const uint16_t* in, int64_t in_stride, uint16_t* out, int64_t out_stride, int64_t rows,
                        int64_t cols);
// The same moves in AVX-512 tiles (plans on AVX-512 only; 16-bit elements need AVX-512BW). With `nt`,
// whole runs of a line (16 f32, 32 16-bit elements) that start a line leave by non-temporal stores: the
// caller fences them.
void transpose_block_avx512(const float* in, int64_t in_stride, float* out, int64_t out_stride, int64_t rows,
                            int64_t cols, bool nt);
void transpose_block_avx512(const uint16_t* in, int64_t in_stride, uint16_t* out, int64_t out_stride, int64_t rows,
                            int64_t cols, bool nt);
// The same move of bf16 or f16 elements (`type`), each widened to f32 on the way, exactly (bf16: a
// shift; f16: vcvtph2ps): the copy of a source that the kernel reads as f32 (Plan::widen_src).
void transpose_block(const uint16_t* in, int64_t in_stride, float* out, int64_t out_stride, int64_t rows,
                     int64_t cols, DType type);
// n contiguous bf16 or f16 elements widened to f32, exactly.
void widen(const uint16_t* in, float* out, int64_t n, DType type);

// The movers of a source copy of element type S from data of type T (`type`): as bits when the types
// match, widened to f32 (Plan::widen_src) when they do not.
template <typename T, typename S>
void move_block(const T* in, int64_t in_stride, S* out, int64_t out_stride, int64_t rows, int64_t cols,
                DType type) {
  if constexpr (std::is_same_v<T, S>)
    transpose_block(in, in_stride, out, out_stride, rows, cols);
  else
    transpose_block(in, in_stride, out, out_stride, rows, cols, type);
}
template <typename T, typename S>
void move_run(const T* in, S* out, int64_t n, DType type) {
  if constexpr (std::is_same_v<T, S>)
    std::memcpy(out, in, sizeof(T) * static_cast<size_t>(n));
  else
    widen(in, out, n, type);
}

}  // namespace deconvjit::detail
