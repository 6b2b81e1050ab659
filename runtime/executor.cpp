// Execution: oneTBB loops over (group, channel block, image, output row, row part) calling generated code.
// Each output element is written by exactly one call with a fixed reduction order, so results are
// bitwise identical whatever the thread count.
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <xmmintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "runtime/compiled_kernel.hpp"
#include "runtime/executor_blocks.hpp"
#include "runtime/memory.hpp"
#include "runtime/scratch_pool.hpp"
#include "runtime/transpose.hpp"

namespace deconvjit::detail {
namespace {

struct RowGeometry {
  int64_t block_floats_main, group_floats, images;
  int64_t ob_calls;  // calls along the channel blocks: each walks Plan::oc_loop blocks
};

RowGeometry geometry(const Plan& pl) {
  const auto& a = pl.axes;
  RowGeometry g;
  const int64_t taps = a[0].kernel * a[1].kernel * a[2].kernel;
  g.block_floats_main = taps * pl.main.wei_k_floats;
  g.group_floats = pl.packed_weights_floats() / pl.groups;
  g.images = pl.block_over_batch ? 1 : pl.batch;
  // (a row buffer of whole pixels: one task runs every block of its part, run_task_at)
  g.ob_calls = pl.block_tasks();
  return g;
}

struct Task {
  int64_t g, ob, n, oz, oy, part;
};

// Task index -> (group, channel block, image, z, y, row part): the group and the channel block outermost,
// or one of them innermost (Plan::group_inner, Plan::oc_inner).
Task decompose(const Plan& pl, const RowGeometry& geo, int64_t parts, int64_t t) {
  Task k;
  if (pl.group_inner) {
    k.g = t % pl.groups;
    t /= pl.groups;
  }
  if (pl.oc_inner) {
    k.ob = t % geo.ob_calls * pl.oc_loop;
    t /= geo.ob_calls;
  }
  k.part = t % parts;
  t /= parts;
  k.oy = t % pl.axes[1].out;
  t /= pl.axes[1].out;
  k.oz = t % pl.axes[0].out;
  t /= pl.axes[0].out;
  k.n = t % geo.images;
  t /= geo.images;
  if (!pl.oc_inner) {
    k.ob = t % geo.ob_calls * pl.oc_loop;
    t /= geo.ob_calls;
  }
  if (!pl.group_inner) k.g = t;
  return k;
}

// Row buffer [image][x - x0][channel] -> NCX rows: each channel's run of x is written contiguously. With
// whole pixels (gemm) a folded pixel is fold_stride output pixels of every channel.
template <typename T>
void flush_row_buffer(const Plan& pl, const Problem& p, const Task& t, const RowPart& part, const T* buf,
                      T* dst) {
  const auto& a = pl.axes;
  const int64_t s = pl.fold_stride, out_x = pl.row_outputs(), out_sp = a[0].out * a[1].out * out_x;
  const bool whole = pl.row_buffer_whole_pixels();
  const int64_t group = pl.oc_per_group / s;  // the group's output channels
  const int64_t oc0 = whole ? t.g * group : t.g * pl.oc_per_group + t.ob * pl.main.vectors * pl.lanes;
  const int64_t pixel = pl.dst_x / s;  // buffer elements per output pixel
  const int64_t channels = whole ? group : std::min<int64_t>(pl.dst_x, (t.g + 1) * pl.oc_per_group - oc0);
  const int64_t row = (t.oz * a[1].out + t.oy) * out_x + part.x0 * s;
  const int64_t width = std::min(part.x1 * s, out_x) - part.x0 * s;
  const int64_t n_begin = pl.block_over_batch ? 0 : t.n;
  const int64_t n_end = pl.block_over_batch ? pl.batch : t.n + 1;
  for (int64_t n = n_begin; n < n_end; ++n) {
    const T* from = buf + (n - n_begin) * pl.dst_n;
    T* to = dst + (n * p.c_out + oc0) * out_sp + row;
    if (flush_in_tiles(pl))
      transpose_block_avx512(from, pixel, to, out_sp, width, channels, pl.nt_stores);
    else if (pl.nt_stores)
      transpose_block_nt(from, pixel, to, out_sp, width, channels);
    else
      transpose_block(from, pixel, to, out_sp, width, channels);
  }
}

// One channel block's calls over a task's row part, into `dst_row` (the row's start in dst or in the row
// buffer, at the block's channels).
// T: the data type's storage (float, or uint16_t for bf16 and f16); the kernels convert. S: the source
// the kernel reads (T, or float when the plan widens it first).
// `shift`: the element offset in the whole source copy at which `src` starts (a band's first row).
template <typename S, typename T>
void run_block(const CompiledKernel& k, const RowGeometry& geo, const Task& t, int64_t pass, const S* src,
               int64_t shift, const float* packed, T* dst_row) {
  const Plan& pl = k.plan;
  const auto& a = pl.axes;
  const RowPart& part = k.schedule.parts[t.part];
  const int kind = t.ob == pl.oc_blocks - 1 ? 1 : 0;
  const BlockKind& bk = kind ? pl.last : pl.main;
  const AxisTaps& tz = k.schedule.z[t.oz];
  const AxisTaps& ty = k.schedule.y[t.oy];
  const int64_t per_k = bk.wei_k_floats;
  const int64_t oc0 = t.g * pl.oc_per_group + t.ob * pl.main.vectors * pl.lanes;
  // Depthwise kernels read the same channels they write.
  const int64_t ic0 = pl.algorithm == Algorithm::depthwise ? oc0 : t.g * pl.ic_per_group;
  const int64_t ic_pass = pass * pl.ic_block;
  const S* src_row = src + (t.n * pl.src_n + (ic0 + ic_pass) * pl.src_c +
                             (tz.i0 * a[1].in + ty.i0) * a[2].in * pl.src_x - shift);
  const float* wei_row = packed + t.g * geo.group_floats + t.ob * geo.block_floats_main +
                         ic_pass * bk.wei_ic_step +
                         (tz.k0 * a[1].kernel + ty.k0) * a[2].kernel * per_k;
  jit::KernelArgs args;
  args.nz = tz.count;
  args.ny = ty.count;
  args.accumulate = pass > 0;
  for (const Segment& s : part.segments) {
    args.src = src_row + s.n_first * pl.src_n + s.ix0 * pl.src_x;
    args.wei = wei_row + s.kx0 * per_k;
    args.dst = dst_row + s.n_first * pl.dst_n + s.o_first * pl.dst_x;
    args.nx = s.ntaps;
    args.nblocks = s.nblocks;
    const jit::KernelFn fn = k.fns[kind][s.edge >= 0 ? pl.ur_w + s.edge : s.width - 1];
    if (s.clipped)
      run_clipped<T>(pl, s, oc0 - t.g * pl.oc_per_group, bk, fn, args);
    else
      fn(&args);
  }
}

// A task: its block (or, into a row buffer of whole pixels, every block) over its row part, then the row
// buffer's flush.
template <typename S, typename T>
void run_task_at(const CompiledKernel& k, const RowGeometry& geo, const Task& t, int64_t pass, const S* src,
                 int64_t shift, const float* packed, T* dst) {
  const Plan& pl = k.plan;
  const int64_t block = int64_t{pl.main.vectors} * pl.lanes;
  if (!row_buffered(pl.layout)) {
    const int64_t oc0 = t.g * pl.oc_per_group + t.ob * block;
    const int64_t row = t.oz * pl.axes[1].out + t.oy;
    return run_block(k, geo, t, pass, src, shift, packed,
                     dst + t.n * pl.dst_n + oc0 * pl.dst_c + row * pl.dst_row_elements() + pl.dst_row_offset());
  }
  const RowPart& part = k.schedule.parts[t.part];
  T* buf = row_scratch<T>(static_cast<size_t>(pl.row_buffer_floats));
  T* row = buf - part.x0 * pl.dst_x;
  if (pl.row_buffer_whole_pixels()) {
    for (Task b = t; b.ob < pl.oc_blocks; ++b.ob) run_block(k, geo, b, pass, src, shift, packed, row + b.ob * block);
  } else {
    run_block(k, geo, t, pass, src, shift, packed, row);
  }
  flush_row_buffer(pl, k.problem, t, part, buf, dst);
}

template <typename S, typename T>
void run_task(const CompiledKernel& k, const RowGeometry& geo, int64_t index, int64_t pass, const S* src,
              const float* packed, T* dst) {
  const Task t = decompose(k.plan, geo, static_cast<int64_t>(k.schedule.parts.size()), index);
  run_task_at(k, geo, t, pass, src, 0, packed, dst);
}

// Calls f(0 .. n-1), on the pool or (small problems) on the calling thread. With `fence` (kernels with
// Plan::nt_stores, whose stores are weakly ordered), each thread fences its non-temporal stores once per
// range before reporting it done: once per range, not per call, as a fence waits for them to drain.
template <typename F>
void for_rows(int64_t n, bool parallel, const F& f, bool fence = false) {
  if (!parallel) {
    for (int64_t i = 0; i < n; ++i) f(i);
    if (fence) _mm_sfence();
    return;
  }
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, n), [&](const tbb::blocked_range<int64_t>& r) {
    for (int64_t i = r.begin(); i != r.end(); ++i) f(i);
    if (fence) _mm_sfence();
  });
}

