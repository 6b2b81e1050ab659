#include "runtime/kernel_cache.hpp"

#include <cstdlib>
#include <future>
#include <list>
#include <mutex>
#include <unordered_map>

namespace deconvjit::detail {

struct KernelCache::Impl {
  struct Entry {
    std::shared_future<KernelPtr> future;
    std::list<std::string>::iterator lru;  // position in `order`
  };
  mutable std::mutex mu;
  std::unordered_map<std::string, Entry> map;
  std::list<std::string> order;  // most recently used first
  std::unordered_map<std::string, std::string> aliases;  // bounded: cleared when it outgrows the cache
  size_t capacity = 1024;
  uint64_t hits = 0, misses = 0;

  void evict_locked() {
    while (map.size() > capacity && !order.empty()) {
      map.erase(order.back());
      order.pop_back();
    }
  }
};

KernelCache::KernelCache() : impl_(std::make_shared<Impl>()) {
  if (const char* v = std::getenv("DECONVJIT_CACHE_CAPACITY"); v && *v) {
    char* end = nullptr;
    const unsigned long long c = std::strtoull(v, &end, 10);
    if (end && *end == '\0') impl_->capacity = static_cast<size_t>(c);
  }
}

KernelCache& KernelCache::instance() {
  static KernelCache cache;
  return cache;
}

CacheLookup KernelCache::get_or_build(const std::string& key, const std::function<KernelPtr()>& build) {
  Impl& s = *impl_;
  std::promise<KernelPtr> promise;
  {
    std::unique_lock<std::mutex> lock(s.mu);
    if (s.capacity == 0) {
      ++s.misses;
      lock.unlock();
      return {build(), false};
    }
    auto it = s.map.find(key);
    if (it != s.map.end()) {
      ++s.hits;
      s.order.splice(s.order.begin(), s.order, it->second.lru);
      auto fut = it->second.future;
      lock.unlock();
      return {fut.get(), true};  // waits if another thread is still compiling it
    }
    ++s.misses;
    s.order.push_front(key);
    s.map.emplace(key, Impl::Entry{promise.get_future().share(), s.order.begin()});
    s.evict_locked();
  }
  try {
    KernelPtr k = build();
    promise.set_value(k);
    return {k, false};
  } catch (...) {
    // A failed build is not cached: waiters see the error, the next request tries again.
    promise.set_exception(std::current_exception());
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.map.find(key);
    if (it != s.map.end()) {
      s.order.erase(it->second.lru);
      s.map.erase(it);
    }
    throw;
  }
}

std::optional<std::string> KernelCache::alias(const std::string& raw) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->aliases.find(raw);
  if (it == impl_->aliases.end()) return std::nullopt;
  return it->second;
}

void KernelCache::add_alias(const std::string& raw, const std::string& key) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->aliases.size() >= 4 * impl_->capacity + 16) impl_->aliases.clear();
  impl_->aliases.emplace(raw, key);
}

CacheStats KernelCache::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return {impl_->hits, impl_->misses, impl_->map.size(), impl_->capacity};
}

void KernelCache::clear() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->map.clear();
  impl_->order.clear();
  impl_->aliases.clear();
  impl_->hits = impl_->misses = 0;
}

void KernelCache::set_capacity(size_t capacity) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->capacity = capacity;
  impl_->evict_locked();
}

size_t KernelCache::capacity() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->capacity;
}

}  // namespace deconvjit::detail
