#include "runtime/buffer.hpp"

#include <string>

namespace deconvjit {

size_t dtype_size(DType t) { return t == DType::f32 ? 4 : 2; }

namespace detail {

void check_buffer(const ConstBuffer& b, DType dtype, int64_t elements, const char* what) {
  auto fail = [&](const std::string& why) {
    throw Error(Error::Kind::InvalidArgument, std::string(what) + ": " + why);
  };
  if (!b.data) fail("null pointer");
  if (b.dtype != dtype)
    fail(std::string("element type ") + to_string(b.dtype) + ", the problem's is " + to_string(dtype));
  if (b.elements != static_cast<size_t>(elements))
    fail(std::to_string(b.elements) + " elements, the problem needs " + std::to_string(elements));
}

}  // namespace detail
}  // namespace deconvjit