// depthwise_x: a task is one output row of one chunk of channels, in NCX as the user gave it. The
// register blocks of Plan::oc_vectors channels run in function 0, a remainder in function 1 (one each).
// dot_x: one chunk of all output channels, one block; the kernel walks the input channels (its weights
// start at the same tap offset in every channel pair's block).
template <typename T>
void run_depthwise_x(const CompiledKernel& k, const T* src, const float* packed, T* dst) {
  const Plan& pl = k.plan;
  const auto& a = pl.axes;
  const int64_t rows = a[0].out * a[1].out, cb = pl.oc_vectors;
  const int64_t per_channel = a[0].kernel * a[1].kernel * pl.main.wei_k_floats;
  auto task = [&](int64_t t) {
    const int64_t row = t % rows, chunk = t / rows % pl.oc_blocks, n = t / rows / pl.oc_blocks;
    const AxisTaps& tz = k.schedule.z[row / a[1].out];
    const AxisTaps& ty = k.schedule.y[row % a[1].out];
    const int64_t c0 = chunk * pl.channels_per_call;
    const int64_t channels = std::min(pl.channels_per_call, pl.dst_channels - c0);
    jit::KernelArgs args{};
    args.src = src + n * pl.src_n + c0 * pl.src_c + (tz.i0 * a[1].in + ty.i0) * a[2].in;
    args.wei = packed + c0 * per_channel + (tz.k0 * a[1].kernel + ty.k0) * pl.main.wei_k_floats;
    args.dst = dst + n * pl.dst_n + c0 * pl.dst_c + row * a[2].out;
    args.nz = tz.count;
    args.ny = ty.count;
    args.nblocks = channels / cb;
    if (args.nblocks) k.fns[0][0](&args);
    if (channels % cb == 0) return;
    const int64_t done = channels / cb * cb;
    args.src = static_cast<const T*>(args.src) + done * pl.src_c;
    args.wei += done * per_channel;
    args.dst = static_cast<T*>(args.dst) + done * pl.dst_c;
    args.nblocks = channels % cb;
    k.fns[1][0](&args);
  };
  for_rows(pl.batch * pl.oc_blocks * rows, pl.parallel, task, pl.nt_stores);
}

