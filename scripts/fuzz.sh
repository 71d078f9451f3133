#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each in turn for a share of
# a time budget (one process each, so the machine is not starved).
# Usage: scripts/fuzz.sh [SECONDS]   (default 120)
#   SECONDS is the total fuzzing time, split evenly across the targets, each
#   getting at least 30 s (CI runs `scripts/fuzz.sh 60`: 5 targets x 30 s).
# Each target starts from its seed corpus fuzz/corpus/<name> (copied: the repo
# corpus stays small) and prints libFuzzer's final stats (execs, cov, ft).
# A crash stops the script with the reproducer saved under build-fuzz/crashes/.
set -euo pipefail
cd "$(dirname "$0")/.."
total=${1:-120}
targets=(gguf tokenizer route_trace model_load json_prefix)
scripts/deps.sh --with-fuzz
cmake -S . -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DSLUICE_FUZZ=ON \
  -DSLUICE_TESTS=OFF -DSLUICE_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build-fuzz "${targets[@]/%/_fuzz}"
share=$(( total / ${#targets[@]} ))
(( share < 30 )) && share=30
mkdir -p build-fuzz/crashes
for t in "${targets[@]}"; do
  work=$(mktemp -d)
  cp -r "fuzz/corpus/$t/." "$work/" 2>/dev/null || true
  dict=()
  case $t in gguf) dict=(-dict=fuzz/gguf.dict) ;; model_load) dict=(-dict=fuzz/model.dict) ;; esac
  echo "== ${t}_fuzz: ${share} s"
  ./build-fuzz/fuzz/"${t}"_fuzz "${dict[@]}" -max_total_time="$share" -rss_limit_mb=2048 \
    -timeout=10 -max_len=65536 -print_final_stats=1 -artifact_prefix=build-fuzz/crashes/"$t"- "$work"
  rm -rf "$work"
done
