// Float buffers that end exactly at an inaccessible page (and start after another one), so a kernel that
// reads or writes one element past an operand faults at once instead of reading a neighbour's memory.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <new>
#include <vector>

namespace deconvjit::testing {

class GuardedBuffer {
 public:
  explicit GuardedBuffer(size_t floats) : floats_(floats) {
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    const size_t data = (floats * sizeof(float) + page - 1) / page * page;
    bytes_ = data + 2 * page;
    void* m = ::mmap(nullptr, bytes_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw std::bad_alloc();
    base_ = static_cast<char*>(m);
    if (::mprotect(base_ + page, data, PROT_READ | PROT_WRITE) != 0) {
      ::munmap(base_, bytes_);
      throw std::bad_alloc();
    }
    // The last element touches the trailing guard page: the data is then 4-byte aligned only, as a
    // caller's buffer may be.
    data_ = reinterpret_cast<float*>(base_ + page + data) - floats;
  }
  GuardedBuffer(size_t floats, const std::vector<float>& init) : GuardedBuffer(floats) {
    std::memcpy(data_, init.data(), std::min(floats, init.size()) * sizeof(float));
  }
  ~GuardedBuffer() { ::munmap(base_, bytes_); }
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;

  float* data() { return data_; }
  const float* data() const { return data_; }
  size_t size() const { return floats_; }

 private:
  size_t floats_, bytes_ = 0;
  char* base_ = nullptr;
  float* data_ = nullptr;
};

}  // namespace deconvjit::testing
