// Descriptors from an ONNX model (.onnx): every ConvTranspose node of the main graph. Built only when CMake
// finds Debian's libonnx-dev (DECONVJIT_WITH_ONNX); kept out of the core library, which never parses files.
#pragma once

#include <string>
#include <vector>

#include "import/openvino_ir.hpp"  // ImportedLayer

namespace deconvjit::import {

// Throws deconvjit::Error(Io) when the file cannot be read and Error(InvalidArgument) when it is not an ONNX
// model; a node that cannot become a descriptor (a dynamic shape, an unknown attribute) is an ImportedLayer
// carrying the reason, labelled "model.onnx:node_name".
std::vector<ImportedLayer> read_onnx(const std::string& path);

}  // namespace deconvjit::import
