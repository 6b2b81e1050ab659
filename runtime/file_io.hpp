// Small POSIX file helpers shared by the library (disk cache) and the tool (run's output files).
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

namespace deconvjit::detail {

// write(2) until done; retries interrupted writes. False on any other failure.
inline bool write_all(int fd, const void* data, size_t left) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    left -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace deconvjit::detail
