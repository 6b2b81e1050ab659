#include "import/openvino_ir.hpp"

#include <cstring>
#include <fstream>
#include <pugixml.hpp>
#include <stdexcept>

#include "runtime/json_limits.hpp"

namespace deconvjit::import {
namespace {

[[noreturn]] void layer_error(const std::string& why) { throw std::runtime_error(why); }

int64_t parse_int(const std::string& text, const std::string& what) {
  size_t used = 0;
  int64_t v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  // Trailing blanks are tolerated; anything else (a '?' or a range of a dynamic dimension) is not.
  if (used == 0 || text.find_first_not_of(" \t\r\n", used) != std::string::npos)
    layer_error(what + " '" + detail::text_excerpt(text) + "' is not an integer");
  return v;
}

// "1,1" -> {1, 1}; an empty attribute is an empty list (the descriptor's default).
std::vector<int64_t> parse_list(const pugi::xml_node& data, const char* name) {
  std::vector<int64_t> out;
  const std::string text = data.attribute(name).as_string();
  size_t start = 0;
  while (start < text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    out.push_back(parse_int(text.substr(start, comma - start), std::string("attribute ") + name));
    start = comma + 1;
  }
  return out;
}

std::vector<int64_t> port_dims(const pugi::xml_node& port, const char* what) {
  std::vector<int64_t> dims;
  for (const pugi::xml_node& dim : port.children("dim")) {
    const int64_t v = parse_int(dim.child_value(), std::string(what) + " dimension");
    if (v < 0) layer_error(std::string(what) + " has a dynamic dimension; only static shapes compile ahead of time");
    dims.push_back(v);
  }
  if (dims.empty()) layer_error(std::string(what) + " port has no <dim> elements");
  return dims;
}

AutoPad parse_auto_pad(const std::string& s) {
  if (s.empty() || s == "explicit" || s == "notset" || s == "none") return AutoPad::Explicit;
  if (s == "valid") return AutoPad::Valid;
  if (s == "same_upper") return AutoPad::SameUpper;
  if (s == "same_lower") return AutoPad::SameLower;
  layer_error("unknown auto_pad '" + s + "'");
}

// An IR element type in either spelling: port precision ("FP16") or element_type ("f16").
DType parse_element_type(const std::string& t) {
  if (t == "FP32" || t == "f32") return DType::f32;
  if (t == "FP16" || t == "f16") return DType::f16;
  if (t == "BF16" || t == "bf16") return DType::bf16;
  layer_error("element type " + t + " is not a floating-point type this library knows (f32, f16, bf16)");
}

class IrModel {
 public:
  IrModel(const std::string& xml_path) : xml_path_(xml_path) {
    const pugi::xml_parse_result r = doc_.load_file(xml_path.c_str());
    if (r.status == pugi::status_file_not_found || r.status == pugi::status_io_error)
      throw Error(Error::Kind::Io, "cannot read '" + xml_path + "'");
    if (!r) throw Error(Error::Kind::InvalidArgument, "'" + xml_path + "' is not valid XML: " + r.description());
    net_ = doc_.child("net");
    if (!net_) throw Error(Error::Kind::InvalidArgument, "'" + xml_path + "' is not an OpenVINO IR (no <net>)");
    const size_t dot = xml_path.rfind('.');
    bin_path_ = (dot == std::string::npos ? xml_path : xml_path.substr(0, dot)) + ".bin";
  }

  std::vector<ImportedLayer> deconvolutions() const {
    std::vector<ImportedLayer> out;
    for (const pugi::xml_node& layer : net_.child("layers").children("layer")) {
      const std::string type = layer.attribute("type").as_string();
      if (type != "ConvolutionBackpropData" && type != "GroupConvolutionBackpropData") continue;
      ImportedLayer item;
      item.label = xml_path_ + ":" + layer.attribute("name").as_string();
      try {
        item.descriptor = descriptor_of(layer, type == "GroupConvolutionBackpropData");
      } catch (const std::exception& e) {
        item.error = e.what();
      }
      out.push_back(std::move(item));
    }
    return out;
  }

 private:
  Descriptor descriptor_of(const pugi::xml_node& layer, bool grouped) const {
    std::vector<pugi::xml_node> ports;
    for (const pugi::xml_node& port : layer.child("input").children("port")) ports.push_back(port);
    if (ports.size() < 2 || ports.size() > 3)
      layer_error("has " + std::to_string(ports.size()) + " inputs, expected 2 or 3");
    const pugi::xml_node data = layer.child("data");
    Descriptor d;
    d.name = layer.attribute("name").as_string();
    d.src = port_dims(ports[0], "data");
    d.weights = port_dims(ports[1], "weights");
    d.strides = parse_list(data, "strides");
    d.dilations = parse_list(data, "dilations");
    d.pads_begin = parse_list(data, "pads_begin");
    d.pads_end = parse_list(data, "pads_end");
    d.output_padding = parse_list(data, "output_padding");
    d.auto_pad = parse_auto_pad(data.attribute("auto_pad").as_string());
    if (grouped) d.weights_format = WeightsFormat::GOIX;
    d.dtype = element_type(layer, ports[0]);
    d.weights_dtype = element_type(layer, ports[1]);
    if (ports.size() == 3) d.output_shape = constant_input(layer, ports[2]);
    return d;
  }

