#!/usr/bin/env bash
# The sanitizer build (clang-14, AddressSanitizer + UndefinedBehaviorSanitizer, libFuzzer coverage) in
# build-asan/: library, tools, tests and the libFuzzer targets of fuzz/, one build for both uses.
#
#   bash tools/fuzz.sh --build            configure and build build-asan/ (tools/dev.sh test then runs ctest there)
#   bash tools/fuzz.sh TARGET [SECONDS]   one target for SECONDS (default 60) from its seed corpus
#   bash tools/fuzz.sh --ci [RUNS]        every target for RUNS executions each (default 2000); CI runs this
#   bash tools/fuzz.sh --list             the targets
#
# Targets: fuzz_descriptor (JSON -> resolve -> plan -> JIT -> execute vs the reference), fuzz_openvino_ir,
# fuzz_onnx (when libonnx-dev is installed), fuzz_cache_entry (the disk-cache entry decoder and validator).
# New inputs found go to build-asan/corpus/TARGET, never into the committed seeds (fuzz/corpus/TARGET);
# a crashing input is written to build-asan/crash-* and the script fails.
# Needs the Debian packages clang-14 and libclang-rt-14-dev. No sanitizer suppressions are used.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

build=build-asan
targets=(fuzz_descriptor fuzz_openvino_ir fuzz_onnx fuzz_cache_entry)
# Inputs worth their cost: descriptors and IR layers are small text; entries hold a few KB of code.
declare -A max_len=([fuzz_descriptor]=4096 [fuzz_openvino_ir]=8192 [fuzz_onnx]=8192 [fuzz_cache_entry]=32768)

usage() { echo "usage: bash tools/fuzz.sh --build | TARGET [SECONDS] | --ci [RUNS] | --list" >&2; exit 2; }

configure_and_build() {
  # -fno-sanitize=function: clang's UBSan checks an indirect call's target by reading a signature just
  # before the function; the JIT's functions have none, and the bytes before one may be unmapped.
  # fuzzer-no-link: libFuzzer's coverage hooks everywhere, its main() only in the fuzz targets.
  # -O1: several times faster tests than -O0 under ASan, and a shorter compile than -O2.
  # oneDNN is left out: its OpenMP runtime is not instrumented and only `bench --vs onednn` uses it.
  # The Python module too: an instrumented module needs the sanitizer runtime preloaded into the
  # interpreter; the Release build tests it.
  local flags="-fsanitize=address,undefined -fno-sanitize=function -fno-sanitize-recover=all"
  flags+=" -fsanitize=fuzzer-no-link -fno-omit-frame-pointer"
  cmake -S . -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DCMAKE_CXX_FLAGS="$flags" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" -DDECONVJIT_WITH_ONEDNN=OFF \
    -DDECONVJIT_BUILD_PYTHON=OFF -DDECONVJIT_BUILD_FUZZERS=ON >/dev/null
  cmake --build "$build" -j"$(nproc)"
}

# run TARGET ARGS...: the target on a scratch copy of its seeds; libFuzzer's exit status is the result.
run() {
  local t=$1
  shift
  local bin=$build/fuzz/$t
  if [ ! -x "$bin" ]; then
    echo "fuzz.sh: $t was not built (fuzz_onnx needs libonnx-dev and libprotobuf-dev)" >&2
    return 0
  fi
  mkdir -p "$build/corpus/$t"
  # halt_on_error: the first report is a crash; detect_leaks: a leak is one too.
  ASAN_OPTIONS="halt_on_error=1:detect_leaks=1" UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
  DECONVJIT_CACHE_DIR="" DECONVJIT_TUNING_DB="" "$bin" -max_len="${max_len[$t]}" -timeout=20 -rss_limit_mb=4096 \
    -artifact_prefix="$build/crash-$t-" -print_final_stats=1 "$@" "$build/corpus/$t" "fuzz/corpus/$t"
}

case "${1:-}" in
  --build) configure_and_build ;;
  --list) printf '%s\n' "${targets[@]}"; exit 0 ;;
  --ci)
    runs=${2:-2000}
    configure_and_build
    for t in "${targets[@]}"; do
      echo "fuzz.sh: $t, $runs executions"
      status=0
      run "$t" -runs="$runs" >"$build/$t.log" 2>&1 || status=$?
      grep -E '^(stat::number_of_executed_units|Done )' "$build/$t.log" || true
      if [ "$status" -ne 0 ]; then
        tail -n 60 "$build/$t.log" >&2
        echo "fuzz.sh: $t FAILED (exit $status; input in $build/crash-$t-*)" >&2
        exit 1
      fi
    done
    ;;
  fuzz_*)
    t=$1
    [[ " ${targets[*]} " == *" $t "* ]] || usage
    configure_and_build
    run "$t" -max_total_time="${2:-60}"
    ;;
  *) usage ;;
esac
