#include "runtime/memory.hpp"

#include <sys/resource.h>
#include <sys/sysinfo.h>

#include <algorithm>
#include <cstdio>

#include "deconvjit/deconvjit.hpp"

namespace deconvjit::detail {
namespace {

uint64_t mul_sat(uint64_t a, uint64_t b) {
  uint64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

uint64_t rlimit_bytes(int resource) {
  struct rlimit rl {};
  if (::getrlimit(resource, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return UINT64_MAX;
  return rl.rlim_cur;
}

std::string human(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

}  // namespace

uint64_t memory_limit_bytes() {
  uint64_t machine = UINT64_MAX;
  struct sysinfo si {};
  if (::sysinfo(&si) == 0)
    machine = mul_sat(add_bytes({si.totalram, si.totalswap}), std::max<uint64_t>(si.mem_unit, 1));
  return std::min({machine, rlimit_bytes(RLIMIT_AS), rlimit_bytes(RLIMIT_DATA)});
}

uint64_t add_bytes(std::initializer_list<uint64_t> parts) {
  uint64_t sum = 0;
  for (uint64_t p : parts)
    if (__builtin_add_overflow(sum, p, &sum)) return UINT64_MAX;
  return sum;
}

uint64_t float_bytes(uint64_t floats) { return mul_sat(floats, sizeof(float)); }

uint64_t size_product(std::initializer_list<int64_t> factors) {
  uint64_t r = 1;
  for (int64_t f : factors) r = mul_sat(r, static_cast<uint64_t>(std::max<int64_t>(f, 0)));
  return r;
}

void require_memory(uint64_t bytes, const std::string& what) {
  const uint64_t limit = memory_limit_bytes();
  if (bytes <= limit) return;
  throw Error(Error::Kind::InvalidDescriptor,
              what + " needs " + std::to_string(bytes) + " bytes (" + human(bytes) +
                  "), more than this machine's memory (" + std::to_string(limit) + " bytes, " + human(limit) +
                  ": RAM + swap, or the process's memory limit)");
}

std::unique_ptr<float[]> allocate_floats(size_t floats, const char* what) {
  require_memory(float_bytes(floats), what);
  return std::unique_ptr<float[]>(new float[floats]);
}

}  // namespace deconvjit::detail
