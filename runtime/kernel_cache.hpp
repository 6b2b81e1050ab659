// In-memory LRU of compiled kernels with single-flight compilation: concurrent requests for one key
// compile once while the others wait; different keys compile in parallel (outside the lock).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "runtime/compiled_kernel.hpp"

namespace deconvjit::detail {

using KernelPtr = std::shared_ptr<const CompiledKernel>;

struct CacheLookup {
  KernelPtr kernel;
  bool hit = false;
};

class KernelCache {
 public:
  static KernelCache& instance();
  CacheLookup get_or_build(const std::string& key, const std::function<KernelPtr()>& build);
  CacheStats stats() const;
  // Raw descriptor bytes -> cache key, remembered so that repeated lookups skip validation.
  std::optional<std::string> alias(const std::string& raw) const;
  void add_alias(const std::string& raw, const std::string& key);
  void clear();
  void set_capacity(size_t capacity);
  size_t capacity() const;

 private:
  KernelCache();
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace deconvjit::detail
