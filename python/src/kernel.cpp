// deconvjit.Kernel and deconvjit.PackedWeights: a compiled kernel called on numpy arrays, and timed the
// way `deconvjit bench` times it.
#include <tbb/task_arena.h>

#include <functional>

#include <tbb/info.h>

#include "bench/pinning.hpp"
#include "bench/timing.hpp"
#include "bench/typed_buffer.hpp"
#include "bindings.hpp"

namespace deconvjit::python {
namespace {

struct PyPacked {
  PackedWeights packed;
};

// Weights as given to a call: a PackedWeights object, used as is, or an array, checked (and packed on the
// fly by the library).
struct WeightsArg {
  const PackedWeights* packed = nullptr;
  py::array array;
};

WeightsArg weights_arg(py::handle w, const Problem& p) {
  WeightsArg arg;
  if (py::isinstance<PyPacked>(w)) {
    arg.packed = &w.cast<const PyPacked&>().packed;
  } else {
    arg.array = input_array(w, "w", p.dtype, p.weights_shape);
  }
  return arg;
}

// The library's execute, without the GIL: other Python threads run while the kernel does.
void execute(const Kernel& k, const py::array& x, const WeightsArg& w, py::array& y) {
  const DType t = k.problem().dtype;
  const ConstBuffer src = const_view(x, t);
  const Buffer dst = view(y, t);
  if (w.packed) {
    py::gil_scoped_release no_gil;
    k.execute(src, *w.packed, dst);
  } else {
    const ConstBuffer weights = const_view(w.array, t);
    py::gil_scoped_release no_gil;
    k.execute(src, weights, dst);
  }
}

py::array call(const Kernel& k, py::handle x, py::handle w, py::handle out) {
  const Problem& p = k.problem();
  const py::array src = input_array(x, "x", p.dtype, p.src_shape);
  const WeightsArg weights = weights_arg(w, p);
  std::vector<py::array> inputs{src};
  if (!weights.packed) inputs.push_back(weights.array);
  py::array dst = output_array(out, p.dtype, p.dst_shape, inputs);
  execute(k, src, weights, dst);
  return dst;
}

PyPacked pack(const Kernel& k, py::handle w) {
  const Problem& p = k.problem();
  const py::array a = input_array(w, "w", p.dtype, p.weights_shape);
  const ConstBuffer weights = const_view(a, p.dtype);
  py::gil_scoped_release no_gil;
  return PyPacked{k.pack_weights(weights)};
}

}  // namespace

// The median `deconvjit bench` prints for this kernel: the same operands when x and w are not given (in the
// problem's dtype, 64-byte aligned, seeded like bench's --seed), packed weights, and bench's timing loop
// (bench::interleaved_medians with one variant), in an arena of `threads` threads (0 = all), placed as
// bench places them (bench/pinning.hpp: each worker on its slot's CPU, the caller on slot 0's).
double time_kernel(const Kernel& k, py::handle x, py::handle w, double min_time, int threads, uint64_t seed) {
  if (!(min_time >= 0 && min_time <= 3600)) invalid_argument("time: min_time must be in [0, 3600] seconds");
  if (threads < 0) invalid_argument("time: threads must be >= 0");
  const Problem& p = k.problem();
  bench::TypedBuffer src(p.dtype, p.src_elements()), weights(p.dtype, p.weights_elements());
  bench::TypedBuffer dst(p.dtype, p.dst_elements());
  bench::fill_random(src, seed);
  bench::fill_random(weights, ~seed);
  py::array user_src;
  ConstBuffer src_view = src.view();
  if (!x.is_none()) {
    user_src = input_array(x, "x", p.dtype, p.src_shape);
    src_view = const_view(user_src, p.dtype);
  }
  const Buffer dst_view = dst.view();
  PackedWeights own;
  const PackedWeights* packed = &own;
  if (w.is_none()) {
    own = k.pack_weights(weights.view());
  } else {
    const WeightsArg arg = weights_arg(w, p);
    if (arg.packed) packed = arg.packed;
    else own = k.pack_weights(const_view(arg.array, p.dtype));
  }
  py::gil_scoped_release no_gil;
  const std::function<void()> run = [&] { k.execute(src_view, *packed, dst_view); };
  double ms = 0;
  auto measure = [&] {
    const bench::CallerUnpin unpin;
    bench::pin_caller(true);
    ms = bench::interleaved_medians({run}, min_time)[0];
  };
  tbb::task_arena arena(threads ? threads : tbb::info::default_concurrency());
  bench::WorkerPins pins(arena);
  arena.execute(measure);
  return ms;
}

void bind_kernel(py::module_& m) {
  py::class_<PyPacked>(m, "PackedWeights",
                       "Weights in a kernel's packed layout (Kernel.pack). Reusable across calls of that kernel.")
      .def_property_readonly("kernel_name", [](const PyPacked& p) { return p.packed.kernel_name(); })
      .def_property_readonly("nbytes", [](const PyPacked& p) { return p.packed.size_bytes(); })
      .def("__repr__", [](const PyPacked& p) {
        return "<deconvjit.PackedWeights for " + p.packed.kernel_name() + ", " +
               std::to_string(p.packed.size_bytes()) + " bytes>";
      });

  py::class_<Kernel>(m, "Kernel", "A compiled transposed convolution (deconvjit.compile).")
      .def_property_readonly("name", &Kernel::name)
      .def_property_readonly("isa", [](const Kernel& k) { return std::string(to_string(k.isa())); })
      .def_property_readonly("plan", [](const Kernel& k) { return json_to_python(k.plan_text()); },
                             "The plan as a dict (the JSON of Kernel::plan_text()).")
      .def_property_readonly("problem", [](const Kernel& k) { return problem_dict(k.problem()); },
                             "The resolved problem: shapes (src, weights, dst), pads, flops, ...")
      .def_property_readonly("src_shape", [](const Kernel& k) { return py::tuple(py::cast(k.problem().src_shape)); })
      .def_property_readonly("weights_shape",
                             [](const Kernel& k) { return py::tuple(py::cast(k.problem().weights_shape)); })
      .def_property_readonly("dst_shape", [](const Kernel& k) { return py::tuple(py::cast(k.problem().dst_shape)); })
      .def_property_readonly("dtype", [](const Kernel& k) { return numpy_dtype(k.problem().dtype); })
      .def_property_readonly("code_size", &Kernel::code_size)
      .def_property_readonly("compile_ms", &Kernel::compile_ms)
      .def("__call__", &call, py::arg("x"), py::arg("w"), py::kw_only(), py::arg("out") = py::none(),
           "y = k(x, w, out=None): x and w in the descriptor's layouts, w an array or PackedWeights. Writes "
           "into `out` (C-contiguous, the dst shape and dtype) and returns it, else returns a new array. "
           "Releases the GIL while the kernel runs.")
      .def("pack", &pack, py::arg("w"), "Packs weights once, for many calls.")
      .def("time", &time_kernel, py::arg("x") = py::none(), py::arg("w") = py::none(), py::kw_only(),
           py::arg("min_time") = 0.2, py::arg("threads") = 0, py::arg("seed") = 1,
           "Median milliseconds per call, measured as `deconvjit bench` measures (same loop, same "
           "defaults; seeded random operands when x or w is None).")
      .def("__repr__", [](const Kernel& k) { return "<deconvjit.Kernel " + k.name() + ">"; });
}

}  // namespace deconvjit::python
