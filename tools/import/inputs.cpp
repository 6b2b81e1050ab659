#include "import/inputs.hpp"

#include <sys/stat.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#if DECONVJIT_HAVE_ONNX
#include "import/onnx_model.hpp"
#endif

namespace deconvjit::import {
namespace {

std::string extension(const std::string& path) {
  const size_t slash = path.rfind('/'), dot = path.rfind('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return "";
  std::string ext = path.substr(dot + 1);
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext;
}

bool blank(const std::string& line) { return line.find_first_not_of(" \t\r") == std::string::npos; }

}  // namespace

std::vector<ImportedLayer> read_jsonl(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(Error::Kind::Io, "cannot open '" + path + "': " + std::strerror(errno));
  std::vector<ImportedLayer> out;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (blank(line)) continue;
    ImportedLayer item;
    item.label = path + ":" + std::to_string(number);
    try {
      item.descriptor = descriptor_from_json(line);
      if (!item.descriptor->name.empty()) item.label += " (" + item.descriptor->name + ")";
    } catch (const std::exception& e) {
      item.error = e.what();
    }
    out.push_back(std::move(item));
  }
  if (in.bad()) throw Error(Error::Kind::Io, "cannot read '" + path + "'");
  return out;
}

std::vector<ImportedLayer> read_inputs(const std::vector<std::string>& paths) {
  std::vector<ImportedLayer> all;
  for (const std::string& path : paths) {
    // An ifstream opens a directory and reads nothing from it: say what it is instead of importing nothing.
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
      throw Error(Error::Kind::InvalidArgument, "'" + path + "' is a directory, expected a model or a JSON Lines file");
    const std::string ext = extension(path);
    std::vector<ImportedLayer> items;
    if (ext == "jsonl" || ext == "json" || ext == "ndjson") {
      items = read_jsonl(path);
    } else if (ext == "xml") {
      items = read_openvino_ir(path);
    } else if (ext == "onnx") {
#if DECONVJIT_HAVE_ONNX
      items = read_onnx(path);
#else
      throw Error(Error::Kind::Unsupported, "'" + path + "': this build of deconvjit has no ONNX support: rebuild "
                                            "it with Debian's libonnx-dev and libprotobuf-dev installed, convert "
                                            "the model to OpenVINO IR, or list its layers as JSON Lines");
#endif
    } else {
      throw Error(Error::Kind::InvalidArgument,
                  "'" + path + "': unknown input type (expected .jsonl, .json, .ndjson, .xml or .onnx)");
    }
    all.insert(all.end(), std::make_move_iterator(items.begin()), std::make_move_iterator(items.end()));
  }
  return all;
}

}  // namespace deconvjit::import