// A task runs every pass of the reduction (Plan::ic_blocks, usually one) over its row part in turn: the
// part's outputs stay in L1 or L2 between passes, and each pass's slice of the weights stays in L1 across
// the part's blocks. Each output sees the passes in the same order whatever the threads.
template <typename S, typename T>
void run_rows(const CompiledKernel& k, const S* src, const float* packed, T* dst) {
  const Plan& pl = k.plan;
  const RowGeometry geo = geometry(pl);
  const int64_t tasks = pl.groups * geo.ob_calls * geo.images * pl.axes[0].out * pl.axes[1].out *
                        static_cast<int64_t>(k.schedule.parts.size());
  auto task = [&](int64_t t) {
    for (int64_t pass = 0; pass < pl.ic_blocks; ++pass) run_task(k, geo, t, pass, src, packed, dst);
  };
  for_rows(tasks, pl.parallel, task, pl.nt_stores);
}

// gemm_x: a task is one tile (Plan::row_chunk row groups x Plan::oc_chunk channel blocks) of one plane of
// one channel group (gr) of one image, channel blocks innermost; a row group is Plan::rows_per_block input
// rows.
template <typename T>
void run_gemm_x(const CompiledKernel& k, const T* src, const float* packed, T* dst) {
  const Plan& pl = k.plan;
  const auto& a = pl.axes;
  const int64_t groups = (a[1].in + pl.rows_per_block - 1) / pl.rows_per_block, planes = a[0].in;
  const int64_t row_tiles = (groups + pl.row_chunk - 1) / pl.row_chunk;
  const int64_t oc_tiles = (pl.oc_blocks + pl.oc_chunk - 1) / pl.oc_chunk, chunks = x_chunks(pl);
  const int64_t block_floats = ic_steps(pl) * pl.main.wei_k_floats;
  const int64_t in_sp = a[0].in * a[1].in * a[2].in;
  const int64_t group_floats = static_cast<int64_t>(pl.packed_weights_floats()) / pl.groups;
  // The row group's source in the caller's planes, or (Plan::pack_src) copied into the task's tile.
  auto group_source = [&](int64_t n, int64_t gr, int64_t iz, int64_t g) {
    const int64_t iy = g * pl.rows_per_block;
    const T* s = src + n * pl.src_n + gr * pl.ic_per_group * in_sp + (iz * a[1].in + iy) * a[2].in;
    if (!pl.pack_src) return s;
    T* tile = row_scratch<T>(static_cast<size_t>(pl.src_c * pl.ic_per_group));
    const size_t bytes = sizeof(T) * static_cast<size_t>(std::min<int64_t>(pl.rows_per_block, a[1].in - iy) * a[2].in);
    for (int64_t c = 0; c < pl.ic_per_group; ++c) std::memcpy(tile + c * pl.src_c, s + c * in_sp, bytes);
    return static_cast<const T*>(tile);
  };
  // Chunk c of a row starts c x_chunk input pixels in; function 1 is the row's last chunk, or without
  // chunks the plane's last, shorter row group.
  auto call = [&](const T* group_src, int64_t n, int64_t gr, int64_t iz, int64_t g, int64_t ob, int64_t c) {
    const int64_t iy = g * pl.rows_per_block, x0 = c * pl.x_chunk;
    jit::KernelArgs args{};
    args.src = group_src + x0;
    args.wei = packed + gr * group_floats + ob * block_floats;
    args.dst = dst + n * pl.dst_n + (gr * pl.oc_per_group + ob * pl.main.vectors) * pl.dst_c +
               (a[0].stride * iz * a[1].out + a[1].stride * iy) * a[2].out + a[2].stride * x0;
    args.nblocks = 1;
    const bool last = pl.x_chunk ? c == chunks - 1 : iy + pl.rows_per_block > a[1].in;
    k.fns[ob == pl.oc_blocks - 1 ? 1 : 0][last ? 1 : 0](&args);
  };
  auto task = [&](int64_t t) {
    const int64_t c = t % chunks;
    t /= chunks;
    const int64_t rt = t % row_tiles, iz = t / row_tiles % planes;
    const int64_t ot = t / row_tiles / planes % oc_tiles, ng = t / row_tiles / planes / oc_tiles;
    const int64_t n = ng / pl.groups, gr = ng % pl.groups;
    const int64_t g_end = std::min(groups, (rt + 1) * pl.row_chunk);
    const int64_t ob_end = std::min(pl.oc_blocks, (ot + 1) * pl.oc_chunk);
    for (int64_t g = rt * pl.row_chunk; g < g_end; ++g) {
      const T* group_src = group_source(n, gr, iz, g);
      for (int64_t ob = ot * pl.oc_chunk; ob < ob_end; ++ob) call(group_src, n, gr, iz, g, ob, c);
    }
  };
  for_rows(pl.batch * pl.groups * oc_tiles * planes * row_tiles * chunks, pl.parallel, task);
}

