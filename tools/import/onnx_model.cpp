#include "import/onnx_model.hpp"

#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>

namespace deconvjit::import {
namespace {

[[noreturn]] void node_error(const std::string& why) { throw std::runtime_error(why); }

std::string list_text(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

// Attributes ConvTranspose-1 and -11 define. Anything else is refused: silently dropping an attribute from a
// newer opset could compile a kernel for a different operation.
const std::set<std::string> kKnownAttributes = {"auto_pad", "dilations", "group",   "kernel_shape",
                                                "output_padding", "output_shape", "pads", "strides"};

const onnx::AttributeProto* find_attribute(const onnx::NodeProto& node, const std::string& name) {
  for (const onnx::AttributeProto& a : node.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

// Old exporters leave AttributeProto.type unset, so only a type that is set and different is an error.
void check_type(const onnx::AttributeProto& a, onnx::AttributeProto::AttributeType want) {
  if (a.type() != onnx::AttributeProto::UNDEFINED && a.type() != want)
    node_error("attribute " + a.name() + " has type " + onnx::AttributeProto::AttributeType_Name(a.type()) +
               ", expected " + onnx::AttributeProto::AttributeType_Name(want));
}

std::vector<int64_t> ints(const onnx::NodeProto& node, const std::string& name) {
  const onnx::AttributeProto* a = find_attribute(node, name);
  if (!a) return {};
  check_type(*a, onnx::AttributeProto::INTS);
  return {a->ints().begin(), a->ints().end()};
}

int64_t integer(const onnx::NodeProto& node, const std::string& name, int64_t fallback) {
  const onnx::AttributeProto* a = find_attribute(node, name);
  if (!a) return fallback;
  check_type(*a, onnx::AttributeProto::INT);
  return a->i();
}

std::string text(const onnx::NodeProto& node, const std::string& name, const std::string& fallback) {
  const onnx::AttributeProto* a = find_attribute(node, name);
  if (!a) return fallback;
  check_type(*a, onnx::AttributeProto::STRING);
  return a->s();
}

void check_attribute_names(const onnx::NodeProto& node) {
  for (const onnx::AttributeProto& a : node.attribute())
    if (!kKnownAttributes.count(a.name())) node_error("unknown ConvTranspose attribute '" + a.name() + "'");
}

DType dtype_of(int32_t onnx_type, const std::string& what) {
  switch (onnx_type) {
    case onnx::TensorProto::FLOAT: return DType::f32;
    case onnx::TensorProto::FLOAT16: return DType::f16;
    case onnx::TensorProto::BFLOAT16: return DType::bf16;
    case onnx::TensorProto::UNDEFINED: node_error(what + " has no element type");
    default:
      node_error(what + " has element type " + onnx::TensorProto::DataType_Name(onnx_type) +
                 "; this library knows FLOAT, FLOAT16 and BFLOAT16");
  }
}

// ONNX X*s for SAME_UPPER / SAME_LOWER without output_shape; the strides' length is checked here because
// the product needs one stride per axis.
std::vector<int64_t> same_output(const std::vector<int64_t>& src, const std::vector<int64_t>& strides) {
  const size_t n = src.size() - 2;
  if (!strides.empty() && strides.size() != n)
    node_error("strides " + list_text(strides) + " has " + std::to_string(strides.size()) + " entries, expected " +
               std::to_string(n));
  std::vector<int64_t> out;
  for (size_t i = 0; i < n; ++i) {
    const int64_t x = src[i + 2], s = strides.empty() ? 1 : strides[i];
    if (s < 1 || x > std::numeric_limits<int32_t>::max() / s)
      node_error("auto_pad output size X*stride is out of range (X " + std::to_string(x) + ", stride " +
                 std::to_string(s) + ")");
    out.push_back(x * s);
  }
  return out;
}

// ONNX's padding rules mapped onto the descriptor's (semantics.md section 3), so that runtime/problem.cpp
// does all the arithmetic. Whenever ONNX derives the pads from an output size (output_shape given, or
// SAME_* meaning Y = X*s), it splits total_padding with the larger half at the END for SAME_UPPER and at
// the BEGINNING otherwise (ONNX 1.12 ConvTranspose doc). The descriptor's same_lower and same_upper put the
// larger half at the end and at the beginning respectively, hence the crossed names.
void apply_padding(const onnx::NodeProto& node, Descriptor& d) {
  const std::string mode = text(node, "auto_pad", "NOTSET");
  const std::vector<int64_t> pads = ints(node, "pads"), given = ints(node, "output_shape");
  if (mode != "NOTSET" && mode != "VALID" && mode != "SAME_UPPER" && mode != "SAME_LOWER")
    node_error("unknown auto_pad '" + mode + "' (expected NOTSET, SAME_UPPER, SAME_LOWER or VALID)");
  if (!pads.empty() && mode != "NOTSET")
    node_error("pads " + list_text(pads) + " cannot be combined with auto_pad " + mode);
  if (given.empty() && mode == "NOTSET") {
    const size_t n = d.src.size() - 2;
    if (pads.empty()) return;
    if (pads.size() != 2 * n)
      node_error("pads " + list_text(pads) + " has " + std::to_string(pads.size()) + " entries, expected " +
                 std::to_string(2 * n) + " (begins, then ends)");
    d.pads_begin.assign(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(n));
    d.pads_end.assign(pads.begin() + static_cast<std::ptrdiff_t>(n), pads.end());
    return;
  }
  if (given.empty() && mode == "VALID") {
    d.auto_pad = AutoPad::Valid;
    return;
  }
  d.output_shape = given.empty() ? same_output(d.src, d.strides) : given;
  d.auto_pad = mode == "SAME_UPPER" ? AutoPad::SameLower : AutoPad::SameUpper;
}

class OnnxModel {
 public:
  explicit OnnxModel(const std::string& path) : path_(path) {
    load();
    infer_shapes();
    index();
  }

  std::vector<ImportedLayer> deconvolutions() const {
    std::vector<ImportedLayer> out;
    int number = 0;
    for (const onnx::NodeProto& node : model_.graph().node()) {
      const bool standard = node.domain().empty() || node.domain() == "ai.onnx";
      if (!standard || node.op_type() != "ConvTranspose") continue;
      ImportedLayer item;
      item.label = path_ + ":" + label(node, number++);
      try {
        item.descriptor = descriptor_of(node);
      } catch (const std::exception& e) {
        item.error = e.what();
      }
      out.push_back(std::move(item));
    }
    return out;
  }

 private:
  void load() {
    std::ifstream in(path_, std::ios::binary);
    if (!in) throw Error(Error::Kind::Io, "cannot open '" + path_ + "': " + std::strerror(errno));
    if (!model_.ParseFromIstream(&in)) {
      if (in.bad()) throw Error(Error::Kind::Io, "cannot read '" + path_ + "'");
      throw Error(Error::Kind::InvalidArgument,
                  "'" + path_ + "' is not a valid ONNX model (the protobuf ModelProto does not parse)");
    }
    // An empty or foreign protobuf can parse as a ModelProto with nothing in it.
    if (!model_.has_graph() || model_.graph().node_size() == 0)
      throw Error(Error::Kind::InvalidArgument, "'" + path_ + "' is not an ONNX model (it has no graph nodes)");
  }

  // Graphs usually declare shapes only for their inputs; ONNX shape inference carries them to every
  // ConvTranspose. When it throws (a declared type or shape it disagrees with), the declared shapes and
  // whatever it inferred before stopping are all there is.
  void infer_shapes() {
    onnx::ModelProto copy = model_;
    make_inference_safe(*copy.mutable_graph(), {});
    try {
      onnx::shape_inference::InferShapes(copy);
    } catch (const std::exception& e) {
      inference_error_ = e.what();
    }
    *model_.mutable_graph()->mutable_value_info() = copy.graph().value_info();
    *model_.mutable_graph()->mutable_output() = copy.graph().output();
  }

  // Debian's libonnx 1.12 reads past the end of W's shape in ConvTranspose's shape inference when W has
  // fewer than 2 dimensions, or more spatial dimensions than X and no kernel_shape (a null read that kills
  // the process; found by fuzz/fuzz_onnx). Inference therefore runs on a copy in which every ConvTranspose
  // carries a kernel_shape taken from its statically known W (onnx returns early when that disagrees with
  // X), and one whose W is not statically known with rank >= 2 and static spatial sizes is left out (its
  // output gets no inferred shape; the node itself is still read from the original model).
  static void make_inference_safe(onnx::GraphProto& g, std::map<std::string, std::vector<int64_t>> known) {
    // A name declared twice with different ranks could reach onnx with either: it counts as unknown.
    std::set<std::string> here;
    auto note = [&](const std::string& name, std::vector<int64_t> dims) {
      const auto it = known.find(name);
      if (!here.insert(name).second && it != known.end() && it->second.size() != dims.size()) dims = {};
      known[name] = std::move(dims);
    };
    for (const auto* list : {&g.input(), &g.value_info()})
      for (const onnx::ValueInfoProto& v : *list) {
        if (!v.type().has_tensor_type() || !v.type().tensor_type().has_shape()) continue;
        std::vector<int64_t> dims;
        for (const auto& d : v.type().tensor_type().shape().dim()) dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
        note(v.name(), dims);
      }
    for (const onnx::TensorProto& t : g.initializer()) note(t.name(), {t.dims().begin(), t.dims().end()});
    for (const onnx::NodeProto& n : g.node()) {
      const bool constant = n.op_type() == "Constant" && n.output_size() == 1;
      const onnx::AttributeProto* value = constant ? find_attribute(n, "value") : nullptr;
      if (value && value->has_t()) note(n.output(0), {value->t().dims().begin(), value->t().dims().end()});
    }
    auto* nodes = g.mutable_node();
    for (int i = nodes->size(); i-- > 0;) {
      onnx::NodeProto& n = (*nodes)[i];
      for (onnx::AttributeProto& a : *n.mutable_attribute()) {  // subgraphs (If, Loop, Scan) see this scope
        if (a.has_g()) make_inference_safe(*a.mutable_g(), known);
        for (onnx::GraphProto& sub : *a.mutable_graphs()) make_inference_safe(sub, known);
      }
      if (n.op_type() != "ConvTranspose") continue;
      const auto w = n.input_size() >= 2 ? known.find(n.input(1)) : known.end();
      const bool usable = w != known.end() && w->second.size() >= 2 &&
                          std::all_of(w->second.begin() + 2, w->second.end(), [](int64_t d) { return d >= 0; });
      if (!usable) {
        nodes->DeleteSubrange(i, 1);
        continue;
      }
      if (find_attribute(n, "kernel_shape")) continue;  // onnx uses it as given, checking its length against X
      onnx::AttributeProto* ks = n.add_attribute();
      ks->set_name("kernel_shape");
      ks->set_type(onnx::AttributeProto::INTS);
      for (size_t k = 2; k < w->second.size(); ++k) ks->add_ints(w->second[k]);
    }
  }

  void index() {
    const onnx::GraphProto& g = model_.graph();
    for (const auto* list : {&g.input(), &g.value_info(), &g.output()})
      for (const onnx::ValueInfoProto& v : *list)
        if (v.type().has_tensor_type()) typed_.emplace(v.name(), &v.type().tensor_type());
    for (const onnx::TensorProto& t : g.initializer()) constants_[t.name()] = &t;
    for (const onnx::NodeProto& node : g.node()) {
      if (node.op_type() != "Constant" || node.output_size() != 1) continue;
      const onnx::AttributeProto* value = find_attribute(node, "value");
      if (value && value->has_t()) constants_[node.output(0)] = &value->t();
    }
  }

  static std::string label(const onnx::NodeProto& node, int number) {
    if (!node.name().empty()) return node.name();
    const std::string out = node.output_size() ? node.output(0) : "";
    return "ConvTranspose#" + std::to_string(number) + " (output '" + out + "')";
  }

  Descriptor descriptor_of(const onnx::NodeProto& node) const {
    if (node.input_size() < 2 || node.input_size() > 3 || node.input(0).empty() || node.input(1).empty())
      node_error("has " + std::to_string(node.input_size()) + " inputs, expected X, W and an optional bias B");
    check_attribute_names(node);
    Descriptor d;
    d.name = node.name();
    d.src = static_shape(node.input(0), "input X");
    d.weights = static_shape(node.input(1), "weight W");
    if (d.src.size() < 3) node_error("input X has shape " + list_text(d.src) + ", expected rank 3, 4 or 5");
    d.dtype = element_type(node.input(0), "input X");
    d.weights_dtype = element_type(node.input(1), "weight W");
    check_kernel_shape(node, d.weights);
    d.strides = ints(node, "strides");
    d.dilations = ints(node, "dilations");
    d.output_padding = ints(node, "output_padding");
    d.groups = integer(node, "group", 1);  // W is (C, M/group, k...): the descriptor's OIX with groups
    apply_padding(node, d);
    return d;
  }

  std::string not_static(const std::string& what, const std::string& name, const std::string& why) const {
    return what + " '" + name + "' " + why + "; only static shapes compile ahead of time";
  }

  std::vector<int64_t> static_shape(const std::string& name, const std::string& what) const {
    if (const auto c = constants_.find(name); c != constants_.end())
      return {c->second->dims().begin(), c->second->dims().end()};
    const auto t = typed_.find(name);
    if (t == typed_.end() || !t->second->has_shape()) {
      const std::string why = inference_error_.empty() ? "" : " (ONNX shape inference failed: " + inference_error_ + ")";
      node_error(not_static(what, name, "has no known shape") + why);
    }
    std::vector<int64_t> dims;
    for (const onnx::TensorShapeProto::Dimension& dim : t->second->shape().dim()) {
      if (!dim.has_dim_value() || dim.dim_value() < 0) {
        const std::string symbol = dim.has_dim_param() ? " ('" + dim.dim_param() + "')" : "";
        node_error(not_static(what, name, "has a dynamic dimension " + std::to_string(dims.size()) + symbol));
      }
      dims.push_back(dim.dim_value());
    }
    return dims;
  }

  DType element_type(const std::string& name, const std::string& what) const {
    if (const auto c = constants_.find(name); c != constants_.end()) return dtype_of(c->second->data_type(), what);
    return dtype_of(typed_.at(name)->elem_type(), what);  // static_shape() found it before
  }

  static void check_kernel_shape(const onnx::NodeProto& node, const std::vector<int64_t>& weights) {
    const std::vector<int64_t> kernel = ints(node, "kernel_shape");
    if (kernel.empty() || weights.size() < 2) return;
    if (kernel != std::vector<int64_t>(weights.begin() + 2, weights.end()))
      node_error("kernel_shape " + list_text(kernel) + " does not match the spatial sizes of W " + list_text(weights));
  }

  std::string path_;
  onnx::ModelProto model_;
  std::string inference_error_;
  std::map<std::string, const onnx::TypeProto_Tensor*> typed_;  // graph inputs, value_info, outputs
  std::map<std::string, const onnx::TensorProto*> constants_;    // initializers and Constant outputs
};

}  // namespace

std::vector<ImportedLayer> read_onnx(const std::string& path) { return OnnxModel(path).deconvolutions(); }

}  // namespace deconvjit::import
