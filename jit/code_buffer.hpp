// Executable memory with W^X: bytes are copied into a read-write mapping, which is then switched to
// read+execute before anything can run it. It is never writable and executable at once.
#pragma once

#include <cstddef>
#include <cstdint>

namespace deconvjit::jit {

class CodeBuffer {
 public:
  CodeBuffer(const uint8_t* bytes, size_t size);  // throws deconvjit::Error on failure
  ~CodeBuffer();
  CodeBuffer(const CodeBuffer&) = delete;
  CodeBuffer& operator=(const CodeBuffer&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;
};

}  // namespace deconvjit::jit