// col_x: a task is one part of one output row of one image (with batch_block, of ur_w images) in one
// channel group, for every channel block of the group (their source is the same tile of input rows, read
// again from cache).
template <typename T>
void run_col_x(const CompiledKernel& k, const T* src, const float* packed, T* dst) {
  const Plan& pl = k.plan;
  const auto& a = pl.axes;
  const int64_t rows = a[0].out * a[1].out, parts = pl.x_split, full = pl.has_tail() ? pl.oc_blocks - 1 : pl.oc_blocks;
  const int64_t images = pl.block_over_batch ? pl.ur_w : 1;  // per call (the same row of each)
  const int64_t block_floats = ic_steps(pl) * pl.main.wei_ic_step;
  const int64_t group_floats = pl.packed_weights_floats() / pl.groups;
  auto task = [&](int64_t t) {
    const int64_t part = t % parts, row = t / parts % rows, gr = t / parts / rows % pl.groups;
    const int64_t n = t / parts / rows / pl.groups * images;
    const AxisTaps& tz = k.schedule.z[row / a[1].out];
    const AxisTaps& ty = k.schedule.y[row % a[1].out];
    jit::KernelArgs args{};
    args.src = src + n * pl.src_n + gr * pl.ic_per_group * pl.src_c + (tz.i0 * a[1].in + ty.i0) * a[2].in;
    args.dst = dst + n * pl.dst_n + gr * pl.oc_per_group * pl.dst_c + row * a[2].out;
    args.nz = tz.count;
    args.ny = ty.count;
    const int64_t tap = tz.k0 * a[1].kernel + ty.k0;
    const float* packed_group = packed + gr * group_floats;
    if (full > 0) {
      args.wei = packed_group + tap * pl.main.wei_k_floats;
      args.nblocks = full;
      k.fns[0][part](&args);
    }
    if (full == pl.oc_blocks) return;
    args.wei = packed_group + full * block_floats + tap * pl.last.wei_k_floats;
    args.dst = static_cast<T*>(args.dst) + full * pl.main.vectors * pl.dst_c;
    args.nblocks = 1;
    k.fns[1][part](&args);
  };
  for_rows(pl.batch / images * pl.groups * rows * parts, pl.parallel, task);
}

