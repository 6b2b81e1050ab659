// transpose_block, the NCX <-> NXC mover (f32, and 16-bit elements as bits): every shape from 1x1 to 17x17
// (full 8x8 tiles, ragged rows, ragged columns, both; the AVX-512 movers up to 33x33 for f32 and 65x65 for
// 16-bit data), with strides wider than the block, each buffer ending right before an inaccessible page
// so that any read or write past the block faults.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <immintrin.h>

#include <cstdint>
#include <vector>

#include "runtime/half.hpp"
#include "runtime/transpose.hpp"

namespace deconvjit::detail {
namespace {

// `count` usable elements that end exactly where a PROT_NONE page begins.
template <typename T>
class GuardedBuffer {
 public:
  explicit GuardedBuffer(int64_t count) {
    page_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t bytes = static_cast<size_t>(count) * sizeof(T);
    data_pages_ = (bytes + page_ - 1) / page_;
    void* p = mmap(nullptr, (data_pages_ + 1) * page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    if (p == MAP_FAILED) return;
    base_ = static_cast<uint8_t*>(p);
    mprotect(base_ + data_pages_ * page_, page_, PROT_NONE);
    data_ = reinterpret_cast<T*>(base_ + data_pages_ * page_ - bytes);
  }
  ~GuardedBuffer() {
    if (base_) munmap(base_, (data_pages_ + 1) * page_);
  }
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;
  T* get() const { return data_; }

 private:
  size_t page_ = 0, data_pages_ = 0;
  uint8_t* base_ = nullptr;
  T* data_ = nullptr;
};

// f32 (float) and the 16-bit types (their bits, uint16_t) have a mover each; f32 on AVX-512 a second one.
template <typename T, typename Move>
void every_shape_up_to(int64_t most, const std::vector<int64_t>& pads, Move move) {
  for (int64_t rows = 1; rows <= most; ++rows)
    for (int64_t cols = 1; cols <= most; ++cols)
      for (int64_t pad : pads) {
        const int64_t is = cols + pad, os = rows + 2 * pad;
        GuardedBuffer<T> in((rows - 1) * is + cols), out((cols - 1) * os + rows);
        ASSERT_NE(in.get(), nullptr);
        ASSERT_NE(out.get(), nullptr);
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < is && r * is + c < (rows - 1) * is + cols; ++c)
            in.get()[r * is + c] = c < cols ? static_cast<T>(r * 100 + c) : static_cast<T>(9999);
        for (int64_t i = 0; i < (cols - 1) * os + rows; ++i) out.get()[i] = static_cast<T>(7777);
        move(in.get(), is, out.get(), os, rows, cols);
        for (int64_t c = 0; c < cols; ++c)
          for (int64_t i = 0; i < os && c * os + i < (cols - 1) * os + rows; ++i) {
            // Inside the block: the transposed value; in the stride gap: untouched.
            const T want = i < rows ? static_cast<T>(i * 100 + c) : static_cast<T>(7777);
            ASSERT_EQ(out.get()[c * os + i], want) << rows << "x" << cols << " pad " << pad << " at " << c << "," << i;
          }
      }
}

template <typename T>
void every_shape_up_to_17() {
  every_shape_up_to<T>(17, {0, 3}, [](const T* in, int64_t is, T* out, int64_t os, int64_t rows, int64_t cols) {
    transpose_block(in, is, out, os, rows, cols);
  });
}

TEST(TransposeBlock, EveryShapeUpTo17StaysInsideItsBlock) { every_shape_up_to_17<float>(); }
TEST(TransposeBlock, SixteenBitElementsEveryShapeUpTo17StayInsideTheirBlock) { every_shape_up_to_17<uint16_t>(); }

// The AVX2 movers with non-temporal stores of whole lines (the row buffer's flush): tiles of a line's rows
// (16 f32, 32 16-bit) by 8 columns, each column's line streamed where it starts one, the ragged rows and
// columns through transpose_block; two tiles each way and ragged edges of every size.
TEST(TransposeBlock, LineTilesEveryShapeUpTo33StayInsideTheirBlock) {
  every_shape_up_to<float>(33, {0, 8}, [](const float* in, int64_t is, float* out, int64_t os, int64_t rows,
                                          int64_t cols) {
    transpose_block_nt(in, is, out, os, rows, cols);
    _mm_sfence();
  });
}

TEST(TransposeBlock, SixteenBitLineTilesEveryShapeUpTo65StayInsideTheirBlock) {
  every_shape_up_to<uint16_t>(65, {0, 8}, [](const uint16_t* in, int64_t is, uint16_t* out, int64_t os,
                                             int64_t rows, int64_t cols) {
    transpose_block_nt(in, is, out, os, rows, cols);
    _mm_sfence();
  });
}

// The AVX-512 movers: whole tiles (f32 16x16, 16-bit 32 rows x 16 columns), ragged columns under masks,
// rows short of a tile through the 8x8 mover, two tiles each way (three rows of 16-bit tiles); with and
// without non-temporal stores (taken where a column's run of a line starts one: rows 16 or 32 with a
// stride that keeps the buffer's start aligned).
template <typename T>
void avx512_every_shape(int64_t most) {
  for (bool nt : {false, true})
    every_shape_up_to<T>(most, {0, 8}, [nt](const T* in, int64_t is, T* out, int64_t os, int64_t rows, int64_t cols) {
      transpose_block_avx512(in, is, out, os, rows, cols, nt);
      _mm_sfence();
    });
}

TEST(TransposeBlock, Avx512TilesEveryShapeUpTo33StayInsideTheirBlock) {
  if (!isa_available(Isa::avx512_core)) GTEST_SKIP() << "AVX-512 is not available";
  avx512_every_shape<float>(33);
}

TEST(TransposeBlock, Avx512SixteenBitTilesEveryShapeUpTo65StayInsideTheirBlock) {
  if (!isa_available(Isa::avx512_core)) GTEST_SKIP() << "AVX-512 is not available";
  avx512_every_shape<uint16_t>(65);
}

// The widening mover (Plan::widen_src): bf16 and f16 bit patterns r * 100 + c (f16 subnormals below
// 1024, normals above) come out as their exact f32 values, in every shape, inside the block only.
TEST(TransposeBlock, WideningEveryShapeUpTo17IsExactAndStaysInsideItsBlock) {
  for (DType type : {DType::bf16, DType::f16}) {
    auto value = [&](uint16_t h) { return type == DType::f16 ? f16_to_float(h) : bf16_to_float(h); };
    for (int64_t rows = 1; rows <= 17; ++rows)
      for (int64_t cols = 1; cols <= 17; ++cols) {
        const int64_t is = cols + 3, os = rows + 5;
        GuardedBuffer<uint16_t> in((rows - 1) * is + cols);
        GuardedBuffer<float> out((cols - 1) * os + rows);
        ASSERT_NE(in.get(), nullptr);
        ASSERT_NE(out.get(), nullptr);
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < cols; ++c) in.get()[r * is + c] = static_cast<uint16_t>(r * 100 + c);
        for (int64_t i = 0; i < (cols - 1) * os + rows; ++i) out.get()[i] = -7.f;
        transpose_block(in.get(), is, out.get(), os, rows, cols, type);
        for (int64_t c = 0; c < cols; ++c)
          for (int64_t i = 0; i < os && c * os + i < (cols - 1) * os + rows; ++i) {
            const float want = i < rows ? value(static_cast<uint16_t>(i * 100 + c)) : -7.f;
            ASSERT_EQ(out.get()[c * os + i], want) << to_string(type) << " " << rows << "x" << cols << " at " << c
                                                   << "," << i;
          }
      }
    // And the contiguous widening, with a ragged end.
    for (int64_t n = 1; n <= 20; ++n) {
      GuardedBuffer<uint16_t> in(n);
      GuardedBuffer<float> out(n);
      for (int64_t i = 0; i < n; ++i) in.get()[i] = static_cast<uint16_t>(0x3c00 + 37 * i);
      widen(in.get(), out.get(), n, type);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out.get()[i], value(static_cast<uint16_t>(0x3c00 + 37 * i))) << n;
    }
  }
}

}  // namespace
}  // namespace deconvjit::detail
