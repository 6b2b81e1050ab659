// How a computed output is judged against the oracle. Shared by the test builder and `deconvjit check`, so
// both accept exactly the same results.
//
// The bound is the classic worst case for a float dot product of n terms evaluated in any order:
// |fl(sum) - sum| <= gamma(n) * sum |x*w|, gamma(n) = n*u / (1 - n*u), u = 2^-24. It comes from the
// magnitudes the reference reports, never from comparing one kernel with another.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "deconvjit/deconvjit.hpp"

namespace deconvjit::verify {

inline double gamma(int64_t n) {
  const double nu = static_cast<double>(n) * std::ldexp(1.0, -24);
  return nu / (1.0 - nu);
}

// Terms in one output element's sum: every input channel of the group times every tap, plus one for the
// final rounding to float.
inline int64_t dot_length(const Problem& p) {
  int64_t n = p.c_in_per_group();
  for (int64_t k : p.kernel) n *= k;
  return n + 1;
}

// `tiny` covers underflow in products that round to subnormals (relevant only when abs_sum is ~0).
inline double tolerance(int64_t n, double abs_sum) {
  const double tiny = static_cast<double>(n) * std::numeric_limits<float>::min();
  return gamma(n) * abs_sum + tiny;
}

struct Mismatch {
  int64_t index;
  float got;
  double want, tol;
};

struct Comparison {
  bool ok = true;
  double max_abs_err = 0;
  double worst_ratio = 0;      // max over elements of err / tol
  double tol_at_worst = 0;     // the tolerance of that element
  int64_t failures = 0;
  std::vector<Mismatch> first; // the first few failing elements, in index order
};

// NaN in `got` (an element never written, or garbage) always fails, with an infinite error.
inline Comparison compare(const Problem& p, const float* got, const double* want, const double* abs_sum,
                          int64_t count, size_t keep = 8) {
  Comparison c;
  const int64_t n = dot_length(p);
  for (int64_t e = 0; e < count; ++e) {
    double err = std::fabs(static_cast<double>(got[e]) - want[e]);
    if (std::isnan(err)) err = std::numeric_limits<double>::infinity();
    const double tol = tolerance(n, abs_sum[e]);
    const double ratio = err / tol;
    if (e == 0 || ratio > c.worst_ratio) {
      c.worst_ratio = ratio;
      c.tol_at_worst = tol;
    }
    if (err > c.max_abs_err) c.max_abs_err = err;
    if (err <= tol) continue;
    c.ok = false;
    ++c.failures;
    if (c.first.size() < keep) c.first.push_back({e, got[e], want[e], tol});
  }
  return c;
}

inline std::vector<float> uniform_data(int64_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = dist(rng);
  return v;
}

// The random operands both verifiers draw: uniform in [-1, 1], reproducible from the seed.
struct Operands {
  std::vector<float> src, weights;
};
inline Operands random_operands(const Problem& p, uint64_t seed) {
  return {uniform_data(p.src_elements(), seed), uniform_data(p.weights_elements(), ~seed)};
}

}  // namespace deconvjit::verify