// Where source pixel `col` of an image lands when rows of x pixels get `left` and `right` zero columns.
struct HaloMap {
  int64_t x = 1, left = 0, right = 0;
  int64_t operator()(int64_t col) const { return col / x * (x + left + right) + left + col % x; }
  int64_t padded(int64_t cols) const { return cols / x * (x + left + right); }
};

// [rows][cols] -> [cols'][rows] for each of `images`, column c placed at cols' index map(c). A task
// owns a chunk of rows and a piece of a run of columns that share one halo row, about 64 KiB of input.
// Output lines run along rows: with few rows and long runs (a 1-D NCX source of 64 channels and 32000
// pixels) a task takes all rows and a piece of the run, so no two tasks write parts of one line
// (dprnn_decoder on 2 threads: a copy of 8 rows per task left the dot family's NCX path 12x slower than NXC).
template <typename T, typename S = T>
void transpose(const T* in, S* out, int64_t images, int64_t rows, int64_t cols, bool parallel,
               const HaloMap& halo, DType type = DType::f32) {
  // Without a halo the runs of a plane join into one (whole 8x8 tiles instead of a ragged one per row of
  // 14 pixels: the copy of infogan_mnist_up2_b64's source took longer than its kernel).
  const HaloMap map = halo.left + halo.right == 0 ? HaloMap{cols, 0, 0} : halo;
  constexpr int64_t kTaskElements = 16384;
  const bool whole_lines = map.x >= 64 && rows <= kTaskElements / 8;
  const int64_t chunk = whole_lines ? rows : std::max<int64_t>(8, kTaskElements / std::max<int64_t>(map.x, 1) / 8 * 8);
  const int64_t piece = whole_lines ? std::clamp<int64_t>(kTaskElements / rows / 8 * 8, 8, map.x) : map.x;
  const int64_t chunks = (rows + chunk - 1) / chunk, runs = cols / map.x, pieces = (map.x + piece - 1) / piece;
  const int64_t out_image = rows * map.padded(cols);
  auto body = [&](int64_t t) {
    const int64_t n = t / (chunks * runs * pieces), r0 = t / (runs * pieces) % chunks * chunk;
    const int64_t run = t / pieces % runs, c0 = run * map.x + t % pieces * piece;
    const int64_t nr = std::min(rows - r0, chunk), nc = std::min(run * map.x + map.x - c0, piece);
    const T* from = in + n * rows * cols + r0 * cols + c0;
    S* to = out + n * out_image + map(c0) * rows + r0;
    move_block(from, cols, to, rows, nr, nc, type);
  };
  const int64_t tasks = images * chunks * runs * pieces;
  if (!parallel) {
    for (int64_t t = 0; t < tasks; ++t) body(t);
    return;
  }
  tbb::parallel_for(int64_t{0}, tasks, body);
}

// The zero columns of one NXC source row of `x` pixels of `c` channels padded to `padded` pixels, `left`
// of them before the row: all-zero bits, +0 in every type.
template <typename S>
void zero_halo(S* row, int64_t c, int64_t left, int64_t x, int64_t padded) {
  std::fill(row, row + left * c, S{0});
  std::fill(row + (left + x) * c, row + padded * c, S{0});
}

// The source the kernels read: NXC, rows of x widened by the plan's zero halo, in `out`.
size_t prepared_src_floats(const CompiledKernel& k) {
  const Problem& p = k.problem;
  const HaloMap map{p.in.back(), k.plan.halo_left, k.plan.halo_right};
  return static_cast<size_t>(p.src_elements() / p.in.back() * map.padded(p.in.back()));
}

