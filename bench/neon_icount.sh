#!/usr/bin/env bash
# Instructions per 256-value block of the NEON Q4_K, Q5_K and Q6_K dots
# (x Q8_K), sluice's against ggml's (llama.cpp's ggml-cpu/arch/arm/quants.c),
# each in a plain Advanced SIMD build and an armv8.2-a dot-product (sdot) build:
# the stand-in for phone timings until there is a phone (issue 28, item 4).
#
# Usage: bench/neon_icount.sh [LLAMA_CPP_DIR]     (default /work/llama.cpp)
# Needs g++-aarch64-linux-gnu and qemu-user-static (scripts/deps.sh --aarch64).
#
# How: both are compiled with the same cross compiler and flags (-O2 -DNDEBUG,
# the Release build's optimisation; sluice's kernels with -ffp-contract=off as
# in CMakeLists.txt); ggml is compiled once per build (-march=armv8-a, which
# makes its ggml_vdotq_s32 the smull/saddlp emulation, and
# -march=armv8.2-a+dotprod), sluice's one object holds both builds, as in the
# engine. bench/neon_icount_driver.cpp calls every dot once between marker
# calls; qemu-aarch64 runs it with one instruction per translation block
# (-singlestep) and logs every block it executes (-d exec,nochain), which
# gives the dynamic instruction count of each call. Two row lengths (16 and 32
# blocks) and the difference / 16 leave the per-block count, without call and
# reduction overhead. Debian's qemu 7.2 ships no TCG plugins, hence the trace.
# Output: a markdown table (docs/benchmarks.md) on stdout; objects, binaries
# and traces in bench/out/neon_icount/.
set -euo pipefail
cd "$(dirname "$0")/.."
llama=${1:-/work/llama.cpp}
out=bench/out/neon_icount
mkdir -p "$out"
cxx=aarch64-linux-gnu-g++
cc=aarch64-linux-gnu-gcc
flags=(-O2 -DNDEBUG)

$cxx -std=c++20 "${flags[@]}" -ffp-contract=off -Isrc -c src/kernels/arm/kquant_neon.cpp -o "$out/kquant_neon.o"
$cxx -std=c++20 "${flags[@]}" -ffp-contract=off -Isrc -c src/util/cpu_features.cpp -o "$out/cpu_features.o"
$cxx -std=c++20 "${flags[@]}" -Isrc -c bench/neon_icount_driver.cpp -o "$out/driver.o"
for tier in plain sdot; do
  march=armv8-a
  [[ $tier == sdot ]] && march=armv8.2-a+dotprod
  $cc -std=c11 "${flags[@]}" -march=$march -ffunction-sections -I"$llama/ggml/include" -I"$llama/ggml/src" \
    -I"$llama/ggml/src/ggml-cpu" -c "$llama/ggml/src/ggml-cpu/arch/arm/quants.c" -o "$out/ggml_$tier.o"
  $cxx -static -Wl,--gc-sections "$out/driver.o" "$out/kquant_neon.o" "$out/cpu_features.o" "$out/ggml_$tier.o" \
    -o "$out/driver_$tier"
done

# Instructions executed between consecutive icount_mark calls: eight numbers
# (sluice Q4_K, ggml Q4_K, sluice Q5_K, ggml Q5_K, sluice Q6_K, ggml Q6_K,
# sluice Q4_K 4 columns, sluice Q6_K 4 columns).
counts() {  # tier blocks
  local bin=$out/driver_$1 log=$out/trace_$1_$2.log mark
  mark=$(aarch64-linux-gnu-nm "$bin" | awk '$3 == "icount_mark" { print $1 }')
  QEMU_CPU=max timeout 600 qemu-aarch64-static -singlestep -d exec,nochain -D "$log" "$bin" "$2" "$1" >/dev/null
  # Trace lines: "Trace N: HOST [FLAGS/PC/...] ..."; PC is the second field in the brackets.
  awk -v mark="$mark" '
    /^Trace/ {
      split($0, a, "[][/]"); pc = a[3]; sub(/^0+/, "", pc); m = mark; sub(/^0+/, "", m)
      if (pc == m) { seg++; next }
      if (seg >= 1 && seg <= 8) c[seg]++
    }
    END { for (i = 1; i <= 8; i++) printf "%d ", c[i]; print "" }' "$log"
  rm -f "$log"
}

echo "| format | build | sluice instr / block | ggml instr / block | sluice / ggml | sluice, 4 columns: instr / block / column |"
echo "|---|---|---|---|---|---|"
for tier in plain sdot; do
  read -r -a short <<<"$(counts $tier 16)"
  read -r -a long <<<"$(counts $tier 32)"
  fmts=(Q4_K Q5_K Q6_K)
  for f in 0 1 2; do
    ours=$(((long[2 * f] - short[2 * f]) / 16))
    theirs=$(((long[2 * f + 1] - short[2 * f + 1]) / 16))
    cols=-
    [[ $f == 0 ]] && cols=$(((long[6] - short[6]) / 64))
    [[ $f == 2 ]] && cols=$(((long[7] - short[7]) / 64))
    awk -v f="${fmts[f]}" -v t="$tier" -v o="$ours" -v g="$theirs" -v c="$cols" \
      'BEGIN { printf "| %s | %s | %d | %d | %.2f | %s |\n", f, t, o, g, o / g, c }'
  done
done
