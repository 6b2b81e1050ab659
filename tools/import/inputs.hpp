// Descriptor inputs for ahead-of-time compilation, chosen by file extension: JSON Lines (.jsonl, .json,
// .ndjson), OpenVINO IR (.xml) and, when built with libonnx-dev, ONNX (.onnx). Shared by `deconvjit warm`
// and `deconvjit cache bench`.
#pragma once

#include <string>
#include <vector>

#include "import/openvino_ir.hpp"

namespace deconvjit::import {

// Every descriptor of every input, in order. A file that cannot be read, or has an unknown extension,
// throws deconvjit::Error; a bad line or layer becomes an ImportedLayer carrying its error.
std::vector<ImportedLayer> read_inputs(const std::vector<std::string>& paths);

// One JSON descriptor per non-blank line; labels are "file:line" (plus the name when it has one).
std::vector<ImportedLayer> read_jsonl(const std::string& path);

}  // namespace deconvjit::import