// S: T, or float for Plan::widen_src (each element widened exactly as it is copied).
template <typename T, typename S>
void prepare_src(const CompiledKernel& k, const T* src, S* out) {
  const Problem& p = k.problem;
  const Plan& pl = k.plan;
  const int64_t c = p.c_in, x = p.in.back();
  const HaloMap map{x, pl.halo_left, pl.halo_right};
  const int64_t rows = p.src_elements() / (c * x), xp = map.padded(x);
  auto zero_row = [&](int64_t r) { zero_halo(out + r * xp * c, c, map.left, x, xp); };
  if (pl.layout != LayoutPath::nxc) {  // NCX data (on the nxc route NCX data is NXC: one channel)
    transpose(src, out, p.batch, c, p.src_elements() / (p.batch * c), pl.parallel, map, p.dtype);
    if (pl.has_halo()) for_rows(rows, pl.parallel, zero_row);
    return;
  }
  // Rows in pieces, so that one long row (1-D data) is copied by every thread; the first piece of a row
  // zeroes its halo (one parallel loop, not two).
  const int64_t row = x * c, piece = std::min<int64_t>(row, 16384), pieces = ceil_div(row, piece);
  for_rows(rows * pieces, pl.parallel, [&](int64_t t) {
    const int64_t r = t / pieces, i = t % pieces * piece, n = std::min(piece, row - i);
    const T* from = src + r * row + i;
    S* to = out + (r * xp + map.left) * c + i;
    move_run(from, to, n, p.dtype);
    if (i == 0 && pl.has_halo()) zero_row(r);
  });
}

}  // namespace

// col: the inner GEMM (f32; a 16-bit source is widened exactly on the way in) writes
// [image][input pixel][tap][C_OUT]; then a task per output row lists each pixel's valid taps' rows, in a
// fixed order, and generated code sums them and stores the row (jit/col_sum.cpp). NCX output goes
// through an NXC copy.
template <typename T>
void run_col(const CompiledKernel& k, const T* src, const float* packed, T* dst) {
  const Problem& p = k.problem;
  const Plan& pl = k.plan;
  const auto& a = pl.axes;
  const int64_t pixels = a[0].in * a[1].in * a[2].in, taps = a[0].kernel * a[1].kernel * a[2].kernel;
  const int64_t co_n = p.c_out, out_sp = a[0].out * a[1].out * a[2].out;
  const bool ncx = p.data_format == DataFormat::NCX;
  ScratchPool& pool = ScratchPool::instance();
  std::optional<ScratchPool::Lease> src_f32, dst_nxc;
  const float* from = nullptr;
  if constexpr (std::is_same_v<T, float>) from = src;
  if (ncx || !from) {  // the row families' source copy (col plans no halo): NXC, widened to f32
    src_f32.emplace(pool.take(prepared_src_floats(k)));  // NOLINT: moved in
    prepare_src(k, src, src_f32->get());
    from = src_f32->get();
  }
  ScratchPool::Lease col = pool.take(static_cast<size_t>(size_product({p.batch, pixels, taps, co_n})));
  execute_kernel(*k.inner.impl(), from, packed, col.get());
  T* out = dst;
  if (ncx) out = dst_nxc.emplace(pool.take_for<T>(static_cast<size_t>(p.dst_elements()))).template as<T>();  // NOLINT
  for_rows(p.batch * a[0].out * a[1].out, pl.parallel, [&](int64_t r) {
    const int64_t n = r / (a[0].out * a[1].out), oz = r / a[1].out % a[0].out, oy = r % a[1].out;
    const AxisTaps &tz = k.schedule.z[oz], &ty = k.schedule.y[oy];
    thread_local std::vector<const float*> table;
    table.clear();
    for (int64_t ox = 0; ox < a[2].out; ++ox) {
      const AxisTaps& tx = k.x_taps[ox];
      for (int64_t jz = 0; jz < tz.count; ++jz)
        for (int64_t jy = 0; jy < ty.count; ++jy)
          for (int64_t jx = 0; jx < tx.count; ++jx) {
            const int64_t iz = tz.i0 - jz * a[0].tap_i_step, kz = tz.k0 + jz * a[0].tap_k_step;
            const int64_t iy = ty.i0 - jy * a[1].tap_i_step, ky = ty.k0 + jy * a[1].tap_k_step;
            const int64_t ix = tx.i0 - jx * a[2].tap_i_step, kx = tx.k0 + jx * a[2].tap_k_step;
            const int64_t pix = (iz * a[1].in + iy) * a[2].in + ix, t = (kz * a[1].kernel + ky) * a[2].kernel + kx;
            table.push_back(col.get() + ((n * pixels + pix) * taps + t) * co_n);
          }
      table.push_back(nullptr);
    }
    jit::KernelArgs args{};
    args.src = table.data();
    args.dst = out + ((n * a[0].out + oz) * a[1].out + oy) * a[2].out * co_n;
    args.nblocks = a[2].out;
    k.fns[0][0](&args);
  });
  if (ncx) transpose(out, dst, p.batch, out_sp, co_n, pl.parallel, HaloMap{co_n, 0, 0});
}

