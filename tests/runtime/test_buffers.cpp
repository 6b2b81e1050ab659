// Every entry point checks the buffers it is given (type, element count, null) against the problem
// before it touches memory: a wrong buffer is an InvalidArgument naming the argument, and dst is untouched.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "deconvjit/deconvjit.hpp"

namespace deconvjit {
namespace {

Descriptor small() {
  Descriptor d;
  d.src = {1, 4, 5, 5};
  d.weights = {4, 3, 3, 3};
  d.strides = {2, 2};
  return d;
}

// Runs `call` and expects InvalidArgument whose message contains `needle`.
template <typename F>
void expect_rejected(F call, const std::string& needle) {
  try {
    call();
    ADD_FAILURE() << "accepted; wanted an error naming " << needle;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::InvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Buffers, WrongCountTypeOrNullIsRejectedBeforeAnyWrite) {
  const Kernel k = compile(small());
  const Problem& p = k.problem();
  std::vector<float> src(p.src_elements(), 1.f), w(p.weights_elements(), 1.f), dst(p.dst_elements(), 7.f);
  const PackedWeights packed = k.pack_weights(w);
  std::vector<float> short_dst(dst.size() - 1, 7.f);
  expect_rejected([&] { k.execute(src, packed, short_dst); }, "execute: dst");
  expect_rejected([&] { k.execute(ConstBuffer(src.data(), src.size() + 1), packed, dst); }, "execute: src");
  std::vector<uint16_t> halves(p.src_elements());
  expect_rejected([&] { k.execute(ConstBuffer(halves.data(), DType::f16, halves.size()), packed, dst); },
                  "element type f16");
  expect_rejected([&] { k.execute(ConstBuffer(nullptr, src.size()), packed, dst); }, "null");
  expect_rejected([&] { k.pack_weights(ConstBuffer(w.data(), w.size() - 1)); }, "pack_weights: weights");
  expect_rejected([&] { k.execute(src, PackedWeights{}, dst); }, "never packed");
  for (float v : dst) ASSERT_EQ(v, 7.f) << "a rejected call wrote dst";
  for (float v : short_dst) ASSERT_EQ(v, 7.f) << "a rejected call wrote dst";
  expect_rejected([&] { reference(p, src, w, short_dst); }, "reference: dst");
  expect_rejected([&] { reference(p, w, w, dst); }, "reference: src");
  // The right buffers pass the same checks.
  EXPECT_NO_THROW(k.execute(src, packed, dst));
  EXPECT_NE(dst[0], 7.f);
}

TEST(Buffers, ElementSizes) {
  EXPECT_EQ(dtype_size(DType::f32), 4u);
  EXPECT_EQ(dtype_size(DType::f16), 2u);
  EXPECT_EQ(dtype_size(DType::bf16), 2u);
}

}  // namespace
}  // namespace deconvjit
