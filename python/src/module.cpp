// The `deconvjit` Python module: shape inference, compile, the reference, the machine's peak, and timing,
// on numpy arrays. A thin layer over include/deconvjit/deconvjit.hpp; see README "The Python module".
#include "bench/peak_probe.hpp"
#include "bindings.hpp"

namespace deconvjit::python {

namespace {

py::dict shape(py::handle desc) {
  const Problem p = resolve(descriptor_from(desc));
  py::dict out;  // the fields and order of `deconvjit shape`
  out["dst"] = p.dst_shape;
  out["pads_begin"] = p.pads_begin;
  out["pads_end"] = p.pads_end;
  return out;
}

Kernel compile_kernel(py::handle desc, py::handle hints, py::handle isa) {
  const Descriptor d = descriptor_from(desc);
  Options options;
  options.hints = hints_from(hints);
  options.max_isa = isa_from(isa);
  py::gil_scoped_release no_gil;  // JIT and the disk cache: no Python objects touched
  return compile(d, options);
}

// The autotuner's plan space, best model estimate first: each entry's hints compile to its kernel.
py::list plans(py::handle desc, py::handle isa, int threads, double max_seconds) {
  const Problem p = resolve(descriptor_from(desc));
  std::vector<PlanCandidate> all;
  {
    py::gil_scoped_release no_gil;
    all = enumerate_plans(p, isa_from(isa), threads, max_seconds);
  }
  py::list out;
  for (const PlanCandidate& c : all) {
    py::dict d;
    d["kernel"] = c.kernel;
    d["hints"] = json_to_python(to_json(c.hints));
    d["model_ms"] = c.model_ms;
    out.append(std::move(d));
  }
  return out;
}

py::array reference_result(py::handle desc, py::handle x, py::handle w) {
  const Problem p = resolve(descriptor_from(desc));
  const py::array src = input_array(x, "x", p.dtype, p.src_shape);
  const py::array weights = input_array(w, "w", p.dtype, p.weights_shape);
  py::array dst = output_array(py::none(), p.dtype, p.dst_shape, {});
  const ConstBuffer s = const_view(src, p.dtype), wb = const_view(weights, p.dtype);
  const Buffer d = view(dst, p.dtype);
  {
    py::gil_scoped_release no_gil;
    reference(p, s, wb, d);
  }
  return dst;
}

// The fields of `deconvjit peak --json`, from the same probe.
py::object peak(double min_time) {
  if (!(min_time >= 0.001 && min_time <= 60)) invalid_argument("peak: min_time must be in [0.001, 60] seconds");
  bench::PeakNumbers p;
  {
    py::gil_scoped_release no_gil;
    p = bench::measure_peak(min_time);
  }
  return json_to_python(bench::peak_json(p));
}

}  // namespace
}  // namespace deconvjit::python

PYBIND11_MODULE(deconvjit, m) {
  using namespace deconvjit::python;
  namespace dj = deconvjit;
  m.doc() =
      "Transposed convolutions compiled to x86-64 machine code at run time. Descriptors are dicts or JSON "
      "strings with the CLI's fields; arrays are numpy arrays in the descriptor's layouts and dtype (f32: "
      "float32, f16: float16, bf16: uint16 holding the bits; to_bf16 and from_bf16 convert).";
  m.attr("__version__") = dj::version();
  register_errors(m);
  bind_kernel(m);
  bind_bf16(m);
  m.def("shape", &shape, py::arg("desc"),
        "The output shape and resolved pads, as `deconvjit shape` prints them: {dst, pads_begin, pads_end}.");
  m.def("compile", &compile_kernel, py::arg("desc"), py::arg("hints") = py::none(), py::arg("isa") = py::none(),
        "Compiles (or finds in the caches) the kernel for `desc`. hints: a dict of TuningHints fields; isa: "
        "'avx2', 'avx512_core' or 'best' (a cap).");
  m.def("plans", &plans, py::arg("desc"), py::arg("isa") = py::none(), py::arg("threads") = 0,
        py::arg("max_seconds") = 0.0,
        "Every candidate plan of `desc` as {kernel, hints, model_ms}, ranked by the cost model (as "
        "`deconvjit plans`); compile(desc, hints=c['hints']) builds candidate c. max_seconds > 0 bounds "
        "the enumeration: every register tile's own plan, then numeric variants, the model's best first.");
  m.def("reference", &reference_result, py::arg("desc"), py::arg("x"), py::arg("w"),
        "The scalar oracle: accumulates in double, rounds to the output type. Slow.");
  m.def("peak", &peak, py::arg("min_time") = 0.25,
        "This machine's FMA peak (GFLOP/s; also the f16 FMA and bf16 dot product where the CPU has them) "
        "and triad bandwidth (GB/s), as `deconvjit peak --json`. Takes about 6 to 10 * min_time seconds.");
  m.def("time", &time_kernel, py::arg("kernel"), py::arg("x") = py::none(), py::arg("w") = py::none(),
        py::kw_only(), py::arg("min_time") = 0.2, py::arg("threads") = 0, py::arg("seed") = 1,
        "kernel.time(x, w, ...): the median milliseconds `deconvjit bench` prints.");
  // Raises the exception of Error::Kind `kind` (0..5, the enum's order) from C++: lets the tests check the
  // translation of kinds the API cannot be made to raise on demand (Io, Internal, IsaUnavailable).
  m.def("_raise_error", [](int kind, const std::string& message) {
    if (kind < 0 || kind > static_cast<int>(dj::Error::Kind::Internal)) dj::python::invalid_argument("no such kind");
    throw dj::Error(static_cast<dj::Error::Kind>(kind), message);
  });
  m.def("isa_available", [](const std::string& isa) { return dj::isa_available(dj::isa_from_string(isa)); },
        py::arg("isa"), "Whether this CPU runs kernels of `isa` ('avx2', 'avx512_core').");
}