// Plan::band_rows: a task is a band of output rows of one output plane of one image. It transposes the input
// rows the band reads (every channel, with the plan's halo; in 3-D of the plane's one z tap) into a
// thread-local band laid out like those rows of the whole-source copy (NXC data: copies them, widened),
// then runs the band's row tasks on it while it is in L2: the source crosses memory once instead of three
// times (read, copy written, copy read).
template <typename S, typename T>
void run_banded(const CompiledKernel& k, const T* src, const float* packed, T* dst) {
  const Plan& pl = k.plan;
  const Problem& p = k.problem;
  const auto& a = pl.axes;
  const RowGeometry geo = geometry(pl);
  const int64_t c = p.c_in, x = p.in.back(), in_sp = a[0].in * a[1].in * x, row = a[2].in * c;  // with halo
  const int64_t bands = ceil_div(a[1].out, pl.band_rows), parts = static_cast<int64_t>(k.schedule.parts.size());
  auto body = [&](int64_t b) {
    const int64_t n = b / bands / a[0].out, oz = b / bands % a[0].out;
    const int64_t oy0 = b % bands * pl.band_rows, oy1 = std::min(a[1].out, oy0 + pl.band_rows);
    const AxisTaps& tz = k.schedule.z[oz];
    const int64_t iz = tz.count ? tz.i0 : 0;  // no z tap: the rows store zeros and read nothing
    int64_t lo = a[1].in, hi = -1;  // the input rows the band's taps read
    for (int64_t oy = oy0; oy < oy1 && tz.count; ++oy) {
      const AxisTaps& ty = k.schedule.y[oy];
      if (ty.count == 0) continue;
      lo = std::min(lo, ty.i0 - (ty.count - 1) * a[1].tap_i_step);
      hi = std::max(hi, ty.i0);
    }
    if (hi < lo) lo = hi = 0;  // no taps: one row, transposed and not read
    S* band = row_scratch<S, 1>(static_cast<size_t>((hi - lo + 1) * row));
    for (int64_t iy = lo; iy <= hi; ++iy) {
      S* r = band + (iy - lo) * row;
      zero_halo(r, c, pl.halo_left, x, a[2].in);
      if (pl.layout == LayoutPath::nxc)  // a row of pixels, widened as it is copied
        move_run(src + (n * in_sp + (iz * a[1].in + iy) * x) * c, r + pl.halo_left * c, x * c, p.dtype);
      else
        move_block(src + n * c * in_sp + (iz * a[1].in + iy) * x, in_sp, r + pl.halo_left * c, c, c, x, p.dtype);
    }
    const int64_t shift = n * pl.src_n + (iz * a[1].in + lo) * row;
    const int64_t row_parts = (oy1 - oy0) * parts;
    for (int64_t g = 0; g < pl.groups; ++g)
      for (int64_t i = 0; i < geo.ob_calls * row_parts; ++i) {  // (Plan::oc_inner: the channel block innermost)
        const int64_t ob = pl.oc_inner ? i % geo.ob_calls : i / row_parts;
        const int64_t rp = pl.oc_inner ? i / geo.ob_calls : i % row_parts;
        const Task t{g, ob * pl.oc_loop, n, oz, oy0 + rp / parts, rp % parts};
        run_task_at(k, geo, t, 0, static_cast<const S*>(band), shift, packed, dst);
      }
  };
  for_rows(pl.batch * a[0].out * bands, pl.parallel, body, pl.nt_stores);
}

// [rows][cols] -> [cols][rows] in cache, for the plane tiles: AVX-512 tiles under AVX-512 plans.
template <typename T>
void move_tile(const Plan& pl, const T* in, int64_t is, T* out, int64_t os, int64_t rows, int64_t cols) {
  if (pl.isa == Isa::avx512_core)
    transpose_block_avx512(in, is, out, os, rows, cols, false);
  else
    transpose_block(in, is, out, os, rows, cols);
}

