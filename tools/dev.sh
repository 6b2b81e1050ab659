#!/usr/bin/env bash
# Sets up, builds and then tests (`test`) or benchmarks (`main`) deconvjit on Debian 12.
#   bash tools/dev.sh test   build, then run the whole CTest suite
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
  libpugixml-dev libonnx-dev libprotobuf-dev)
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

install_packages
build

if [ "$mode" = test ]; then
  ctest --test-dir build --output-on-failure -j2
  exit
fi

cli=build/tools/deconvjit
suite=tools/suites/realworld.jsonl
# The machine's measured FMA peak and bandwidth, then every suite layer verified against the reference
# and timed against oneDNN (when libdnnl-dev is installed), in both data layouts.
"$cli" peak
"$cli" bench --suite "$suite" --verify --vs onednn --layout nxc
"$cli" bench --suite "$suite" --verify --vs onednn --layout ncx
