// Packed weights are tied to the packed layout, not to one Kernel object: an engine packs once per layer
// and runs it at several batch sizes, but weights packed for another layer must be refused.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "deconvjit/deconvjit.hpp"

namespace deconvjit {
namespace {

Descriptor layer(int64_t batch, int64_t c_out) {
  Descriptor d;
  d.src = {batch, 7, 7, 16};
  d.weights = {16, c_out, 3, 3};
  d.strides = {2, 2};
  d.pads_begin = d.pads_end = {1, 1};
  d.data_format = DataFormat::NXC;
  return d;
}

std::vector<float> random_floats(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

TEST(PackedWeights, ServeTheSameLayerAtAnotherBatchSize) {
  const Kernel k1 = compile(layer(1, 24)), k3 = compile(layer(3, 24));
  const std::vector<float> w = random_floats(static_cast<size_t>(k1.problem().weights_elements()), 1);
  const std::vector<float> src = random_floats(static_cast<size_t>(k3.problem().src_elements()), 2);
  const PackedWeights once = k1.pack_weights(w);
  std::vector<float> a(static_cast<size_t>(k3.problem().dst_elements())), b(a.size());
  k3.execute(src, once, a);                  // packed by the batch-1 kernel
  k3.execute(src, k3.pack_weights(w), b);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
}

TEST(PackedWeights, AnotherLayerIsRefusedWithoutTouchingDst) {
  const Kernel mine = compile(layer(1, 24)), other = compile(layer(1, 40));
  const std::vector<float> w = random_floats(static_cast<size_t>(other.problem().weights_elements()), 3);
  const std::vector<float> src = random_floats(static_cast<size_t>(mine.problem().src_elements()), 4);
  std::vector<float> dst(static_cast<size_t>(mine.problem().dst_elements()), 7.f);
  try {
    mine.execute(src, other.pack_weights(w), dst);
    FAIL() << "weights packed for " << other.name() << " ran on " << mine.name();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::InvalidArgument);
  }
  for (float v : dst) ASSERT_EQ(v, 7.f) << "dst was written before the refusal";
}

}  // namespace
}  // namespace deconvjit