// Plan::layout ncx_plane_tiles: a task is one tile of Plan::channels_per_call channels of one image. Its
// source planes are transposed into a thread-local NXC tile, the depthwise kernel runs every output row
// over it into a second tile (the tile's weights are the packed blocks of its channels), and that tile is
// transposed into the channels' output planes, each written as one run.
template <typename T>
void run_plane_tiles(const CompiledKernel& k, const T* src, const float* packed, T* dst) {
  const Plan& pl = k.plan;
  const Problem& p = k.problem;
  const auto& a = pl.axes;
  const RowGeometry geo = geometry(pl);
  const int64_t tc = pl.channels_per_call, tiles = p.c_out / tc;
  const int64_t in_sp = a[0].in * a[1].in * a[2].in, out_sp = a[0].out * a[1].out * a[2].out;
  const int64_t blocks = tc / (int64_t{pl.main.vectors} * pl.lanes), tile_floats = blocks * geo.block_floats_main;
  const int64_t parts = static_cast<int64_t>(k.schedule.parts.size());
  auto body = [&](int64_t t) {
    const int64_t n = t / tiles, c0 = t % tiles * tc;
    T* in_tile = row_scratch<T, 1>(static_cast<size_t>(in_sp * tc));
    T* out_tile = row_scratch<T>(static_cast<size_t>(out_sp * tc));
    move_tile(pl, src + (n * p.c_in + c0) * in_sp, in_sp, in_tile, tc, tc, in_sp);
    for (int64_t ob = 0; ob < blocks; ob += pl.oc_loop)  // (a call walks oc_loop blocks of the tile)
      for (int64_t oz = 0; oz < a[0].out; ++oz)
        for (int64_t oy = 0; oy < a[1].out; ++oy)
          for (int64_t part = 0; part < parts; ++part)
            run_task_at(k, geo, Task{0, ob, 0, oz, oy, part}, 0, in_tile, 0, packed + c0 / tc * tile_floats, out_tile);
    move_tile(pl, out_tile, tc, dst + (n * p.c_out + c0) * out_sp, out_sp, out_sp, tc);
  };
  for_rows(pl.batch * tiles, pl.parallel, body);
}

// The row families, reading S: the source as given (S = T) or a copy (S = T, or float when the plan widens
// it).
template <typename S, typename T>
void execute_rows(const CompiledKernel& k, const T* src, const float* packed, T* dst) {
  if (k.plan.band_rows) return run_banded<S>(k, src, packed, dst);
  if constexpr (std::is_same_v<S, T>)
    if (k.plan.layout == LayoutPath::ncx_plane_tiles) return run_plane_tiles(k, src, packed, dst);
  const Problem& p = k.problem;
  ScratchPool& pool = ScratchPool::instance();
  std::optional<ScratchPool::Lease> src_copy;
  const S* from = nullptr;
  if (k.plan.copies_src()) {
    src_copy.emplace(pool.take_for<S>(prepared_src_floats(k)));  // NOLINT: moved in
    prepare_src(k, src, src_copy->as<S>());
    from = src_copy->as<S>();
  } else if constexpr (std::is_same_v<S, T>) {
    from = src;
  }
  if (k.plan.layout != LayoutPath::ncx_via_scratch) return run_rows(k, from, packed, dst);
  const int64_t out_sp = p.dst_elements() / (p.batch * p.c_out);
  ScratchPool::Lease dst_nxc = pool.take_for<T>(static_cast<size_t>(p.dst_elements()));
  run_rows(k, from, packed, dst_nxc.as<T>());
  transpose(dst_nxc.as<T>(), dst, p.batch, out_sp, p.c_out, k.plan.parallel, HaloMap{p.c_out, 0, 0});
}

template <typename T>
void execute_typed(const CompiledKernel& k, const T* src, const float* packed, T* dst) {
  if (x_vector_family(k.plan.algorithm)) return run_depthwise_x(k, src, packed, dst);
  if (k.plan.algorithm == Algorithm::gemm_x) return run_gemm_x(k, src, packed, dst);
  if (k.plan.algorithm == Algorithm::col_x) return run_col_x(k, src, packed, dst);
  if constexpr (!std::is_same_v<T, float>)
    if (k.plan.widen_src) return execute_rows<float>(k, src, packed, dst);
  execute_rows<T>(k, src, packed, dst);
}

void execute_kernel(const CompiledKernel& k, const void* src, const float* packed, void* dst) {
  if (k.plan.algorithm == Algorithm::col && k.plan.dtype == DType::f32)
    return run_col(k, static_cast<const float*>(src), packed, static_cast<float*>(dst));
  if (k.plan.algorithm == Algorithm::col)
    return run_col(k, static_cast<const uint16_t*>(src), packed, static_cast<uint16_t*>(dst));
  if (k.plan.dtype == DType::f32)
    return execute_typed(k, static_cast<const float*>(src), packed, static_cast<float*>(dst));
  execute_typed(k, static_cast<const uint16_t*>(src), packed, static_cast<uint16_t*>(dst));
}

}  // namespace deconvjit::detail
