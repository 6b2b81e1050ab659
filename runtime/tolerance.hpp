// How a computed output is judged against the oracle. Shared by the test builder and `deconvjit check`, so
// both accept exactly the same results.
//
// The bound is the classic worst case for a dot product of n terms evaluated in any order in a type with
// unit roundoff u: |fl(sum) - sum| <= gamma(n) * sum |x*w|, gamma(n) = n*u / (1 - n*u). u is that of the
// accumulation type (2^-24 for f32 sums, 2^-11 for f16 sums); the inputs are widened exactly, so the sum
// is the only inexact step before the one rounding into a 16-bit output type, which adds half an ulp of
// that type. It comes from the magnitudes the reference reports, never from comparing one kernel with
// another. The whole rule is in README.md ("gamma(n)").
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "deconvjit/deconvjit.hpp"
#include "runtime/half.hpp"

namespace deconvjit::verify {

constexpr double kF32Roundoff = 0x1p-24;

// Unit roundoff of the type sums are kept in.
inline double unit_roundoff(DType accumulation) {
  switch (accumulation) {
    case DType::f32: return kF32Roundoff;
    case DType::bf16: return 0x1p-8;
    case DType::f16: return 0x1p-11;
  }
  return kF32Roundoff;
}

// +inf once n*u >= 1: the bound then says nothing (with f16 sums from n = 2048 terms on), and every
// result of a finite sum passes. Tests of f16 accumulation must keep n*u well below 1 to test anything.
inline double gamma(int64_t n, double u = kF32Roundoff) {
  const double nu = static_cast<double>(n) * u;
  if (nu >= 1) return std::numeric_limits<double>::infinity();
  return nu / (1.0 - nu);
}

// Terms in one output element's sum: every input channel of the group times every tap, plus one for the
// final rounding (into f32 this is the whole rounding term; 16-bit outputs add half an ulp, see Rule).
inline int64_t dot_length(const Problem& p) {
  int64_t n = p.c_in_per_group();
  for (int64_t k : p.kernel) n *= k;
  return n + 1;
}

// The f32 rule (f32 data, f32 sums). `tiny` covers underflow in products that round to subnormals
// (relevant only when abs_sum is ~0).
inline double tolerance(int64_t n, double abs_sum) {
  const double tiny = static_cast<double>(n) * std::numeric_limits<float>::min();
  return gamma(n) * abs_sum + tiny;
}

// A binary floating-point format: significand bits (the hidden one included), smallest normal exponent,
// largest finite value.
struct Format {
  int digits, emin;
  double max_finite;
};
inline Format format_of(DType t) {
  switch (t) {
    case DType::f32: return {24, -126, std::numeric_limits<float>::max()};
    case DType::bf16: return {8, -126, detail::kBf16Max};
    case DType::f16: return {11, -14, detail::kF16Max};
  }
  return {24, -126, std::numeric_limits<float>::max()};
}

// Half the spacing of t's values at magnitude a (below t's smallest normal: half the subnormal step).
inline double half_ulp(DType t, double a) {
  const Format f = format_of(t);
  int e = f.emin + 1;  // frexp's exponent is one above the binade's
  if (a > 0 && std::isfinite(a)) std::frexp(a, &e);
  return std::ldexp(1.0, std::max(e - 1, f.emin) - (f.digits - 1) - 1);
}

// Magnitudes from here on round to infinity in t (round to nearest: max_finite plus half its ulp).
inline double overflow_threshold(DType t) {
  const Format f = format_of(t);
  return f.max_finite + half_ulp(t, f.max_finite);
}

// The acceptance rule of one problem's outputs. For a finite reference sum `want` with sum of |x*w| S:
//   |got - want| <= gamma_u(n) * S + n * (smallest normal of the sum type) [+ half_ulp(dtype, M)]
// where the bracket is there for 16-bit outputs only, M = max(|got|, |want| + gamma*S) (the rounded result
// may sit in the binade above want), and f32 data with f32 sums gives exactly tolerance(n, S).
// Non-finite values follow IEEE: a NaN sum needs a NaN, an infinite sum the same infinity; a finite sum
// that may overflow the output type (|want| + gamma*S at or past its overflow threshold) may come out as
// the infinity of its sign, and one whose partial sums may overflow the sum type (S(1 + gamma) past that
// type's threshold) as any infinity or NaN. A NaN where the sum is finite otherwise fails, so elements a
// kernel never wrote (NaN-filled) are caught.
class Rule {
 public:
  DType out = DType::f32, acc = DType::f32;
  int64_t n = 1;
  double g = 0, tiny = 0;

