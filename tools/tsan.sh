#!/usr/bin/env bash
# Builds the test binary with ThreadSanitizer and runs the concurrency tests under it.
#
#   bash tools/tsan.sh            configure + build build-tsan/, then run the concurrency tests
#   bash tools/tsan.sh --all      ... then run the whole gtest binary under TSan (slow: minutes)
#
# What runs: the kernel cache under 16 contending threads (single-flight compilation, LRU churn), one Kernel
# executed from several std::threads and from inside TBB tasks, and bitwise equality across task_arena
# sizes. The generated machine code is not instrumented (TSan cannot see its loads and stores); the
# library's C++ around it (cache, executor, scratch buffers, packing) is.
#
# oneTBB comes from the system and is not instrumented either: TSan does not see the synchronisation
# inside libtbb, which can make hand-offs through TBB look like races. tools/tsan.supp lists the
# suppressions for such reports; it must only ever name TBB internals, never deconvjit code.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

build=build-tsan
filter='KernelCache.Concurrent*:Cases/Threads.*:ThreadLimits.*:Layouts/ConcurrentExecute.*'
filter+=':CodeMemory.NeverWritableAndExecutableWhileCompiling'
if [ "${1:-}" = "--all" ]; then filter='*'; fi

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS=-fsanitize=thread -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread
cmake --build "$build" -j"$(nproc)" --target deconvjit_tests

# halt_on_error: the first report fails the run. second_deadlock_stack: better lock-order reports.
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/tools/tsan.supp ${TSAN_OPTIONS:-}"
export DECONVJIT_CACHE_DIR=""  # no disk cache: these tests are about the in-memory cache and execution
status=0
"$build/tests/deconvjit_tests" --gtest_filter="$filter" || status=$?
if [ "$status" -ne 0 ]; then
  echo "tsan.sh: FAILED (exit $status): a TSan report (see above) or a failing test" >&2
  exit "$status"
fi
echo "tsan.sh: passed, no ThreadSanitizer reports"
