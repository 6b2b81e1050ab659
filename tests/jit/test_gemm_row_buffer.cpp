// gemm on NCX data through the row buffer (Plan::row_buffer_whole_pixels): a folded pixel's channel blocks
// each hold some (phase, channel) pairs of its outputs, so the buffer holds whole output pixels and a task
// runs every block of its part before one flush. The plan's buffer, the refusal where folded pixels would
// overhang the row, and the kernels in every type on both ISAs against the double-precision reference, with
// NaN sentinels after dst catching a store outside it.
#include <gtest/gtest.h>

#include "deconvjit/deconvjit.hpp"
#include "runtime/plan.hpp"
#include "support/deconv_tester.hpp"
#include "support/isa_type_cases.hpp"
#include "support/no_disk_cache.hpp"
#include "support/plan_helpers.hpp"

namespace deconvjit::detail {
namespace {

using testing::DeconvTester;

TuningHints through_row_buffer() {
  TuningHints h;
  h.algorithm = "gemm";
  h.layout = "row_buffer";
  return h;
}

// 13 -> 40 channels, k = s = 2: folded pixels of 80 channels (5 vectors of 16, 10 of 8: two blocks or more),
// a buffer of every block of a part.
TEST(GemmRowBuffer, BufferHoldsWholePixels) {
  const DeconvTester t = DeconvTester().channels(13, 40).input({5, 9}).kernel({2, 2}).stride({2, 2})
                             .layout(DataFormat::NCX);
  for (Isa isa : kIsas) {
    const Plan pl = plan_for(t, isa, through_row_buffer());
    ASSERT_EQ(pl.algorithm, Algorithm::gemm) << to_string(isa);
    ASSERT_EQ(pl.layout, LayoutPath::ncx_row_buffer) << to_string(isa);
    EXPECT_TRUE(pl.row_buffer_whole_pixels());
    EXPECT_EQ(pl.dst_x, 80) << to_string(isa);
    EXPECT_GE(pl.oc_blocks, 2) << to_string(isa);
    EXPECT_EQ(pl.row_buffer_floats, pl.row_part_width() * 80) << to_string(isa);
    EXPECT_EQ(pl.block_tasks(), 1) << to_string(isa);  // one task runs every block
  }
}

// Folded pixels that overhang the row (x pads off the stride) would need a scratch block per block: refused.
TEST(GemmRowBuffer, RefusedWhereFoldedPixelsOverhang) {
  const DeconvTester t = DeconvTester().channels(8, 12).input({5, 7}).kernel({4, 4}).stride({2, 2})
                             .pads({1, 1}, {1, 1}).layout(DataFormat::NCX);
  for (Isa isa : kIsas)
    expect_rejected(resolve(t.descriptor()), isa, through_row_buffer(), "gemm on an overhanging row buffer",
                    "row buffer with x pads");
}

// The default: where gemm's folded channels fill lanes the copies would take (a stride of 32 here), rows of
// every channel up to 16K elements over 4 MB of output go through the row buffer; 24K-element rows, small
// outputs and blocks across images keep the copies.
TEST(GemmRowBuffer, DefaultForRowsOfUpTo16KElements) {
  auto layer = [](int64_t n, int64_t c, int64_t in) {
    return DeconvTester().batch(n).channels(c, c).input({in, in}).kernel({64, 64}).stride({32, 32})
        .layout(DataFormat::NCX);
  };
  for (Isa isa : kIsas) {
    EXPECT_EQ(plan_for(layer(1, 21, 16), isa).layout, LayoutPath::ncx_row_buffer) << to_string(isa);  // 11K
    TuningHints split;  // a split reduction resumes from dst: the copies
    split.ic_block = 7;
    EXPECT_EQ(plan_for(layer(1, 21, 16), isa, split).layout, LayoutPath::ncx_via_scratch) << to_string(isa);
    TuningHints inner;  // accepted: the row buffer's tasks run every block already
    inner.oc_inner = 1;
    EXPECT_EQ(plan_for(layer(1, 21, 16), isa, inner).layout, LayoutPath::ncx_row_buffer) << to_string(isa);
    EXPECT_EQ(plan_for(layer(1, 40, 16), isa).layout, LayoutPath::ncx_via_scratch) << to_string(isa);  // 22K
    EXPECT_EQ(plan_for(layer(1, 21, 2), isa).layout, LayoutPath::ncx_via_scratch) << to_string(isa);  // 0.8 MB
    const Plan images = plan_for(layer(16, 21, 3), isa);  // 22 MB of rows of 2K elements, blocked over images
    EXPECT_TRUE(images.block_over_batch) << to_string(isa);
    EXPECT_EQ(images.layout, LayoutPath::ncx_via_scratch) << to_string(isa);
  }
}

class GemmRowBufferKernels : public testing::IsaTypeCases {
 protected:
  void run(DeconvTester t, TuningHints h = through_row_buffer()) const {
    t.isa(isa()).dtype(type()).layout(DataFormat::NCX).hints(h).dst_tail(5);
    const Plan pl = plan_for(t, isa(), h);
    ASSERT_TRUE(pl.row_buffer_whole_pixels());
    t.Test();
  }
  testing::NoDiskCache no_disk_cache_;
};

// A tail block (21 channels), k = 2s with pads of the stride, one block of every channel vector, 1-D and
// 3-D, a stride of 16 (folded pixels of many blocks), batches, blocks across images (every image's row in
// one buffer), rows in parts, bands of the source, non-temporal flushes (AVX-512: rows of whole lines).
TEST_P(GemmRowBufferKernels, MatchReference) {
  run(DeconvTester().channels(13, 21).input({5, 9}).kernel({2, 2}).stride({2, 2}));
  run(DeconvTester().channels(16, 12).input({6, 10}).kernel({4, 4}).stride({2, 2}).pads({2, 2}, {2, 2}));
  TuningHints blocks = through_row_buffer();
  blocks.oc_vectors = 1;
  run(DeconvTester().channels(9, 20).input({4, 7}).kernel({2, 2}).stride({2, 2}), blocks);
  run(DeconvTester().rank(1).batch(2).channels(24, 5).input({37}).kernel({32}).stride({16}));
  run(DeconvTester().rank(3).channels(7, 9).input({3, 4, 5}).kernel({2, 2, 2}).stride({2, 2, 2}));
  TuningHints images = through_row_buffer();
  images.batch_block = 1;
  run(DeconvTester().batch(3).channels(8, 12).input({3, 3}).kernel({2, 2}).stride({2, 2}), images);
  TuningHints parts = through_row_buffer();
  parts.x_split = 3;
  run(DeconvTester().channels(8, 12).input({3, 40}).kernel({2, 2}).stride({2, 2}), parts);
  TuningHints bands = through_row_buffer();
  bands.band_rows = 2;
  run(DeconvTester().batch(2).channels(8, 12).input({7, 9}).kernel({2, 2}).stride({2, 2}), bands);
  TuningHints nt = through_row_buffer();
  nt.nt_stores = 1;
  run(DeconvTester().channels(8, 12).input({3, 32}).kernel({2, 2}).stride({2, 2}), nt);
}

INSTANTIATE_TEST_SUITE_P(IsaType, GemmRowBufferKernels, testing::isa_type_values(), testing::isa_type_name);

}  // namespace
}  // namespace deconvjit::detail
