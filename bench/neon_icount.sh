#!/usr/bin/env bash
# Instructions per 256-value block of the NEON K-quant dots (Q4_K, Q5_K, Q6_K,
# Q2_K, Q3_K, IQ4_XS x Q8_K) and MXFP4's (x Q8_0, 8 blocks of 32), sluice's
# against ggml's (llama.cpp's ggml-cpu/arch/arm/quants.c),
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
$cxx -std=c++20 "${flags[@]}" -ffp-contract=off -Isrc -c src/kernels/arm/legacy_neon.cpp -o "$out/legacy_neon.o"
$cxx -std=c++20 "${flags[@]}" -ffp-contract=off -Isrc -c src/util/cpu_features.cpp -o "$out/cpu_features.o"
$cxx -std=c++20 "${flags[@]}" -Isrc -c bench/neon_icount_driver.cpp -o "$out/driver.o"
for tier in plain sdot; do
  march=armv8-a
  [[ $tier == sdot ]] && march=armv8.2-a+dotprod
  $cc -std=c11 "${flags[@]}" -march=$march -ffunction-sections -I"$llama/ggml/include" -I"$llama/ggml/src" \
    -I"$llama/ggml/src/ggml-cpu" -c "$llama/ggml/src/ggml-cpu/arch/arm/quants.c" -o "$out/ggml_$tier.o"
  $cxx -static -Wl,--gc-sections "$out/driver.o" "$out/kquant_neon.o" "$out/legacy_neon.o" "$out/cpu_features.o" "$out/ggml_$tier.o" \
    -o "$out/driver_$tier"
done

# Instructions executed after each icount_mark call up to the next: per format
# in kFormats (the driver's order) sluice's then ggml's vec_dot, then sluice's
# Q4_K and Q6_K with 4 columns: 2 * ${#kFormats[@]} + 2 numbers.
kFormats=(Q4_K Q5_K Q6_K Q2_K Q3_K IQ4_XS MXFP4)
n_seg=$((2 * ${#kFormats[@]} + 2))
counts() {  # tier blocks
  local bin=$out/driver_$1 log=$out/trace_$1_$2.log mark
  mark=$(aarch64-linux-gnu-nm "$bin" | awk '$3 == "icount_mark" { print $1 }')
  QEMU_CPU=max timeout 600 qemu-aarch64-static -singlestep -d exec,nochain -D "$log" "$bin" "$2" "$1" >/dev/null
  # Trace lines: "Trace N: HOST [FLAGS/PC/...] ..."; PC is the second field in the brackets.
  awk -v mark="$mark" -v n="$n_seg" '
    /^Trace/ {
      split($0, a, "[][/]"); pc = a[3]; sub(/^0+/, "", pc); m = mark; sub(/^0+/, "", m)
      if (pc == m) { seg++; next }
      if (seg >= 1 && seg <= n) c[seg]++
    }
    END { for (i = 1; i <= n; i++) printf "%d ", c[i]; print "" }' "$log"
  rm -f "$log"
}

echo "| format | build | sluice instr / block | ggml instr / block | sluice / ggml | sluice, 4 columns: instr / block / column |"
echo "|---|---|---|---|---|---|"
for tier in plain sdot; do
  read -r -a short <<<"$(counts $tier 16)"
  read -r -a long <<<"$(counts $tier 32)"
  nf=${#kFormats[@]}
  for ((f = 0; f < nf; f++)); do
    ours=$(((long[2 * f] - short[2 * f]) / 16))
    theirs=$(((long[2 * f + 1] - short[2 * f + 1]) / 16))
    cols=-
    [[ ${kFormats[f]} == Q4_K ]] && cols=$(((long[2 * nf] - short[2 * nf]) / 64))
    [[ ${kFormats[f]} == Q6_K ]] && cols=$(((long[2 * nf + 1] - short[2 * nf + 1]) / 64))
    awk -v f="${kFormats[f]}" -v t="$tier" -v o="$ours" -v g="$theirs" -v c="$cols" \
      'BEGIN { printf "| %s | %s | %d | %d | %.2f | %s |\n", f, t, o, g, o / g, c }'
  done
done
