#!/usr/bin/env bash
# Builds the test binary with ThreadSanitizer and runs the concurrency tests under it.
#
#   bash tools/tsan.sh               oneTBB built with TSan (once, cached), then the concurrency tests
#   bash tools/tsan.sh --all         ... then the whole gtest binary (slow: many minutes)
#   bash tools/tsan.sh --system-tbb  no oneTBB build: only the tests whose threads never hand work over
#                                    through TBB (kernel cache, code memory); see below why
#
# What runs: the kernel cache under 16 contending threads (single-flight compilation, LRU churn while
# clearing and resizing), one Kernel executed from several std::threads and from inside TBB tasks, a
# caller's task_arena(1), and bitwise equality across task_arena sizes. The generated machine code is not
# instrumented (TSan cannot see its loads and stores); the library's C++ around it (cache, executor,
# scratch pools, packing, transposes) is.
#
# Why oneTBB is rebuilt: TSan only sees synchronisation in instrumented code. With the system libtbb every
# hand-off through TBB's scheduler (a worker finishing a task, the caller's wait returning) is invisible,
# and TSan reports a thousand "races" between the parallel_for bodies and whoever reads their results.
# Against a oneTBB built with TBB_SANITIZE=thread (same version as the system headers, v2021.8.0) the
# concurrency tests run without a single report and without any suppression.
#
# oneTBB source: $TBB_SRC if set, else build-tsan/_deps/onetbb-src if present, else a shallow git clone of
# https://github.com/oneapi-src/oneTBB at $TBB_TAG (default v2021.8.0).
# tools/tsan.supp is passed to TSan; it must only ever name TBB internals, never deconvjit code.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

mode=${1:-}
case "$mode" in
  "" | --all | --system-tbb) ;;
  *) echo "usage: bash tools/tsan.sh [--all | --system-tbb]" >&2; exit 2 ;;
esac

build=build-tsan
deps=$PWD/$build/_deps
tbb_tag=${TBB_TAG:-v2021.8.0}
jobs=$(nproc)

filter='KernelCache.Concurrent*:Cases/Threads.*:ThreadLimits.*:Layouts/ConcurrentExecute.*'
filter+=':CodeMemory.NeverWritableAndExecutableWhileCompiling'
tbb_args=()
if [ "$mode" = --system-tbb ]; then
  filter='KernelCache.Concurrent*:CodeMemory.NeverWritableAndExecutableWhileCompiling'
  tbb_args=(-UTBB_DIR)
else
  if [ ! -d "$deps/onetbb-install/lib/cmake/TBB" ]; then
    src=${TBB_SRC:-$deps/onetbb-src}
    if [ ! -f "$src/CMakeLists.txt" ]; then
      mkdir -p "$deps"
      git clone --depth 1 --branch "$tbb_tag" https://github.com/oneapi-src/oneTBB "$src"
    fi
    cmake -S "$src" -B "$deps/onetbb-build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DTBB_SANITIZE=thread -DTBB_TEST=OFF -DTBB_EXAMPLES=OFF -DTBBMALLOC_BUILD=OFF -DTBB_STRICT=OFF \
      -DCMAKE_INSTALL_PREFIX="$deps/onetbb-install"
    cmake --build "$deps/onetbb-build" -j"$jobs"
    cmake --install "$deps/onetbb-build"
  fi
  tbb_args=(-DTBB_DIR="$deps/onetbb-install/lib/cmake/TBB")
fi
if [ "$mode" = --all ]; then filter='*'; fi

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS=-fsanitize=thread -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread "${tbb_args[@]}"
cmake --build "$build" -j"$jobs" --target deconvjit_tests
if [ "$mode" != --system-tbb ] && ! ldd "$build/tests/deconvjit_tests" | grep -q "$deps/onetbb-install"; then
  echo "tsan.sh: the test binary does not load the instrumented libtbb" >&2
  exit 1
fi

# halt_on_error: the first report fails the run. second_deadlock_stack: better lock-order reports.
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/tools/tsan.supp ${TSAN_OPTIONS:-}"
export DECONVJIT_CACHE_DIR=""  # no disk cache: these tests are about the in-memory cache and execution
status=0
"$build/tests/deconvjit_tests" --gtest_filter="$filter" || status=$?
if [ "$status" -ne 0 ]; then
  echo "tsan.sh: FAILED (exit $status): a ThreadSanitizer report (see above) or a failing test" >&2
  exit "$status"
fi
echo "tsan.sh: passed, no ThreadSanitizer reports"
