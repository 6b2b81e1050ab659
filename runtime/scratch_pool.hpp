// The executor's scratch buffers that outlive a parallel loop (whole-tensor copies of src and dst, col's
// buffer), kept in a small pool (runtime/executor.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "runtime/memory.hpp"

namespace deconvjit::detail {

// Buffers that live across a parallel loop (copies of src and dst). They cannot be thread-local: while
// a thread waits in tbb::parallel_for, TBB may run another execute() on it, which would reuse the same
// buffer. A small pool keeps the allocations (and their page faults) out of the steady state.
class ScratchPool {
 public:
  static constexpr size_t kLine = 64;
  class Lease {
   public:
    Lease(ScratchPool* pool, std::unique_ptr<float[]> buf, size_t cap)
        : pool_(pool), buf_(std::move(buf)), cap_(cap) {}
    Lease(Lease&& o) noexcept : pool_(o.pool_), buf_(std::move(o.buf_)), cap_(o.cap_) {}
    Lease& operator=(Lease&&) = delete;
    ~Lease() {
      if (buf_) pool_->give_back(std::move(buf_), cap_);
    }
    // On a cache line: the allocation has a line to spare (take), and operator new[] aligns to 16 bytes
    // only. A copy 16 bytes off a line split every vector load of the dot family reading it and every
    // vector store of gemm writing the scratch dst (Zen 4, NCX, 2 threads, in one process: segan_deconv11
    // 0.160 -> 0.110 ms, fcn8s_upscore8 9.26 -> 8.38, fcn32s_nyud_upscore 25.8 -> 23.4; the scratch route
    // 1.02x geomean over 25 layers, the dot family's source copy 1.10x over 4; NXC and the row buffer
    // 1.00; docs/data/scratch_alignment_*_zen4_2t.jsonl).
    float* get() const {
      const auto misalign = reinterpret_cast<uintptr_t>(buf_.get()) % kLine;
      return buf_.get() + (misalign ? (kLine - misalign) / sizeof(float) : 0);
    }
    template <typename T>
    T* as() const {
      return reinterpret_cast<T*>(get());
    }

   private:
    ScratchPool* pool_;
    std::unique_ptr<float[]> buf_;
    size_t cap_;
  };

  static ScratchPool& instance() {
    static ScratchPool pool;
    return pool;
  }

  // Best fit: with first fit, a small src copy could take the large buffer and send the dst copy that
  // follows to a fresh allocation (and its page faults) on every call.
  // Room for `elements` of type T.
  template <typename T>
  Lease take_for(size_t elements) {
    return take((elements * sizeof(T) + sizeof(float) - 1) / sizeof(float));
  }
  Lease take(size_t floats) {
    floats += kLine / sizeof(float);  // room to start on a cache line (Lease::get)
    {
      std::lock_guard<std::mutex> lock(mu_);
      size_t best = free_.size();
      for (size_t i = 0; i < free_.size(); ++i)
        if (free_[i].second >= floats && (best == free_.size() || free_[i].second < free_[best].second))
          best = i;
      if (best < free_.size()) {
        auto entry = std::move(free_[best]);
        free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(best));
        return Lease{this, std::move(entry.first), entry.second};
      }
    }
    return Lease{this, allocate_floats(floats, "execute's scratch buffer"), floats};
  }

 private:
  static constexpr size_t kKeep = 8;
  void give_back(std::unique_ptr<float[]> buf, size_t cap) {
    std::lock_guard<std::mutex> lock(mu_);
    if (free_.size() < kKeep) free_.emplace_back(std::move(buf), cap);
  }
  std::mutex mu_;
  std::vector<std::pair<std::unique_ptr<float[]>, size_t>> free_;
};

}  // namespace deconvjit::detail
