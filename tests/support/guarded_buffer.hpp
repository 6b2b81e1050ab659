// Buffers that end exactly at an inaccessible page (and start after another one), so a kernel that reads or
// writes one element past an operand faults at once instead of reading a neighbour's memory. Elements are
// floats, or bytes for operands of any type (their count a multiple of the element size, which keeps the
// data aligned to it).
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <vector>

namespace deconvjit::testing {

template <class T>
class GuardedArray {
 public:
  explicit GuardedArray(size_t count) : count_(count) {
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    const size_t data = (count * sizeof(T) + page - 1) / page * page;
    bytes_ = data + 2 * page;
    void* m = ::mmap(nullptr, bytes_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw std::bad_alloc();
    base_ = static_cast<char*>(m);
    if (::mprotect(base_ + page, data, PROT_READ | PROT_WRITE) != 0) {
      ::munmap(base_, bytes_);
      throw std::bad_alloc();
    }
    // The last element touches the trailing guard page: float data is then 4-byte aligned only, as a
    // caller's buffer may be.
    data_ = reinterpret_cast<T*>(base_ + page + data) - count;
  }
  GuardedArray(size_t count, const std::vector<T>& init) : GuardedArray(count) {
    std::memcpy(data_, init.data(), std::min(count, init.size()) * sizeof(T));
  }
  ~GuardedArray() { ::munmap(base_, bytes_); }
  GuardedArray(const GuardedArray&) = delete;
  GuardedArray& operator=(const GuardedArray&) = delete;

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return count_; }

 private:
  size_t count_, bytes_ = 0;
  char* base_ = nullptr;
  T* data_ = nullptr;
};

using GuardedBuffer = GuardedArray<float>;
using GuardedBytes = GuardedArray<uint8_t>;

}  // namespace deconvjit::testing
