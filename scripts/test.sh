#!/usr/bin/env bash
# Builds sluice and runs every test (ctest). Tests that need ../shared skip
# with a message when it is absent.
# Usage: scripts/test.sh            release build in build/
#        scripts/test.sh --asan     ASan+UBSan build in build-asan/
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ "${1:-}" == "--asan" ]]; then
  scripts/build.sh build-asan -DSLUICE_SANITIZE=ON -DSLUICE_BENCH=OFF -DCMAKE_BUILD_TYPE=Debug
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  ctest --test-dir build-asan --output-on-failure -j"$(nproc)" --timeout 900
else
  scripts/build.sh build
  ctest --test-dir build --output-on-failure -j"$(nproc)" --timeout 900
fi
