// `deconvjit tune`'s search for one problem: rank the plan space with the cost model, time the best few
// distinct kernels against the heuristic's plan, then the threading and blocking variants of the best
// two, every candidate verified against the double-precision oracle before it is timed.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "deconvjit/deconvjit.hpp"

namespace deconvjit::tune {

struct TuneResult {
  std::string name;
  TuningHints hints;  // the winner's complete choices
  std::string kernel, default_kernel;
  double default_ms = 0, tuned_ms = 0;  // medians from one interleaved run
  int candidates = 0;                   // plans timed
  int space = 0;                        // plans in the space (enumerated)
  bool space_complete = true;           // false: the enumeration stopped at its share of the budget
  int rejected = 0;                     // candidates that failed verification (a library bug)
  double seconds = 0;                   // wall time spent on the problem
};

// Called at each step with a short description ("stage 1: 3/12"), for progress output.
using ProgressFn = std::function<void(const std::string&)>;

// `options` fixes the ISA; caches and the tuning database are not used while tuning. Runs in the
// caller's arena (its concurrency is the thread count the result is for). `budget_s` bounds the time.
TuneResult tune_problem(const std::string& name, const Descriptor& d, const Options& options, double budget_s,
                        const ProgressFn& progress);

}  // namespace deconvjit::tune