  explicit Rule(const Problem& p)
      : out(p.dtype), acc(p.accumulation), n(dot_length(p)), g(gamma(n, unit_roundoff(acc))),
        tiny(static_cast<double>(n) * std::ldexp(1.0, format_of(acc).emin)) {}

  // gamma * S, the arithmetic's error bound; 0 without terms even when gamma is infinite.
  double spread(double abs_sum) const { return abs_sum == 0 ? 0.0 : g * abs_sum; }

  double tol(double got, double want, double abs_sum) const {
    const double arithmetic = spread(abs_sum) + tiny;
    if (out == DType::f32) return arithmetic;  // dot_length's extra term is the rounding into f32
    const double reach = std::fabs(want) + spread(abs_sum);
    return arithmetic + half_ulp(out, std::isfinite(got) ? std::max(std::fabs(got), reach) : reach);
  }

  // Overflow that the arithmetic may legitimately produce for a finite sum (see above).
  bool may_overflow(double got, double want, double abs_sum) const {
    if (abs_sum + spread(abs_sum) >= overflow_threshold(acc)) return true;  // partial sums: inf - inf = NaN
    if (!std::isinf(got) || std::fabs(want) + spread(abs_sum) + tiny < overflow_threshold(out)) return false;
    const bool sign_known = std::fabs(want) > spread(abs_sum) + tiny;
    return !sign_known || std::signbit(got) == std::signbit(want);
  }

  // One element's verdict. A special value is charged no error when the rule accepts it and an infinite
  // one when it does not; `ok` decides either way (the tolerance may itself be infinite).
  struct Verdict {
    double err, tol;
    bool ok;
  };
  Verdict judge(double got, double want, double abs_sum) const {
    const double t = tol(got, want, abs_sum);
    if (std::isnan(want)) return special(std::isnan(got), t);
    if (std::isinf(want)) return special(got == want, t);
    if (!std::isfinite(got)) return special(may_overflow(got, want, abs_sum), t);
    const double err = std::fabs(got - want);
    return {err, t, err <= t};
  }

  bool accepts(double got, double want, double abs_sum) const { return judge(got, want, abs_sum).ok; }

 private:
  static Verdict special(bool ok, double t) {
    return {ok ? 0.0 : std::numeric_limits<double>::infinity(), t, ok};
  }
};

struct Mismatch {
  int64_t index;
  double got;  // the output element, widened exactly from its type
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

// `got` holds the output in the problem's dtype; `want` and `abs_sum` are reference_with_bound's unrounded
// sums and magnitudes. Each of the first `count` elements is judged by Rule.
inline Comparison compare(const Problem& p, ConstBuffer got, const double* want, const double* abs_sum,
                          int64_t count, size_t keep = 8) {
  if (got.dtype != p.dtype || got.elements < static_cast<size_t>(count) || (count > 0 && !got.data))
    throw Error(Error::Kind::InvalidArgument, std::string("compare: output of type ") + to_string(got.dtype) +
                                                  " with " + std::to_string(got.elements) + " elements, need " +
                                                  to_string(p.dtype) + " with " + std::to_string(count));
  Comparison c;
  const Rule rule(p);
  for (int64_t e = 0; e < count; ++e) {
    const double g = detail::load_element(got.data, got.dtype, e);
    const Rule::Verdict v = rule.judge(g, want[e], abs_sum[e]);
    const double ratio = v.err / v.tol;
    if (e == 0 || ratio > c.worst_ratio) {
      c.worst_ratio = ratio;
      c.tol_at_worst = v.tol;
    }
    if (v.err > c.max_abs_err) c.max_abs_err = v.err;
    if (v.ok) continue;
    c.ok = false;
    ++c.failures;
    if (c.first.size() < keep) c.first.push_back({e, g, want[e], v.tol});
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

// The random operands both verifiers draw: uniform in [-1, 1], reproducible from the seed. For 16-bit
// types see typed_operands (runtime/typed_data.hpp).
struct Operands {
  std::vector<float> src, weights;
};
inline Operands random_operands(const Problem& p, uint64_t seed) {
  return {uniform_data(p.src_elements(), seed), uniform_data(p.weights_elements(), ~seed)};
}

}  // namespace deconvjit::verify
