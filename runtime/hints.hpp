// TuningHints as text: one table of fields drives the JSON form, the cache keys and emptiness, so a new
// hint is added in one place.
#pragma once

#include <string>

#include "deconvjit/deconvjit.hpp"

namespace deconvjit::detail {

// Every field, set or not, in a fixed order: the hints' part of a cache key (compact JSON).
std::string hints_key_text(const TuningHints& h);

}  // namespace deconvjit::detail
