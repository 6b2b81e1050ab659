// Python objects -> descriptors, tuning hints and ISA names, and the library's JSON back into Python.
// Descriptors travel as JSON text: the library's parser is the one judge of their fields, so the module
// accepts exactly what the CLI accepts, with the same messages.
#include <algorithm>
#include <functional>
#include <limits>
#include <utility>

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

int to_int(py::handle v, const std::string& key) {
  // bool is an int subclass in Python, but ur_w=True is a mistake, not 1.
  if (py::isinstance<py::bool_>(v) || !PyIndex_Check(v.ptr()))
    invalid_argument("hints: '" + key + "' must be an integer, not " + type_name(v));
  const py::int_ i = py::reinterpret_steal<py::int_>(PyNumber_Index(v.ptr()));
  const long long n = i.cast<long long>();
  if (n < std::numeric_limits<int>::min() || n > std::numeric_limits<int>::max())
    invalid_argument("hints: '" + key + "' = " + std::to_string(n) + " is out of range");
  return static_cast<int>(n);
}

std::string to_text(py::handle v, const std::string& key) {
  if (!py::isinstance<py::str>(v))
    invalid_argument("hints: '" + key + "' must be a string, not " + type_name(v));
  return v.cast<std::string>();
}

using Setter = std::function<void(TuningHints&, py::handle, const std::string&)>;

Setter int_field(int TuningHints::*field) {
  return [field](TuningHints& h, py::handle v, const std::string& key) { h.*field = to_int(v, key); };
}
Setter text_field(std::string TuningHints::*field) {
  return [field](TuningHints& h, py::handle v, const std::string& key) { h.*field = to_text(v, key); };
}

// The one table of hint names. A new TuningHints field is one line here (and README's list).
const std::vector<std::pair<std::string, Setter>>& hint_fields() {
  static const std::vector<std::pair<std::string, Setter>> fields = {
      {"ur_w", int_field(&TuningHints::ur_w)},
      {"oc_vectors", int_field(&TuningHints::oc_vectors)},
      {"ic_unroll", int_field(&TuningHints::ic_unroll)},
      {"x_split", int_field(&TuningHints::x_split)},
      {"ic_block", int_field(&TuningHints::ic_block)},
      {"algorithm", text_field(&TuningHints::algorithm)},
      {"layout", text_field(&TuningHints::layout)},
      {"x_halo", int_field(&TuningHints::x_halo)},
  };
  return fields;
}

std::string known_hints() {
  std::string s;
  for (const auto& [name, setter] : hint_fields()) s += (s.empty() ? "" : ", ") + name;
  return s;
}

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

TuningHints hints_from(py::handle hints) {
  TuningHints h;
  if (hints.is_none()) return h;
  py::object fields = py::reinterpret_borrow<py::object>(hints);
  if (is_json_text(hints)) {
    try {
      fields = json_to_python(hints.cast<std::string>());
    } catch (py::error_already_set& e) {
      if (!e.matches(PyExc_ValueError)) throw;
      invalid_argument(std::string("hints: not valid JSON: ") + py::str(e.value()).cast<std::string>());
    }
  }
  if (!py::isinstance<py::dict>(fields))
    invalid_argument("hints must be a dict or a JSON object, not " + type_name(fields));
  for (const auto& [k, v] : fields.cast<py::dict>()) {
    const std::string key = py::str(k);
    auto it = std::find_if(hint_fields().begin(), hint_fields().end(),
                           [&](const auto& f) { return f.first == key; });
    if (it == hint_fields().end())
      invalid_argument("hints: unknown field '" + key + "' (known: " + known_hints() + ")");
    if (!v.is_none()) it->second(h, v, key);  // None: leave the choice to the heuristic
  }
  return h;
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
