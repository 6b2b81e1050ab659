// What the files of the Python module share: the conversions between Python objects and the C++ API.
// Every check of user input that the library itself cannot make (Python types, numpy dtypes, shapes,
// contiguity) lives here, and raises the same exception classes as the library's own errors.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>  // in every file of the module, or type casters differ between them

#include <string>
#include <vector>

#include "deconvjit/deconvjit.hpp"

namespace deconvjit::python {

namespace py = pybind11;

// errors.cpp: one Python exception class per Error::Kind, under a common `deconvjit.Error`, and the
// translator that raises them for every deconvjit::Error escaping a binding.
void register_errors(py::module_& m);
[[noreturn]] void invalid_argument(const std::string& message);

// convert.cpp
// A descriptor given as a dict (any mapping; numpy integers and arrays allowed as values) or a JSON string.
Descriptor descriptor_from(py::handle desc);
// TuningHints from None, a dict or a JSON string; unknown keys and wrong types are InvalidArgument.
TuningHints hints_from(py::handle hints);
Isa isa_from(py::handle isa);   // None = best
py::object json_to_python(const std::string& json_text);  // json.loads
py::dict problem_dict(const Problem& p);

// kernel.cpp: the Kernel and PackedWeights classes, and Kernel.time (also deconvjit.time).
void bind_kernel(py::module_& m);
double time_kernel(const Kernel& k, py::handle x, py::handle w, double min_time, int threads, uint64_t seed);

// bf16.cpp: deconvjit.to_bf16 / from_bf16, between float arrays and uint16 arrays of bf16 bits.
void bind_bf16(py::module_& m);

// arrays.cpp: numpy arrays as the library's typed buffers.
// f32 = float32, f16 = float16, bf16 = uint16 holding the bits.
py::dtype numpy_dtype(DType t);
// `obj` as a C-contiguous, aligned array of `t` and `shape` (copied only when it is not one already);
// InvalidArgument naming `what` when the dtype or shape differs.
py::array input_array(py::handle obj, const char* what, DType t, const std::vector<int64_t>& shape);
// The `out=` array checked (dtype, shape, C-contiguous, writeable, no overlap with `inputs`), or a new one.
py::array output_array(py::handle out, DType t, const std::vector<int64_t>& shape,
                       const std::vector<py::array>& inputs);
ConstBuffer const_view(const py::array& a, DType t);
Buffer view(py::array& a, DType t);

}  // namespace deconvjit::python
