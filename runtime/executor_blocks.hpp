// Pieces of the row families' execution (runtime/executor.cpp): the thread-local scratch a task computes
// into, and gemm's clipped blocks, which compute into such scratch.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>

#include "jit/kernel_abi.hpp"
#include "runtime/plan.hpp"
#include "runtime/schedule.hpp"

namespace deconvjit::detail {

// A task's row buffer, source tile or source band (Slot 1, next to a row buffer), of the data type T, on
// a cache line; plane tiles: the output tile (Slot 0) and the source tile (Slot 1). Thread-local is safe
// here because a task never blocks while holding it.
template <typename T, int Slot = 0>
T* row_scratch(size_t elements) {
  constexpr size_t kLine = 64;
  thread_local std::unique_ptr<T[]> buf;
  thread_local size_t cap = 0;
  if (cap < elements) {
    buf.reset(new T[elements + kLine / sizeof(T)]);
    cap = elements;
  }
  const auto misalign = reinterpret_cast<uintptr_t>(buf.get()) % kLine;
  return buf.get() + (misalign ? (kLine - misalign) / sizeof(T) : 0);
}

// A clipped block (Segment::clipped; gemm with pixels overhanging the row): the kernel computes it into a
// scratch block laid out as dst, and only the lanes of outputs inside the row move to dst (and, for a later
// pass of the reduction, come from it first). `c0` is the block's first channel within the folded pixel.
template <typename T>
void run_clipped(const Plan& pl, const Segment& s, int64_t c0, const BlockKind& bk, jit::KernelFn fn,
                 jit::KernelArgs& args) {
  T* const to = static_cast<T*>(args.dst);
  // 16 bytes past a line: no block of it starts one, so a kernel with non-temporal stores stores plainly here
  // (its sums are read back at once).
  T* const tmp = row_scratch<T, 2>(static_cast<size_t>(s.width * pl.dst_x) + 16 / sizeof(T)) + 16 / sizeof(T);
  const int64_t per_output = pl.dst_x / pl.fold_stride, last = pl.axes[2].out - 1;
  const int64_t block_end = std::min<int64_t>(c0 + int64_t{bk.vectors} * pl.lanes, pl.oc_per_group);
  auto lanes = [&](int64_t p, int64_t& lo, int64_t& hi) {  // the block's lanes of pixel p inside the row
    const int64_t o = s.o_first + p;
    lo = std::max(c0, o == 0 ? pl.fold_shift * per_output : 0) - c0;
    hi = std::min(block_end, (o == last ? pl.fold_stride - pl.fold_tail : pl.fold_stride) * per_output) - c0;
  };
  int64_t lo = 0, hi = 0;
  if (args.accumulate)
    for (int64_t p = 0; p < s.width; ++p) {
      lanes(p, lo, hi);
      if (lo < hi) std::memcpy(tmp + p * pl.dst_x + lo, to + p * pl.dst_x + lo, (hi - lo) * sizeof(T));
    }
  args.dst = tmp;
  fn(&args);
  for (int64_t p = 0; p < s.width; ++p) {
    lanes(p, lo, hi);
    if (lo < hi) std::memcpy(to + p * pl.dst_x + lo, tmp + p * pl.dst_x + lo, (hi - lo) * sizeof(T));
  }
}

}  // namespace deconvjit::detail
