// JSON form of a Descriptor (see deconvjit.hpp for the public functions).
#pragma once

#include <string>

#include "deconvjit/deconvjit.hpp"

namespace deconvjit::detail {

// The canonical JSON of an already resolved problem. `resolve` calls this, so canonical_json and
// Problem::canonical can never disagree. Pads are written as zeros unless auto_pad is explicit, because
// every other mode ignores the given pads (semantics.md section 3): equal problems, equal strings.
std::string canonical_text(const Problem& p, AutoPad auto_pad, bool has_output_shape);

}  // namespace deconvjit::detail
