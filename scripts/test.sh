#!/usr/bin/env bash
# Builds sluice and runs every test (ctest). Tests that need ../shared skip
# with a message when it is absent.
# Usage: scripts/test.sh            release build in build/
#        scripts/test.sh --asan     ASan+UBSan build in build-asan/
#        scripts/test.sh --aarch64  cross build in build-aarch64/ (scripts/build.sh --aarch64), the
#                                   unit tests under qemu-aarch64-static, on three CPU models:
#          -cpu max         (armv8.x with the dot product and i8mm): the whole suite, sharded over the cores;
#          -cpu cortex-a53  (armv8.0, no dot product): the tests whose results depend on the kernel
#                           path (kernels, golden logits, stories greedy, invariance, MTP golden).
#          -cpu cortex-a76  (armv8.2 with the dot product, no i8mm, like most phones of 2019-2021):
#                           the kernel tests, the dot-product build picked at run time there too.
#          Not run under emulation: the serve tests (the static build has no HTTP server: Debian's
#          cpp-httplib has no static library) and the benchmarks (emulated time is no speed figure).
set -euo pipefail
cd "$(dirname "$0")/.."

# Runs build-aarch64/tests/sluice_tests under qemu with QEMU_CPU=$1, gtest
# filter $2, split into $(nproc) shards run side by side; logs in $log_dir.
run_emulated() {
  local cpu=$1 filter=$2 shards i failed=0
  shards=$(nproc)
  for ((i = 0; i < shards; i++)); do
    # A shard that hangs (2026-12-05: every thread in a futex wait, in
    # GoldenLocalTest.NgramDraftsKeepTheGreedyTokens/lfm2moe_f32 under -cpu max) is killed
    # after 40 min, its log (the hung test is its last "[ RUN ]") printed, and the run fails.
    QEMU_CPU=$cpu GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i \
      timeout --signal=KILL 2400 qemu-aarch64-static build-aarch64/tests/sluice_tests --gtest_filter="$filter" \
      >"$log_dir/$cpu.$i.log" 2>&1 &
  done
  for ((i = 0; i < shards; i++)); do
    if ! wait -n; then failed=1; fi
  done
  for ((i = 0; i < shards; i++)); do
    if ! grep -q '^\[  PASSED  \]' "$log_dir/$cpu.$i.log" || grep -q '^\[  FAILED  \]' "$log_dir/$cpu.$i.log"; then
      failed=1
      cat "$log_dir/$cpu.$i.log"
    fi
  done
  grep -h '^\[==========\] .* ran\|^\[  PASSED  \]\|^\[  SKIPPED \] [0-9]\|^\[neon\]' "$log_dir"/"$cpu".*.log | sed "s/^/  $cpu: /"
  return $failed
}

if [[ "${1:-}" == "--asan" ]]; then
  # Debug (-O0, assert() on), except the kernels, model and moe layers at -O1 (CMakeLists.txt:
  # the math every golden case runs; -O1 everywhere had run the suite in 260 s instead of 509 s
  # but cost ~520 s more build), linked non-PIE (every test is a process: 2026-12-05, 2 cores,
  # the suite took 647 s instead of 1297 s).
  scripts/build.sh build-asan -DSLUICE_SANITIZE=ON -DSLUICE_BENCH=OFF -DCMAKE_BUILD_TYPE=Debug
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  ctest --test-dir build-asan --output-on-failure -j"$(nproc)" --timeout 900
elif [[ "${1:-}" == "--aarch64" ]]; then
  # Release: the same -O2 code as the phone binary of docs/android.md, without the debug info,
  # which only slows the cross compile and the static link of a run nobody debugs.
  scripts/build.sh --aarch64 build-aarch64 -DCMAKE_BUILD_TYPE=Release
  log_dir=build-aarch64/test-logs
  rm -rf "$log_dir" && mkdir -p "$log_dir"
  run_emulated max '*'
  run_emulated cortex-a53 'Kernels*:Kquant*:Cases/GoldenTest.*:GoldenSelfCheck.*:ModelStories.*:Cases/InvarianceTest.*:MtpGolden.*'
  run_emulated cortex-a76 'Kernels*:Kquant*'
  # Both NEON builds ran (the kernels test prints which one it saw).
  grep -qh '^\[neon\] kernels: sdot' "$log_dir"/max.*.log
  grep -qh '^\[neon\] kernels: plain' "$log_dir"/cortex-a53.*.log
  grep -qh '^\[neon\] kernels: sdot' "$log_dir"/cortex-a76.*.log
  # The K-quant dots: both builds checked under -cpu max (kernels_kquant_order_test.cpp).
  grep -qh '^\[neon\] kquant builds checked: plain, sdot' "$log_dir"/max.*.log
else
  scripts/build.sh build
  ctest --test-dir build --output-on-failure -j"$(nproc)" --timeout 900
fi
