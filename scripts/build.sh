#!/usr/bin/env bash
# Configures and builds sluice.
# Usage: scripts/build.sh [BUILD_DIR] [extra cmake args...]            native build (default build/)
#        scripts/build.sh --aarch64 [BUILD_DIR] [extra cmake args...]  cross build for 64-bit ARM Linux
#          (cmake/aarch64-linux-gnu.cmake, default build-aarch64/): statically linked `sluice` (the
#          phone binary, docs/android.md) and `sluice_tests` (run by scripts/test.sh --aarch64).
#          Static means no `sluice serve` (Debian's cpp-httplib has no static library) and no
#          benchmarks.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ "${1:-}" == --aarch64 ]]; then
  shift
  dir=${1:-build-aarch64}; shift || true
  scripts/deps.sh --aarch64
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
    -DSLUICE_STATIC=ON -DSLUICE_BENCH=OFF "$@" >/dev/null
  ninja -C "$dir" -j"$(nproc)" sluice sluice_tests
else
  dir=${1:-build}; shift || true
  scripts/deps.sh
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
  ninja -C "$dir" -j"$(nproc)"
fi
