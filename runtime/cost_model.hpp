// A first-order time model of a plan, for ranking candidates before any is timed (the tuner times only
// the best few). It counts what the plan decides: lanes left empty, the register tile's FMA, load and
// latency limits, ragged blocks, zero taps of a halo, kernel calls, copies, threads and their balance.
// Absolute values are rough; only the order among plans of one problem matters.
#pragma once

#include "runtime/plan.hpp"

namespace deconvjit::detail {

double model_ms(const Plan& pl, const Problem& p, int threads);

}  // namespace deconvjit::detail
