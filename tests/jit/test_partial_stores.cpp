// The AVX2 stores of part of a vector (jit/typed_io.cpp): store_f32_lanes and store_xmm_lanes write the
// lanes asked for, and not a byte around them, for every lane range of an f32 ymm and of eight words.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "deconvjit/deconvjit.hpp"
#include "jit/code_buffer.hpp"
#include "jit/generator.hpp"

namespace deconvjit {
namespace {

using namespace Xbyak;

// void f(void* dst, const void* src): loads 32 bytes from src into ymm0 and stores lanes [lo, hi) to dst.
class LaneStore : public jit::Generator {
 public:
  LaneStore(int bytes, int lo, int hi) : Generator(4096) {
    vmovups(ymm0, ptr[rsi]);
    if (bytes == 4)
      store_f32_lanes(ptr[rdi], ymm0, lo, hi, xmm1);
    else
      store_xmm_lanes(rdi, xmm0, bytes, lo, hi);
    vzeroupper();
    ret();
  }
};

// Runs the store of lanes [lo, hi) into a buffer of sentinels, the lanes' bytes starting at offset 32.
void expect_only_lanes(int bytes, int lo, int hi) {
  uint8_t src[32], dst[96];
  for (int i = 0; i < 32; ++i) src[i] = static_cast<uint8_t>(i + 1);
  std::memset(dst, 0xee, sizeof dst);
  LaneStore gen(bytes, lo, hi);
  const auto code = gen.bytes();
  jit::CodeBuffer buffer(code.data(), code.size());
  reinterpret_cast<void (*)(void*, const void*)>(const_cast<uint8_t*>(buffer.data()))(dst + 32, src);
  for (int i = 0; i < 96; ++i) {
    const int at = i - 32;
    const bool inside = at >= lo * bytes && at < hi * bytes;
    const int want = inside ? src[at] : 0xee;
    ASSERT_EQ(dst[i], want) << "lanes [" << lo << ", " << hi << ") of " << bytes << "-byte elements, byte " << at;
  }
}

TEST(PartialStores, EveryLaneRangeOfAnF32Vector) {
  if (!isa_available(Isa::avx2)) GTEST_SKIP() << "AVX2 is not available";
  for (int lo = 0; lo < 8; ++lo)
    for (int hi = lo + 1; hi <= 8; ++hi) expect_only_lanes(4, lo, hi);
}

TEST(PartialStores, EveryLaneRangeOfEightWords) {
  if (!isa_available(Isa::avx2)) GTEST_SKIP() << "AVX2 is not available";
  for (int lo = 0; lo < 8; ++lo)
    for (int hi = lo + 1; hi <= 8; ++hi) expect_only_lanes(2, lo, hi);
}

}  // namespace
}  // namespace deconvjit
