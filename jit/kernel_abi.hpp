// The one struct every generated function takes, in the first argument register (rdi).
#pragma once

#include <cstddef>
#include <cstdint>

namespace deconvjit::jit {

struct KernelArgs {
  const void* src;   // first source pixel of the block, at its first valid tap, first input channel
                     // (elements of the plan's data type)
  const float* wei;  // packed weights of this channel block, at the first valid tap (always f32)
  void* dst;         // first output pixel of the block, first channel of the block
  int64_t nz, ny, nx;  // valid taps along z, y, x (0 writes zeros)
  int64_t nblocks;     // register blocks to run back to back along the row
  int64_t accumulate;  // nonzero: start from the partial sums in dst (reduction split in passes)
};

using KernelFn = void (*)(const KernelArgs*);

// Offsets the emitter reads; kept next to the struct so the two cannot drift.
struct KernelArgsOffsets {
  static constexpr int src = offsetof(KernelArgs, src);
  static constexpr int wei = offsetof(KernelArgs, wei);
  static constexpr int dst = offsetof(KernelArgs, dst);
  static constexpr int nz = offsetof(KernelArgs, nz);
  static constexpr int ny = offsetof(KernelArgs, ny);
  static constexpr int nx = offsetof(KernelArgs, nx);
  static constexpr int nblocks = offsetof(KernelArgs, nblocks);
  static constexpr int accumulate = offsetof(KernelArgs, accumulate);
};

}  // namespace deconvjit::jit
