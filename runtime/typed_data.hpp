// Operands of any element type for the verifiers (tests, `deconvjit check`): bytes in the type's own
// encoding (f32 as float, bf16/f16 as their uint16_t bits), viewed as the API's buffers.
#pragma once

#include <cstdint>
#include <vector>

#include "deconvjit/deconvjit.hpp"
#include "runtime/half.hpp"
#include "runtime/tolerance.hpp"

namespace deconvjit::verify {

struct TypedData {
  DType dtype = DType::f32;
  int64_t count = 0;
  // count * dtype_size(dtype) bytes. Allocated by operator new, so aligned for float.
  std::vector<uint8_t> bytes;

  TypedData() = default;
  TypedData(DType t, int64_t n) : dtype(t), count(n), bytes(static_cast<size_t>(n) * dtype_size(t)) {}

  const void* data() const { return bytes.data(); }
  void* data() { return bytes.data(); }
  ConstBuffer view() const { return {bytes.data(), dtype, static_cast<size_t>(count)}; }
  Buffer view() { return {bytes.data(), dtype, static_cast<size_t>(count)}; }
  double at(int64_t i) const { return detail::load_element(bytes.data(), dtype, i); }
  void set(int64_t i, double v) { detail::store_element(bytes.data(), dtype, i, v); }  // rounds once
};

// uniform_data(count, seed) rounded once into t: the f32 draw is exactly uniform_data's, so a test that
// moves to typed data keeps its numbers, and the 16-bit draws are those same numbers rounded.
inline TypedData typed_random(int64_t count, DType t, uint64_t seed) {
  const std::vector<float> v = uniform_data(count, seed);
  TypedData d(t, count);
  for (int64_t i = 0; i < count; ++i) d.set(i, v[static_cast<size_t>(i)]);
  return d;
}

// random_operands in the problem's dtype (the same seeds for src and weights).
struct TypedOperands {
  TypedData src, weights;
};
inline TypedOperands typed_operands(const Problem& p, uint64_t seed) {
  return {typed_random(p.src_elements(), p.dtype, seed), typed_random(p.weights_elements(), p.dtype, ~seed)};
}

}  // namespace deconvjit::verify
