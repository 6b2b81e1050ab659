// Execution: oneTBB loops over (group, channel block, image, output row, row part) calling generated code.
// Each output element is written by exactly one call with a fixed reduction order, so results are
// bitwise identical whatever the thread count.
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <cstring>
#include <memory>

#include "runtime/compiled_kernel.hpp"

namespace deconvjit::detail {
namespace {

struct RowGeometry {
  int64_t src_image, dst_image, block_floats_main, group_floats;
};

RowGeometry geometry(const Plan& pl) {
  const auto& a = pl.axes;
  RowGeometry g;
  g.src_image = a[0].in * a[1].in * a[2].in * pl.src_channels;
  g.dst_image = a[0].out * a[1].out * a[2].out * pl.dst_channels;
  const int64_t taps = a[0].kernel * a[1].kernel * a[2].kernel;
  g.block_floats_main = taps * pl.ic_per_group * pl.main.vectors * pl.lanes;
  g.group_floats = pl.packed_weights_floats() / pl.groups;
  return g;
}

void run_task(const CompiledKernel& k, const RowGeometry& geo, int64_t t, const float* src,
              const float* packed, float* dst) {
  const Plan& pl = k.plan;
  const auto& a = pl.axes;
  const int64_t part = t % pl.x_split;
  t /= pl.x_split;
  const int64_t oy = t % a[1].out;
  t /= a[1].out;
  const int64_t oz = t % a[0].out;
  t /= a[0].out;
  const int64_t n = t % pl.batch;
  t /= pl.batch;
  const int64_t ob = t % pl.oc_blocks;
  const int64_t g = t / pl.oc_blocks;

  const int kind = ob == pl.oc_blocks - 1 ? 1 : 0;
  const BlockKind& bk = kind ? pl.last : pl.main;
  const AxisTaps& tz = k.schedule.z[oz];
  const AxisTaps& ty = k.schedule.y[oy];
  const int64_t per_k = pl.ic_per_group * bk.vectors * pl.lanes;
  const float* src_row = src + n * geo.src_image + g * pl.ic_per_group +
                         (tz.i0 * a[1].in + ty.i0) * a[2].in * pl.src_channels;
  const float* wei_row = packed + g * geo.group_floats + ob * geo.block_floats_main +
                         (tz.k0 * a[1].kernel + ty.k0) * a[2].kernel * per_k;
  float* dst_row = dst + n * geo.dst_image + (oz * a[1].out + oy) * a[2].out * pl.dst_channels +
                   g * pl.oc_per_group + ob * pl.main.vectors * pl.lanes;
  jit::KernelArgs args;
  args.nz = tz.count;
  args.ny = ty.count;
  for (const Segment& s : k.schedule.parts[part]) {
    args.src = src_row + s.ix0 * pl.src_channels;
    args.wei = wei_row + s.kx0 * per_k;
    args.dst = dst_row + s.o_first * pl.dst_channels;
    args.nx = s.ntaps;
    args.nblocks = s.nblocks;
    k.fns[kind][s.width - 1](&args);
  }
}

void run_nxc(const CompiledKernel& k, const float* src, const float* packed, float* dst) {
  const Plan& pl = k.plan;
  const RowGeometry geo = geometry(pl);
  const int64_t tasks = pl.groups * pl.oc_blocks * pl.batch * pl.axes[0].out * pl.axes[1].out *
                        pl.x_split;
  if (!pl.parallel) {
    for (int64_t t = 0; t < tasks; ++t) run_task(k, geo, t, src, packed, dst);
    return;
  }
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, tasks), [&](const tbb::blocked_range<int64_t>& r) {
    for (int64_t t = r.begin(); t != r.end(); ++t) run_task(k, geo, t, src, packed, dst);
  });
}

// [rows][cols] -> [cols][rows] for each of `images`, in cache-sized tiles.
void transpose(const float* in, float* out, int64_t images, int64_t rows, int64_t cols) {
  constexpr int64_t T = 32;
  const int64_t tr = (rows + T - 1) / T, tc = (cols + T - 1) / T;
  tbb::parallel_for(int64_t{0}, images * tr * tc, [&](int64_t t) {
    const int64_t n = t / (tr * tc), r0 = (t / tc) % tr * T, c0 = t % tc * T;
    const float* src = in + n * rows * cols;
    float* dst = out + n * rows * cols;
    const int64_t r1 = std::min(rows, r0 + T), c1 = std::min(cols, c0 + T);
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = c0; c < c1; ++c) dst[c * rows + r] = src[r * cols + c];
  });
}

// Per-thread scratch that only grows; NCX runs through NXC copies of src and dst.
float* scratch(int slot, size_t floats) {
  thread_local std::unique_ptr<float[]> buf[2];
  thread_local size_t cap[2] = {0, 0};
  if (cap[slot] < floats) {
    buf[slot].reset(new float[floats]);
    cap[slot] = floats;
  }
  return buf[slot].get();
}

}  // namespace

void execute_kernel(const CompiledKernel& k, const float* src, const float* packed, float* dst) {
  const Problem& p = k.problem;
  if (p.data_format == DataFormat::NXC) return run_nxc(k, src, packed, dst);
  int64_t in_sp = 1, out_sp = 1;
  for (int i = 0; i < p.spatial_rank; ++i) in_sp *= p.in[i], out_sp *= p.out[i];
  float* src_nxc = scratch(0, static_cast<size_t>(p.src_elements()));
  float* dst_nxc = scratch(1, static_cast<size_t>(p.dst_elements()));
  transpose(src, src_nxc, p.batch, p.c_in, in_sp);
  run_nxc(k, src_nxc, packed, dst_nxc);
  transpose(dst_nxc, dst, p.batch, out_sp, p.c_out);
}

}  // namespace deconvjit::detail
