// Refusing work that cannot fit in memory before allocating anything: a valid problem whose tensors need
// more bytes than the machine has is the user's to fix, and deserves a message saying how many, not
// std::bad_alloc from the middle of a run (or, under AddressSanitizer, an abort).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>

namespace deconvjit::detail {

// The most this process can hope to allocate: RAM + swap, capped by RLIMIT_AS and RLIMIT_DATA.
uint64_t memory_limit_bytes();

// Sum of byte counts, saturating at UINT64_MAX instead of wrapping.
uint64_t add_bytes(std::initializer_list<uint64_t> parts);
// `floats` f32 elements in bytes, saturating.
uint64_t float_bytes(uint64_t floats);
// Product of non-negative sizes, saturating at UINT64_MAX (which no require_memory() accepts).
uint64_t size_product(std::initializer_list<int64_t> factors);

// Throws Error(InvalidDescriptor) "<what> needs N bytes (x GiB), more than this machine's memory (...)"
// when `bytes` exceeds memory_limit_bytes().
void require_memory(uint64_t bytes, const std::string& what);

// new float[floats] after require_memory(float_bytes(floats), what).
std::unique_ptr<float[]> allocate_floats(size_t floats, const char* what);

}  // namespace deconvjit::detail
