// Tensor memory in the problem's element type, for the tool (`run`, `check`, `bench`) and the Python
// module's timing: 64-byte aligned, viewed as the API's ConstBuffer / Buffer. f16 and bf16 elements are
// their 16 bits, as the API takes them; filling and reading go through runtime/half.hpp, so every value
// the tool makes up is one the type holds exactly (the reference then sees what the kernel sees).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <random>
#include <vector>

#include "deconvjit/deconvjit.hpp"
#include "runtime/half.hpp"

namespace deconvjit::bench {

class TypedBuffer {
 public:
  TypedBuffer() = default;
  TypedBuffer(DType t, int64_t elements) : dtype_(t), elements_(static_cast<size_t>(elements)) {
    // Rounded up to whole cache lines (and never 0 bytes, which aligned_alloc may refuse).
    const size_t bytes = (std::max<size_t>(this->bytes(), 1) + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, bytes);
    if (!p) throw std::bad_alloc();
    data_.reset(static_cast<uint8_t*>(p));
  }

  DType dtype() const { return dtype_; }
  size_t elements() const { return elements_; }
  size_t bytes() const { return elements_ * dtype_size(dtype_); }
  void* data() { return data_.get(); }
  const void* data() const { return data_.get(); }
  ConstBuffer view() const { return {data(), dtype_, elements_}; }
  Buffer view() { return {data(), dtype_, elements_}; }

  double at(int64_t i) const { return detail::load_element(data(), dtype_, i); }
  void set(int64_t i, double v) { detail::store_element(data(), dtype_, i, v); }
  // NaN in every element: what a kernel leaves unwritten then fails any comparison.
  void fill_nan() {
    for (size_t i = 0; i < elements_; ++i) set(static_cast<int64_t>(i), std::numeric_limits<double>::quiet_NaN());
  }

 private:
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  DType dtype_ = DType::f32;
  size_t elements_ = 0;
  std::unique_ptr<uint8_t[], Free> data_;
};

// `values` rounded (to nearest even) into type t; exact for f32.
inline TypedBuffer typed_copy(const std::vector<float>& values, DType t) {
  TypedBuffer b(t, static_cast<int64_t>(values.size()));
  if (t == DType::f32) {
    std::memcpy(b.data(), values.data(), b.bytes());
  } else {
    for (size_t i = 0; i < values.size(); ++i) b.set(static_cast<int64_t>(i), values[i]);
  }
  return b;
}

// Uniform in [-1, 1] from the seed: the floats fill_random (timing.hpp) and `deconvjit check` draw, rounded
// into the buffer's type, so an f32 run sees exactly the operands it saw before the 16-bit types existed.
inline void fill_random(TypedBuffer& b, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (size_t i = 0; i < b.elements(); ++i) b.set(static_cast<int64_t>(i), dist(rng));
}

}  // namespace deconvjit::bench
