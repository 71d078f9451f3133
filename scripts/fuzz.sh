#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for a bounded time.
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET]   (default 60)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
scripts/deps.sh --with-fuzz
cmake -S . -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DSLUICE_FUZZ=ON \
  -DSLUICE_TESTS=OFF -DSLUICE_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build-fuzz gguf_fuzz
work=$(mktemp -d)
cp -r fuzz/corpus/. "$work/" 2>/dev/null || true
./build-fuzz/fuzz/gguf_fuzz -max_total_time="$secs" -rss_limit_mb=2048 -print_final_stats=1 "$work"
rm -rf "$work"
