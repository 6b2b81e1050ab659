// Keeps a test about the JIT: while alive, no kernel is written to (or loaded from) the user's on-disk
// cache (DECONVJIT_CACHE_DIR set but empty disables it); the previous value comes back afterwards.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace deconvjit::testing {

class NoDiskCache {
 public:
  NoDiskCache() {
    if (const char* v = std::getenv("DECONVJIT_CACHE_DIR")) saved_ = v;
    setenv("DECONVJIT_CACHE_DIR", "", 1);
  }
  ~NoDiskCache() {
    if (saved_)
      setenv("DECONVJIT_CACHE_DIR", saved_->c_str(), 1);
    else
      unsetenv("DECONVJIT_CACHE_DIR");
  }
  NoDiskCache(const NoDiskCache&) = delete;
  NoDiskCache& operator=(const NoDiskCache&) = delete;

 private:
  std::optional<std::string> saved_;
};

}  // namespace deconvjit::testing
