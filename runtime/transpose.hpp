// out[c * out_stride + r] = in[r * in_stride + c] for r < rows, c < cols. The layout moves of the NCX
// paths (source copies, row-buffer flushes) all reduce to this.
#pragma once

#include <cstdint>

namespace deconvjit::detail {

void transpose_block(const float* in, int64_t in_stride, float* out, int64_t out_stride, int64_t rows,
                     int64_t cols);
void transpose_block(const uint16_t* in, int64_t in_stride, uint16_t* out, int64_t out_stride, int64_t rows,
                     int64_t cols);

}  // namespace deconvjit::detail
