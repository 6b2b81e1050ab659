// Test-side index arithmetic for the operands' layouts, written independently of runtime/reference.cpp so
// that tests can re-layout data and compare results element by element.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "deconvjit/deconvjit.hpp"

namespace deconvjit::testing {

inline int64_t product(const std::vector<int64_t>& v) {
  int64_t r = 1;
  for (int64_t e : v) r *= e;
  return r;
}

// Calls fn for every index of a box, last axis fastest.
inline void for_each_index(const std::vector<int64_t>& dims,
                           const std::function<void(const std::vector<int64_t>&)>& fn) {
  if (product(dims) == 0) return;
  std::vector<int64_t> at(dims.size(), 0);
  for (;;) {
    fn(at);
    size_t a = dims.size();
    while (a > 0 && ++at[a - 1] == dims[a - 1]) at[--a] = 0;
    if (a == 0) return;
  }
}

// Row-major offset of `at` within `dims`.
inline int64_t linear(const std::vector<int64_t>& dims, const std::vector<int64_t>& at) {
  int64_t off = 0;
  for (size_t a = 0; a < dims.size(); ++a) off = off * dims[a] + at[a];
  return off;
}

// Offset of activation element (n, c, spatial position) in NCX or NXC.
inline int64_t act_offset(DataFormat f, int64_t channels, const std::vector<int64_t>& spatial, int64_t n,
                          int64_t c, const std::vector<int64_t>& pos) {
  const int64_t sp = linear(spatial, pos), box = product(spatial);
  return f == DataFormat::NCX ? (n * channels + c) * box + sp : (n * box + sp) * channels + c;
}

// Offset of weight (ci, co within its group, tap) in OIX/GOIX ([C_IN, C_OUT/G, K...]) or XIO
// ([K..., C_OUT/G, C_IN]).
inline int64_t weight_offset(WeightsFormat f, int64_t c_in, int64_t cog, const std::vector<int64_t>& kernel,
                             int64_t ci, int64_t co_g, const std::vector<int64_t>& tap) {
  const int64_t k = linear(kernel, tap);
  return f == WeightsFormat::XIO ? (k * cog + co_g) * c_in + ci : (ci * cog + co_g) * product(kernel) + k;
}

// Copies activations from one data format to another.
template <class T>
std::vector<T> relayout_act(const std::vector<T>& v, DataFormat from, DataFormat to, int64_t batch,
                            int64_t channels, const std::vector<int64_t>& spatial) {
  std::vector<T> out(v.size());
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t c = 0; c < channels; ++c)
      for_each_index(spatial, [&](const std::vector<int64_t>& pos) {
        out[act_offset(to, channels, spatial, n, c, pos)] = v[act_offset(from, channels, spatial, n, c, pos)];
      });
  return out;
}

// Copies weights from one weights format to another (GOIX has the memory of OIX).
inline std::vector<float> relayout_weights(const std::vector<float>& v, WeightsFormat from, WeightsFormat to,
                                           int64_t c_in, int64_t cog, const std::vector<int64_t>& kernel) {
  std::vector<float> out(v.size());
  for (int64_t ci = 0; ci < c_in; ++ci)
    for (int64_t co = 0; co < cog; ++co)
      for_each_index(kernel, [&](const std::vector<int64_t>& tap) {
        out[weight_offset(to, c_in, cog, kernel, ci, co, tap)] =
            v[weight_offset(from, c_in, cog, kernel, ci, co, tap)];
      });
  return out;
}

}  // namespace deconvjit::testing
