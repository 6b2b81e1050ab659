// The default heuristic's rule for each choice, in words, for `deconvjit explain`. Each names the planner
// function that applies it, so the text can be checked against the code it describes.
#pragma once

#include <string>

namespace deconvjit::detail {

// The rule behind `field` (a TuningHints name) in the family `algorithm`; "" for a field the family does
// not choose.
std::string heuristic_rule(const std::string& field, const std::string& algorithm);

}  // namespace deconvjit::detail
