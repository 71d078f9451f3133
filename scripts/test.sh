#!/usr/bin/env bash
# Builds sluice and runs every test. Tests that need ../shared skip
# with a message when it is absent.
# Usage: scripts/test.sh            release build in build/, each test a process of its own (ctest)
#        scripts/test.sh --asan     ASan+UBSan build in build-asan/, the suite in one process per core
#        scripts/test.sh --aarch64  cross build in build-aarch64/ (scripts/build.sh --aarch64), the
#                                   unit tests under qemu-aarch64-static, on three CPU models:
#          -cpu max         (armv8.x with the dot product and i8mm, so Q4_K runs the i8mm tier):
#                           the whole suite but the slow suites whose code does not depend on
#                           the CPU (native_only below);
#          -cpu cortex-a53  (armv8.0, no dot product): the tests whose results depend on the kernel
#                           path (kernels, golden logits, stories greedy, invariance, MTP golden).
#          -cpu cortex-a76  (armv8.2 with the dot product, no i8mm, like most phones of 2019-2021):
#                           the kernel tests, the dot-product build picked at run time there too.
#          Not run under emulation: the serve tests (the static build has no HTTP server: Debian's
#          cpp-httplib has no static library) and the benchmarks (emulated time is no speed figure).
set -euo pipefail
cd "$(dirname "$0")/.."

# Runs one test binary as $(nproc) gtest shards side by side: run_shards LABEL DIR FILTER CMD...
# runs CMD (the binary, behind qemu for the cross build) in DIR with gtest filter FILTER,
# logs in $log_dir/LABEL.N.log. One process per shard instead of ctest's one per test:
# a process start costs 0.65 s under ASan (its globals registered, LSan's exit scan), 1034
# of them a third of that stage's test time (2026-12-06, 2 cores: 369 s sharded, 883 s by
# ctest); under qemu each start is an emulated one too.
run_shards() {
  local label=$1 dir=$2 filter=$3 shards i failed=0
  shift 3
  shards=$(nproc)
  for ((i = 0; i < shards; i++)); do
    # A shard that hangs (2026-12-05: every thread in a futex wait, in
    # GoldenLocalTest.NgramDraftsKeepTheGreedyTokens/lfm2moe_f32 under -cpu max) is killed
    # after 40 min, its log (the hung test is its last "[ RUN ]") printed, and the run fails.
    (cd "$dir" && GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i \
      timeout --signal=KILL 2400 "$@" --gtest_filter="$filter" >"$log_dir/$label.$i.log" 2>&1) &
  done
  for ((i = 0; i < shards; i++)); do
    if ! wait -n; then failed=1; fi
  done
  for ((i = 0; i < shards; i++)); do
    if ! grep -q '^\[  PASSED  \]' "$log_dir/$label.$i.log" || grep -q '^\[  FAILED  \]' "$log_dir/$label.$i.log"; then
      failed=1
      cat "$log_dir/$label.$i.log"
    fi
  done
  grep -h '^\[==========\] .* ran\|^\[  PASSED  \]\|^\[  SKIPPED \] [0-9]\|^\[neon\]' "$log_dir"/"$label".*.log | sed "s/^/  $label: /"
  return $failed
}

# The cross build's tests under qemu on CPU model $1, filter $2.
run_emulated() {
  run_shards "$1" . "$2" env QEMU_CPU="$1" qemu-aarch64-static build-aarch64/tests/sluice_tests
}

if [[ "${1:-}" == "--asan" ]]; then
  # Debug (-O0, assert() on), except the kernels, model and moe layers at -O1 (CMakeLists.txt:
  # the math every golden case runs; -O1 everywhere had run the suite in 260 s instead of 509 s
  # but cost ~520 s more build), linked non-PIE (the CLI tests start sluice many times;
  # 2026-12-05, 2 cores, one process per test as ctest ran it then: 647 s instead of 1297 s).
  scripts/build.sh build-asan -DSLUICE_SANITIZE=ON -DSLUICE_BENCH=OFF -DCMAKE_BUILD_TYPE=Debug
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  # The suite in $(nproc) processes (run_shards), not ctest's one per test: 1034 starts at
  # 0.65 s each were a third of this stage's test time.
  log_dir=$PWD/build-asan/test-logs
  rm -rf "$log_dir" && mkdir -p "$log_dir"
  run_shards asan build-asan/tests '*' ./sluice_tests
elif [[ "${1:-}" == "--aarch64" ]]; then
  # Release: the same -O2 code as the phone binary of docs/android.md, without the debug info,
  # which only slows the cross compile and the static link of a run nobody debugs.
  scripts/build.sh --aarch64 build-aarch64 -DCMAKE_BUILD_TYPE=Release
  log_dir=$PWD/build-aarch64/test-logs
  rm -rf "$log_dir" && mkdir -p "$log_dir"
  # -cpu max: every test but the slow suites whose code does not depend on the CPU (n-gram
  # drafting, prefetch timing, perplexity chunking, the synth generators, CLI output formats,
  # chat templates; the forward passes they drive are checked here by the other suites): about
  # half the emulated time, no instruction-set coverage.
  native_only='Cases/NgramGolden.*:Models/PrefetchInvariance.*:EvalLlama.*:Synth*:ToolsSynth.*:CliOutput*:ChatTemplate.*:PolicyEval.*:Golden/PolicyNoOp.*'
  run_emulated max "*-$native_only"
  run_emulated cortex-a53 'Kernels*:Kquant*:Cases/GoldenTest.*:GoldenSelfCheck.*:ModelStories.*:Cases/InvarianceTest.*:MtpGolden.*'
  run_emulated cortex-a76 'Kernels*:Kquant*'
  # Both NEON builds ran (the kernels test prints which one it saw).
  grep -qh '^\[neon\] kernels: sdot' "$log_dir"/max.*.log
  grep -qh '^\[neon\] kernels: plain' "$log_dir"/cortex-a53.*.log
  grep -qh '^\[neon\] kernels: sdot' "$log_dir"/cortex-a76.*.log
  # The K-quant dots: both builds checked under -cpu max (kernels_kquant_order_test.cpp).
  grep -qh '^\[neon\] kquant builds checked: plain, sdot' "$log_dir"/max.*.log
  # The Q4_K i8mm tier (tile GEMM and vec_dot in its run-sum rounding) under -cpu max
  # (kernels_runsum_test.cpp).
  grep -qh '^\[neon\] q4_k i8mm tile checked' "$log_dir"/max.*.log
else
  scripts/build.sh build
  ctest --test-dir build --output-on-failure -j"$(nproc)" --timeout 900
fi