  pugi::xml_node layer_by_id(const std::string& id) const {
    return net_.child("layers").find_child_by_attribute("layer", "id", id.c_str());
  }

  // The <edge> into `port` of `layer`; empty when none.
  pugi::xml_node edge_into(const pugi::xml_node& layer, const pugi::xml_node& port) const {
    const std::string id = layer.attribute("id").as_string(), port_id = port.attribute("id").as_string();
    pugi::xml_node edge;
    for (const pugi::xml_node& e : net_.child("edges").children("edge"))
      if (id == e.attribute("to-layer").as_string() && port_id == e.attribute("to-port").as_string()) edge = e;
    return edge;
  }

  // The element type of an input: the port's `precision` (IR v10 and v11 write it), else what the layer
  // feeding it declares (`element_type` of a Parameter or Const, `destination_type` of a Convert, or the
  // precision of its output port), else f32, the type of IRs that name none.
  DType element_type(const pugi::xml_node& layer, const pugi::xml_node& port) const {
    const std::string precision = port.attribute("precision").as_string();
    if (!precision.empty()) return parse_element_type(precision);
    const pugi::xml_node edge = edge_into(layer, port);
    const pugi::xml_node from = edge ? layer_by_id(edge.attribute("from-layer").as_string()) : pugi::xml_node();
    if (!from) return DType::f32;
    const pugi::xml_node data = from.child("data");
    for (const char* attribute : {"element_type", "destination_type"}) {
      const std::string t = data.attribute(attribute).as_string();
      if (!t.empty()) return parse_element_type(t);
    }
    const pugi::xml_node out =
        from.child("output").find_child_by_attribute("port", "id", edge.attribute("from-port").as_string());
    const std::string out_precision = out.attribute("precision").as_string();
    return out_precision.empty() ? DType::f32 : parse_element_type(out_precision);
  }

  // The values of the Const layer feeding `port` of `layer`, through <edges> and the .bin file.
  std::vector<int64_t> constant_input(const pugi::xml_node& layer, const pugi::xml_node& port) const {
    const pugi::xml_node edge = edge_into(layer, port);
    if (!edge) layer_error("output_shape (port " + std::string(port.attribute("id").as_string()) +
                           ") is not connected in <edges>");
    const pugi::xml_node src = layer_by_id(edge.attribute("from-layer").as_string());
    const std::string type = src.attribute("type").as_string();
    if (type != "Const" && type != "Constant")
      layer_error("output_shape comes from layer '" + std::string(src.attribute("name").as_string()) + "' of type " +
                  (type.empty() ? "?" : type) + "; only a Const can be compiled ahead of time");
    return read_constant(src.child("data"));
  }

  std::vector<int64_t> read_constant(const pugi::xml_node& data) const {
    const std::string et = data.attribute("element_type").as_string();
    const int width = (et == "i64" || et == "u64") ? 8 : (et == "i32" || et == "u32") ? 4 : 0;
    if (width == 0) layer_error("output_shape constant has element type '" + et + "', expected i64 or i32");
    const int64_t offset = parse_int(data.attribute("offset").as_string(), "Const offset");
    const int64_t size = parse_int(data.attribute("size").as_string(), "Const size");
    if (offset < 0 || size <= 0 || size % width != 0 || size > 64 * 8)
      layer_error("output_shape constant has offset " + std::to_string(offset) + " and size " + std::to_string(size));
    std::ifstream bin(bin_path_, std::ios::binary);
    if (!bin) layer_error("cannot open the weights file '" + bin_path_ + "'");
    std::vector<char> raw(static_cast<size_t>(size));
    bin.seekg(offset);
    if (!bin.read(raw.data(), size)) layer_error("'" + bin_path_ + "' ends before the output_shape constant");
    std::vector<int64_t> out;
    for (int64_t i = 0; i < size; i += width) {
      if (width == 8) {
        uint64_t v;
        std::memcpy(&v, raw.data() + i, 8);  // IR stores constants little-endian, like x86-64
        // A u64 above INT64_MAX would read as a negative size; say what it really is.
        if (et == "u64" && v > static_cast<uint64_t>(INT64_MAX))
          layer_error("output_shape[" + std::to_string(i / 8) + "] = " + std::to_string(v) +
                      " (u64) is out of the 64-bit signed range");
        out.push_back(static_cast<int64_t>(v));
      } else {
        int32_t v;
        std::memcpy(&v, raw.data() + i, 4);
        out.push_back(et == "u32" ? static_cast<int64_t>(static_cast<uint32_t>(v)) : v);
      }
    }
    return out;
  }

  std::string xml_path_, bin_path_;
  pugi::xml_document doc_;
  pugi::xml_node net_;
};

}  // namespace

std::vector<ImportedLayer> read_openvino_ir(const std::string& xml_path) {
  return IrModel(xml_path).deconvolutions();
}

}  // namespace deconvjit::import
