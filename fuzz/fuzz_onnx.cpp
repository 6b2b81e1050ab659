// Fuzz target: the ONNX reader (`deconvjit warm model.onnx`): protobuf parsing, shape inference and the
// ConvTranspose attribute checks. Rejection is deconvjit::Error or a per-node error string; descriptors
// it yields must survive resolve() (or be rejected by it with deconvjit::Error).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "deconvjit/deconvjit.hpp"
#include "import/onnx_model.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/deconvjit_fuzz_onnx_" + std::to_string(::getpid()) + ".onnx";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  try {
    for (const auto& layer : deconvjit::import::read_onnx(path)) {
      if (!layer.descriptor) continue;
      try {
        deconvjit::resolve(*layer.descriptor);
      } catch (const deconvjit::Error&) {
      }
    }
  } catch (const deconvjit::Error&) {
  }
  return 0;
}
