// Fuzz target: the disk-cache entry decoder and validator on arbitrary bytes. The input is first resealed
// (both checksums recomputed) when its size fields allow it, so the fuzzer reaches the checks behind the
// checksums instead of stopping at them. Rejection is deconvjit::Error or std::runtime_error; the loaded
// code is never executed here (the library runs only code whose checksum and plan match its own request).
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "deconvjit/deconvjit.hpp"
#include "runtime/disk_cache.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace deconvjit::detail;
  std::vector<uint8_t> file(data, data + size);
  if (size > 0 && (data[0] & 1)) {  // half of the inputs as they are, half resealed
    try {
      seal_entry(file);
    } catch (const std::exception&) {
    }
  }
  try {
    const EntryClaims claims = read_claims(file);
    const EntryExpectation want = expectation_from_claims(claims);
    verify_entry(file, want);
  } catch (const std::runtime_error&) {  // deconvjit::Error derives from it too
  }
  return 0;
}
