// Executable memory with W^X. Two ways in, neither ever writable and executable at once:
// - copy: bytes are copied into a read-write anonymous mapping, which is then switched to read+execute
//   before anything can run it (the JIT's output);
// - file: a page-aligned range of an open file is mapped read+execute and private, never writable, so
//   nothing is copied and no mprotect is needed (the on-disk kernel cache). The caller checks the mapped
//   bytes before running them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace deconvjit::jit {

class CodeBuffer {
 public:
  CodeBuffer(const uint8_t* bytes, size_t size);  // throws deconvjit::Error on failure
  struct FromFile {};
  // `offset` must be a multiple of the page size and [offset, offset + size) inside the file; throws
  // deconvjit::Error on failure (for instance EPERM on a noexec mount).
  CodeBuffer(FromFile, int fd, uint64_t offset, size_t size);
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
