#include "jit/code_buffer.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "deconvjit/deconvjit.hpp"

namespace deconvjit::jit {
namespace {

size_t page_bytes() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

size_t round_to_pages(size_t size) {
  const size_t page = page_bytes();
  const size_t mapped = (size + page - 1) / page * page;
  return mapped == 0 ? page : mapped;
}

[[noreturn]] void fail(const char* what, int err) {
  throw Error(Error::Kind::Internal, std::string(what) + " failed: " + std::strerror(err));
}

}  // namespace

CodeBuffer::CodeBuffer(const uint8_t* bytes, size_t size) : size_(size), mapped_(round_to_pages(size)) {
  void* p = mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) fail("mmap for code", errno);
  std::memcpy(p, bytes, size);
  if (mprotect(p, mapped_, PROT_READ | PROT_EXEC) != 0) {
    const int err = errno;
    munmap(p, mapped_);
    fail("mprotect(R+X)", err);
  }
  data_ = static_cast<uint8_t*>(p);
}

// A private mapping that is never written uses the page cache's own pages: no copy. It does not freeze
// the file: an in-place rewrite would show through (the disk cache's writers only rename new files over
// entries, which leaves a mapped file untouched).
CodeBuffer::CodeBuffer(FromFile, int fd, uint64_t offset, size_t size)
    : size_(size), mapped_(round_to_pages(size)) {
  if (offset % page_bytes() != 0) throw Error(Error::Kind::Internal, "code offset is not page-aligned");
  void* p = mmap(nullptr, mapped_, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, static_cast<off_t>(offset));
  if (p == MAP_FAILED) fail("mmap of cached code", errno);
  data_ = static_cast<uint8_t*>(p);
}

CodeBuffer::~CodeBuffer() {
  if (data_) munmap(data_, mapped_);
}

}  // namespace deconvjit::jit
