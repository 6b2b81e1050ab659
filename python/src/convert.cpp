// Python objects -> descriptors, tuning hints and ISA names, and the library's JSON back into Python.
// Descriptors travel as JSON text: the library's parser is the one judge of their fields, so the module
// accepts exactly what the CLI accepts, with the same messages.

#include "bindings.hpp"

namespace deconvjit::python {
namespace {

std::string type_name(py::handle obj) { return py::str(py::type::of(obj).attr("__name__")); }

// json.dumps's fallback for values that are not built-in: numpy scalars and arrays become ints and lists,
// so {"src": x.shape} or np.int64 values work; anything else stays a TypeError.
py::object to_builtin(py::handle value) {
  if (py::hasattr(value, "tolist")) return value.attr("tolist")();
  throw py::type_error("a " + type_name(value) + " is not JSON serializable");
}

std::string dumps(py::handle obj) {
  // Released, never freed: a static py::object would be destroyed after the interpreter is gone.
  static const py::handle json_dumps = py::object(py::module_::import("json").attr("dumps")).release();
  return py::str(json_dumps(obj, py::arg("default") = py::cpp_function(to_builtin)));
}

// A dict, or a JSON string that must hold an object: the forms `desc` and `hints` take.
bool is_json_text(py::handle obj) { return py::isinstance<py::str>(obj); }

}  // namespace

py::object json_to_python(const std::string& json_text) {
  static const py::handle json_loads = py::object(py::module_::import("json").attr("loads")).release();
  return json_loads(json_text);
}

Descriptor descriptor_from(py::handle desc) {
  if (is_json_text(desc)) return descriptor_from_json(desc.cast<std::string>());
  if (!py::isinstance<py::dict>(desc))
    throw py::type_error("desc must be a dict or a JSON string, not " + type_name(desc));
  return descriptor_from_json(dumps(desc));
}

// Hints go through the library's own parser (one table of fields, the CLI's messages); a value of None
// leaves that choice to the heuristic.
TuningHints hints_from(py::handle hints) {
  if (hints.is_none()) return {};
  if (is_json_text(hints)) return hints_from_json(hints.cast<std::string>());
  if (!py::isinstance<py::dict>(hints))
    invalid_argument("hints must be a dict or a JSON object, not " + type_name(hints));
  py::dict set;
  for (const auto& [k, v] : hints.cast<py::dict>())
    if (!v.is_none()) set[k] = v;
  return hints_from_json(dumps(set));
}

Isa isa_from(py::handle isa) {
  if (isa.is_none()) return Isa::best;
  if (!py::isinstance<py::str>(isa)) invalid_argument("isa must be a string, not " + type_name(isa));
  return isa_from_string(isa.cast<std::string>());
}

py::dict problem_dict(const Problem& p) {
  py::dict d;
  d["src"] = py::tuple(py::cast(p.src_shape));
  d["weights"] = py::tuple(py::cast(p.weights_shape));
  d["dst"] = py::tuple(py::cast(p.dst_shape));
  d["dtype"] = to_string(p.dtype);
  d["data_format"] = to_string(p.data_format);
  d["weights_format"] = to_string(p.weights_format);
  d["groups"] = p.groups;
  d["strides"] = p.stride;
  d["dilations"] = p.dilation;
  d["pads_begin"] = p.pads_begin;
  d["pads_end"] = p.pads_end;
  d["output_padding"] = p.output_padding;
  d["flops"] = p.flops();
  d["canonical"] = p.canonical;
  return d;
}

}  // namespace deconvjit::python
