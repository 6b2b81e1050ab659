// Validation and shape inference for ConvolutionBackpropData (semantics.md sections 1-3 and 5).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "deconvjit/deconvjit.hpp"

namespace deconvjit::detail {

// Limits that keep every offset the JIT emits inside a signed 32-bit displacement or a 64-bit register.
constexpr int64_t kMaxDim = (int64_t{1} << 31) - 1;        // any single tensor dimension
constexpr int64_t kMaxChannels = int64_t{1} << 24;          // C_IN and C_OUT
constexpr int64_t kMaxAttribute = (int64_t{1} << 31) - 1;   // |stride|, |dilation|, |pad|, |output_padding|
constexpr int64_t kMaxTensorBytes = int64_t{1} << 62;       // byte size of any one tensor
constexpr int64_t kElementBytes = 4;                         // f32, the widest element type

// Throws Error(InvalidDescriptor) with `message`.
[[noreturn]] void invalid(const std::string& message);

// "[1,2,3]", for error messages; a list longer than 8 is cut: "[1,2,3,4,5,6,7,8,... (9 entries)]".
std::string list_text(const std::vector<int64_t>& v);

// True when the weights are the GroupConvolutionBackpropData form [G, C_IN/G, C_OUT/G, K...]:
// GOIX, or OIX (the default) with one dimension more than the data.
bool is_group_form(const Descriptor& d);

// Element count of a shape, or throws naming `what` when the count or its byte size is out of range.
int64_t checked_elements(const std::vector<int64_t>& shape, const char* what);

}  // namespace deconvjit::detail
