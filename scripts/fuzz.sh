#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each in turn (one process
# at a time, so the machine is not starved).
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]   (default 60 s, every target)
#   SECONDS is each target's fuzzing time (at least 5); TARGETs (names as in
#   fuzz/CMakeLists.txt without _fuzz) pick a subset. CI runs
#   `scripts/fuzz.sh 20`: 9 targets x 20 s, about 3 minutes after the build.
# Each target starts from a copy of its seed corpus: fuzz/corpus/<name> (small,
# hand-written or made by gguf_fuzz_seeds), plus for chat_template the real
# templates in ../shared/data/chat-templates (read from there, never copied
# into the repository; skipped with a note when ../shared is absent). It
# prints libFuzzer's final stats (execs, exec/s, cov, ft).
# The mutation seed is fixed (FUZZ_SEED, default 1) so a CI gate replays the
# same mutation sequence for the same code; fuzz longer, and with other seeds
# (FUZZ_SEED=0 lets libFuzzer pick one), to search beyond it.
# A crash stops the script with the reproducer saved under build-fuzz/crashes/
# (rerun it: build-fuzz/fuzz/<name>_fuzz build-fuzz/crashes/<file>).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
seed=${FUZZ_SEED:-1}
shift || true
all=(gguf tokenizer route_trace model_load json_prefix chat_template request chat_output gguf_roundtrip)
targets=("$@")
(( ${#targets[@]} )) || targets=("${all[@]}")
(( seconds < 5 )) && seconds=5
scripts/deps.sh --with-fuzz
cmake -S . -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DSLUICE_FUZZ=ON \
  -DSLUICE_TESTS=OFF -DSLUICE_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build-fuzz "${targets[@]/%/_fuzz}"
mkdir -p build-fuzz/crashes
for t in "${targets[@]}"; do
  work=$(mktemp -d)
  cp -r "fuzz/corpus/$t/." "$work/" 2>/dev/null || true
  dict=()
  case $t in
    gguf) dict=(-dict=fuzz/gguf.dict) ;;
    model_load) dict=(-dict=fuzz/model.dict) ;;
    chat_template)
      dict=(-dict=fuzz/jinja.dict)
      if [[ -d ../shared/data/chat-templates ]]; then
        cp ../shared/data/chat-templates/*.jinja "$work/"
      else
        echo "note: ../shared/data/chat-templates is absent: chat_template_fuzz starts from its hand-written seeds only"
      fi
      ;;
    request) dict=(-dict=fuzz/request.dict) ;;
    chat_output) dict=(-dict=fuzz/chat_output.dict) ;;
  esac
  echo "== ${t}_fuzz: ${seconds} s, $(ls "$work" | wc -l) seed inputs, mutation seed $seed"
  log=build-fuzz/crashes/$t.log
  status=0
  ./build-fuzz/fuzz/"${t}"_fuzz "${dict[@]}" -max_total_time="$seconds" -seed="$seed" -rss_limit_mb=2048 \
    -timeout=10 -max_len=65536 -print_final_stats=1 -artifact_prefix=build-fuzz/crashes/"$t"- "$work" \
    >"$log" 2>&1 || status=$?
  rm -rf "$work"
  grep -E '^(#[0-9]+[[:space:]]+DONE|stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb))' "$log" || true
  if (( status != 0 )); then
    tail -n 60 "$log"
    echo "${t}_fuzz failed (exit $status): full log $log, reproducer under build-fuzz/crashes/"
    exit 1
  fi
done
