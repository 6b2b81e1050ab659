// The one check every API entry applies to the buffers it is given (type, count, null), before anything
// is read or written.
#pragma once

#include <cstdint>

#include "deconvjit/deconvjit.hpp"

namespace deconvjit::detail {

// Throws InvalidArgument naming `what` (e.g. "execute: src") when `b` is null, of another type than
// `dtype`, or holds other than `elements` elements.
void check_buffer(const ConstBuffer& b, DType dtype, int64_t elements, const char* what);

}  // namespace deconvjit::detail
