#include "jit/code_buffer.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "deconvjit/deconvjit.hpp"

namespace deconvjit::jit {

CodeBuffer::CodeBuffer(const uint8_t* bytes, size_t size) : size_(size) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  mapped_ = (size + page - 1) / page * page;
  if (mapped_ == 0) mapped_ = page;
  void* p = mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    throw Error(Error::Kind::Internal, std::string("mmap for code failed: ") + std::strerror(errno));
  std::memcpy(p, bytes, size);
  if (mprotect(p, mapped_, PROT_READ | PROT_EXEC) != 0) {
    const int err = errno;
    munmap(p, mapped_);
    throw Error(Error::Kind::Internal, std::string("mprotect(R+X) failed: ") + std::strerror(err));
  }
  data_ = static_cast<uint8_t*>(p);
}

CodeBuffer::~CodeBuffer() {
  if (data_) munmap(data_, mapped_);
}

}  // namespace deconvjit::jit
