// Fuzz target: the OpenVINO IR reader (`deconvjit warm model.xml`). The input is the .xml; its .bin is a
// fixed 64-byte file of small integers, so output_shape constants resolve. Rejection is deconvjit::Error
// (for the whole file) or a per-layer error string; any descriptor it yields must also survive resolve().
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "deconvjit/deconvjit.hpp"
#include "import/openvino_ir.hpp"

namespace {

std::string scratch_path(const char* ext) {
  return "/tmp/deconvjit_fuzz_ir_" + std::to_string(::getpid()) + ext;
}

void write_file(const std::string& path, const void* data, size_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string xml = scratch_path(".xml"), bin = scratch_path(".bin");
  static const bool bin_written = [] {
    int64_t v[8] = {1, 2, 5, 7, 9, 11, 13, 4};
    write_file(bin, v, sizeof v);
    return true;
  }();
  (void)bin_written;
  write_file(xml, data, size);
  try {
    for (const auto& layer : deconvjit::import::read_openvino_ir(xml)) {
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
