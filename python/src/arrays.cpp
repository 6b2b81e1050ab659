// numpy arrays <-> the library's ConstBuffer / Buffer. The library checks element type and count again;
// here the user gets the full picture first: which argument, which dtype or shape, and what was expected.
#include <numeric>
#include <sstream>

#include "bindings.hpp"

namespace deconvjit::python {
namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::ostringstream s;
  s << '(';
  for (size_t i = 0; i < shape.size(); ++i) s << (i ? ", " : "") << shape[i];
  s << (shape.size() == 1 ? ",)" : ")");
  return s.str();
}

std::vector<int64_t> shape_of(const py::array& a) {
  return std::vector<int64_t>(a.shape(), a.shape() + a.ndim());
}

std::string dtype_text(DType t) {
  switch (t) {
    case DType::f32: return "float32 (f32)";
    case DType::f16: return "float16 (f16)";
    case DType::bf16: return "uint16 holding bf16 bits (bf16)";
  }
  return "?";
}

void check_layout(const py::array& a, const char* what, DType t, const std::vector<int64_t>& shape) {
  if (!a.dtype().equal(numpy_dtype(t)))
    invalid_argument(std::string(what) + ": dtype " + py::str(a.dtype()).cast<std::string>() +
                     ", the descriptor's data needs " + dtype_text(t));
  if (shape_of(a) != shape)
    invalid_argument(std::string(what) + ": shape " + shape_text(shape_of(a)) + ", the descriptor needs " +
                     shape_text(shape));
}

bool overlaps(const py::array& a, const py::array& b) {
  const auto* a0 = static_cast<const char*>(a.data());
  const auto* b0 = static_cast<const char*>(b.data());
  return a0 < b0 + b.nbytes() && b0 < a0 + a.nbytes();
}

}  // namespace

py::dtype numpy_dtype(DType t) {
  switch (t) {
    case DType::f32: return py::dtype("float32");
    case DType::f16: return py::dtype("float16");
    case DType::bf16: return py::dtype("uint16");  // numpy has no bfloat16: the 16 bits, as in ConstBuffer
  }
  throw Error(Error::Kind::Internal, "numpy_dtype: unknown DType");
}

py::array input_array(py::handle obj, const char* what, DType t, const std::vector<int64_t>& shape) {
  // Lists and other array-likes become arrays of their natural dtype, which is then checked: a float64
  // list is reported, not silently rounded.
  py::array a = py::array::ensure(obj);
  if (!a) {
    PyErr_Clear();
    invalid_argument(std::string(what) + ": expected a numpy array, got " +
                     py::str(py::type::of(obj).attr("__name__")).cast<std::string>());
  }
  check_layout(a, what, t, shape);
  // The kernels read dense memory in the layout's order: a strided view is copied, a dense one is not.
  constexpr int dense = py::array::c_style | py::detail::npy_api::NPY_ARRAY_ALIGNED_;
  return py::array::ensure(a, dense);
}

py::array output_array(py::handle out, DType t, const std::vector<int64_t>& shape,
                       const std::vector<py::array>& inputs) {
  if (out.is_none()) return py::array(numpy_dtype(t), shape);
  if (!py::isinstance<py::array>(out))
    invalid_argument("out: expected a numpy array, got " +
                     py::str(py::type::of(out).attr("__name__")).cast<std::string>());
  auto a = py::reinterpret_borrow<py::array>(out);
  check_layout(a, "out", t, shape);
  // Written in place, so it cannot be silently replaced by a contiguous copy.
  if (!(a.flags() & py::array::c_style)) invalid_argument("out: must be C-contiguous");
  if (!(a.flags() & py::detail::npy_api::NPY_ARRAY_ALIGNED_)) invalid_argument("out: must be aligned");
  if (!a.writeable()) invalid_argument("out: is read-only");
  for (const py::array& in : inputs)
    if (overlaps(a, in)) invalid_argument("out: shares memory with an input");
  return a;
}

ConstBuffer const_view(const py::array& a, DType t) {
  return {a.data(), t, static_cast<size_t>(a.size())};
}

Buffer view(py::array& a, DType t) { return {a.mutable_data(), t, static_cast<size_t>(a.size())}; }

}  // namespace deconvjit::python
