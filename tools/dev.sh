#!/usr/bin/env bash
# Sets up, builds and then tests (`test`) or benchmarks (`main`) deconvjit on Debian 12.
#   bash tools/dev.sh test   build, then run the whole CTest suite; then again in build-asan/ with
#                            AddressSanitizer + UBSan, then every libFuzzer target for a bounded number of
#                            executions (DECONVJIT_SKIP_SANITIZERS=1 skips both)
#   bash tools/dev.sh main   build, then benchmark tools/suites/realworld.jsonl against oneDNN
# As root it installs the Debian packages it needs; otherwise it only says what is missing.
set -euo pipefail

mode=${1:-}
case "$mode" in
  test | main) ;;
  *) echo "usage: bash tools/dev.sh test|main" >&2; exit 2 ;;
esac
cd "$(dirname "${BASH_SOURCE[0]}")/.."

required=(cmake g++ ninja-build libxbyak-dev libtbb-dev nlohmann-json3-dev libgtest-dev libcli11-dev
  libpugixml-dev libonnx-dev libprotobuf-dev pybind11-dev python3-dev python3-numpy python3-pytest)
# Only `test` wants these: the libFuzzer targets (tools/fuzz.sh) are built with clang.
test_required=(clang-14 libclang-rt-14-dev)
# Only `main` wants these (the oneDNN comparison), and it can do without. Debian's oneDNN CMake package
# requires the OpenCL headers, which are only a Recommends of libdnnl-dev; the configure goes without
# oneDNN (with a note) when its package cannot load, so either install may fail.
optional=(libdnnl-dev ocl-icd-opencl-dev)

missing() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || echo "$p"
  done
}

install_packages() {
  local need want p
  need=$(missing "${required[@]}")
  if [ "$mode" = test ]; then need="$need $(missing "${test_required[@]}")"; fi
  need=$(echo $need)  # one line, no stray blanks
  want=""
  if [ "$mode" = main ]; then want=$(missing "${optional[@]}"); fi
  if [ -z "$need$want" ]; then return 0; fi
  if [ "$(id -u)" -ne 0 ]; then
    if [ -n "$need" ]; then
      echo "missing Debian packages: $need (run as root, or apt-get install them)" >&2
      exit 1
    fi
    return 0
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  if [ -n "$need" ]; then
    # shellcheck disable=SC2086  # one package per word
    apt-get install -y --no-install-recommends $need
  fi
  for p in $want; do
    apt-get install -y --no-install-recommends "$p" || echo "note: optional package $p is unavailable" >&2
  done
}

build() {
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
  cmake --build build -j"$(nproc)"
}

# The same library, tools and tests with AddressSanitizer + UndefinedBehaviorSanitizer (clang-14, in
# build-asan/, built by tools/fuzz.sh together with the fuzz targets), then the whole suite there. Every
# report fails the run (no recovery, halt_on_error); leaks are reports too. The generated machine code is
# not instrumented (guard pages in the kernel tests check its accesses); the C++ around it is. The one
# suppression, a oneTBB leak in test code, is explained in tools/lsan.supp.
sanitize() {
  bash tools/fuzz.sh --build
  ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:abort_on_error=1:strict_string_checks=1" \
  UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" LSAN_OPTIONS="suppressions=$PWD/tools/lsan.supp" \
    ctest --test-dir build-asan --output-on-failure -j2
}

install_packages
build

if [ "$mode" = test ]; then
  ctest --test-dir build --output-on-failure -j2
  if [ "${DECONVJIT_SKIP_SANITIZERS:-0}" != 1 ]; then
    sanitize
    # Every fuzz target for a bounded number of executions (tools/fuzz.sh TARGET SECONDS runs one longer).
    bash tools/fuzz.sh --ci "${DECONVJIT_FUZZ_RUNS:-4000}"
  fi
  exit
fi

cli=build/tools/deconvjit
suite=tools/suites/realworld.jsonl
# The machine's measured FMA peak and bandwidth, then every suite layer verified against the reference
# and timed against oneDNN (when libdnnl-dev is installed) in both data layouts: the user-layout comparison
# and the kernel race (our faster layout against oneDNN's fastest kernel), with an SVG report.
"$cli" peak
"$cli" bench --suite "$suite" --verify --vs onednn --layout both --report build/realworld_report.svg
