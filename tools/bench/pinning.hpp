// Thread placement while timing (`deconvjit bench`, `tune`, and the Python module's Kernel.time). On a small
// machine the scheduler at times left two of our threads on one CPU for a whole batch, and a kernel then
// ran at half speed: oneTBB's worker, woken after bench's quiet waits, beside the caller
// (ternausnet_center NXC 2.6 -> 3.7 ms, hifigan_v3_up1 0.64 -> 1.16, Zen 4, 2 threads); and with the
// workers pinned, the caller beside a worker (NCX rows of a holdout set at 1.3-2.1x their in-process
// time: ho41 1.53 against 0.79 ms). So slot i of the arena runs on the i-th CPU the process may use: the
// workers through an observer, the caller (slot 0) while our kernels run. oneDNN's runs give the caller
// its mask back: OpenMP's threads inherit the caller's mask when they start, and pinning them too made
// oneDNN 3-5x slower.
#pragma once

#include <sched.h>

#include <tbb/task_arena.h>
#include <tbb/task_scheduler_observer.h>

namespace deconvjit::bench {

// The i-th CPU (modulo their count) set in `mask`, or -1 when it is empty.
inline int nth_cpu(const cpu_set_t& mask, int i) {
  const int count = CPU_COUNT(&mask);
  if (count == 0) return -1;
  int left = i % count;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &mask) && left-- == 0) return cpu;
  return -1;
}

inline void pin_to(int cpu) {
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof set, &set);  // best effort: a refusal leaves the thread where it was
}

// Pins each oneTBB worker of the arena to the CPU of its slot (1, 2, ...) among those the constructing
// thread may use (a `taskset` around the tool is honoured).
class WorkerPins : public tbb::task_scheduler_observer {
 public:
  explicit WorkerPins(tbb::task_arena& a) : tbb::task_scheduler_observer(a) {
    CPU_ZERO(&mask_);
    if (sched_getaffinity(0, sizeof mask_, &mask_) == 0) observe(true);
  }
  ~WorkerPins() override { observe(false); }
  void on_scheduler_entry(bool worker) override {
    if (worker) pin_to(nth_cpu(mask_, tbb::this_task_arena::current_thread_index()));
  }

 private:
  cpu_set_t mask_;
};

// Pins the calling thread to slot 0's CPU, or gives it back the mask it had before its first pin.
inline void pin_caller(bool pinned) {
  thread_local cpu_set_t original;
  thread_local bool saved = false;
  thread_local bool is_pinned = false;
  if (pinned == is_pinned) return;
  if (!saved) saved = sched_getaffinity(0, sizeof original, &original) == 0;
  if (!saved) return;
  if (pinned)
    pin_to(nth_cpu(original, 0));
  else
    sched_setaffinity(0, sizeof original, &original);
  is_pinned = pinned;
}

// Gives the caller its mask back when the scope ends, however it ends.
struct CallerUnpin {
  CallerUnpin() = default;
  CallerUnpin(const CallerUnpin&) = delete;
  CallerUnpin& operator=(const CallerUnpin&) = delete;
  ~CallerUnpin() { pin_caller(false); }
};

}  // namespace deconvjit::bench
