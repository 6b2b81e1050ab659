// Descriptors from an OpenVINO IR model (.xml with its .bin): every ConvolutionBackpropData and
// GroupConvolutionBackpropData layer. Kept out of the core library, which never parses files.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "deconvjit/deconvjit.hpp"

namespace deconvjit::import {

// One layer: its descriptor, or why it cannot become one (a dynamic shape, a non-constant output_shape).
struct ImportedLayer {
  std::string label;  // "model.xml:layer_name"
  std::optional<Descriptor> descriptor;
  std::string error;
};

// Throws deconvjit::Error(Io) when the file cannot be read and Error(InvalidArgument) when it is not an IR
// network; problems of single layers are reported in their ImportedLayer instead.
std::vector<ImportedLayer> read_openvino_ir(const std::string& xml_path);

}  // namespace deconvjit::import
