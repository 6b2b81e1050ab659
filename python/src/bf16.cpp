// deconvjit.to_bf16 and deconvjit.from_bf16: numpy has no bfloat16, so bf16 tensors travel as uint16 arrays
// holding the bits (as the library's buffers hold them). These two convert between such arrays and floats
// with the library's own rounding (runtime/half.hpp), so data made here is exactly what the kernels read.
#include <cstring>

#include "bindings.hpp"
#include "runtime/half.hpp"

namespace deconvjit::python {
namespace {

std::string dtype_name(const py::array& a) { return py::str(a.dtype()).cast<std::string>(); }

// A C-contiguous, aligned array with `obj`'s dtype (a copy only when `obj` is not one already).
py::array dense(py::handle obj, const char* function) {
  py::array a = py::array::ensure(obj);
  if (!a) {
    PyErr_Clear();
    invalid_argument(std::string(function) + ": expected a numpy array, got " +
                     py::str(py::type::of(obj).attr("__name__")).cast<std::string>());
  }
  constexpr int flags = py::array::c_style | py::detail::npy_api::NPY_ARRAY_ALIGNED_;
  return py::array::ensure(a, flags);
}

template <typename T>
void round_all(const py::array& in, uint16_t* out) {
  const T* p = static_cast<const T*>(in.data());
  for (py::ssize_t i = 0; i < in.size(); ++i) out[i] = detail::double_to_bf16(static_cast<double>(p[i]));
}

// Each value rounded once, to nearest even, from its own type: float64 is not rounded to float32 first
// (that would round twice). NaN stays NaN (quiet), values past the largest bf16 become infinities.
py::array to_bf16(py::handle values) {
  const py::array in = dense(values, "to_bf16");
  py::array out(py::dtype("uint16"), std::vector<py::ssize_t>(in.shape(), in.shape() + in.ndim()));
  auto* bits = static_cast<uint16_t*>(out.mutable_data());
  if (in.dtype().equal(py::dtype("float32"))) {
    round_all<float>(in, bits);
  } else if (in.dtype().equal(py::dtype("float64"))) {
    round_all<double>(in, bits);
  } else if (in.dtype().equal(py::dtype("float16"))) {
    const auto* h = static_cast<const uint16_t*>(in.data());  // every half is a float: widen exactly
    for (py::ssize_t i = 0; i < in.size(); ++i) bits[i] = detail::double_to_bf16(detail::f16_to_float(h[i]));
  } else {
    invalid_argument("to_bf16: dtype " + dtype_name(in) + ", expected float32 (or float64, float16)");
  }
  return out;
}

// Exact: every bf16 is a float32.
py::array from_bf16(py::handle bits) {
  const py::array in = dense(bits, "from_bf16");
  if (!in.dtype().equal(py::dtype("uint16")))
    invalid_argument("from_bf16: dtype " + dtype_name(in) + ", expected uint16 holding bf16 bits");
  py::array out(py::dtype("float32"), std::vector<py::ssize_t>(in.shape(), in.shape() + in.ndim()));
  const auto* h = static_cast<const uint16_t*>(in.data());
  auto* f = static_cast<float*>(out.mutable_data());
  for (py::ssize_t i = 0; i < in.size(); ++i) f[i] = detail::bf16_to_float(h[i]);
  return out;
}

}  // namespace

void bind_bf16(py::module_& m) {
  m.def("to_bf16", &to_bf16, py::arg("values"),
        "float32 (or float64, float16) array -> uint16 array of the bf16 bits, each value rounded once to "
        "nearest even; the form bf16 problems take.");
  m.def("from_bf16", &from_bf16, py::arg("bits"),
        "uint16 array of bf16 bits (what bf16 problems return) -> float32 array, exactly.");
}

}  // namespace deconvjit::python
