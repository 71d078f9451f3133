#!/usr/bin/env bash
# Instructions per 256-value block of the NEON K-quant dots (Q4_K, Q5_K, Q6_K,
# Q2_K, Q3_K, IQ4_XS x Q8_K) and MXFP4's (x Q8_0, 8 blocks of 32), sluice's
# against ggml's (llama.cpp's ggml-cpu/arch/arm/quants.c),
# each in a plain Advanced SIMD build and an armv8.2-a dot-product (sdot) build,
# then the int8 matrix multiply tier (i8mm: sluice's Q4_K tile GEMM, ggml's
# two-row two-column Q4_K and Q6_K dots) per output:
# the stand-in for phone timings until there is a phone (issue 28, item 4).
#
# Usage: bench/neon_icount.sh [LLAMA_CPP_DIR]     (default /work/llama.cpp)
# Needs g++-aarch64-linux-gnu and qemu-user-static (scripts/deps.sh --aarch64).
#
# How: both are compiled with the same cross compiler and flags (-O2 -DNDEBUG,
# the Release build's optimisation; sluice's kernels with -ffp-contract=off as
# in CMakeLists.txt); ggml is compiled once per build (-march=armv8-a, which
# makes its ggml_vdotq_s32 the smull/saddlp emulation, and
# -march=armv8.2-a+dotprod, and -march=armv8.2-a+dotprod+i8mm), sluice's one
# object holds both NEON builds, as in the engine, and q4k_i8mm.o its i8mm tier. bench/neon_icount_driver.cpp calls every dot once between marker
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
$cxx -std=c++20 "${flags[@]}" -ffp-contract=off -Isrc -c src/kernels/arm/q4k_i8mm.cpp -o "$out/q4k_i8mm.o"
$cxx -std=c++20 "${flags[@]}" -ffp-contract=off -Isrc -c src/util/cpu_features.cpp -o "$out/cpu_features.o"
$cxx -std=c++20 "${flags[@]}" -Isrc -c bench/neon_icount_driver.cpp -o "$out/driver.o"
for tier in plain sdot i8mm; do
  march=armv8-a
  [[ $tier == sdot ]] && march=armv8.2-a+dotprod
  [[ $tier == i8mm ]] && march=armv8.2-a+dotprod+i8mm
  $cc -std=c11 "${flags[@]}" -march=$march -ffunction-sections -I"$llama/ggml/include" -I"$llama/ggml/src" \
    -I"$llama/ggml/src/ggml-cpu" -c "$llama/ggml/src/ggml-cpu/arch/arm/quants.c" -o "$out/ggml_$tier.o"
  $cxx -static -Wl,--gc-sections "$out/driver.o" "$out/kquant_neon.o" "$out/legacy_neon.o" "$out/q4k_i8mm.o" \
    "$out/cpu_features.o" "$out/ggml_$tier.o" \
    -o "$out/driver_$tier"
done

# Instructions executed after each icount_mark call up to the next: per format
# in kFormats (the driver's order) sluice's then ggml's vec_dot, then sluice's
# Q4_K and Q6_K with 4 columns: 2 * ${#kFormats[@]} + 2 numbers; then the
# driver's printing and the i8mm set-up, and for i8mm 5 more (Q4_K i8mm vec_dot,
# prepare_tile of 16 positions, 16x16 tile GEMM, ggml's 2x2 Q4_K and Q6_K).
kFormats=(Q4_K Q5_K Q6_K Q2_K Q3_K IQ4_XS MXFP4)
n_seg=$((2 * ${#kFormats[@]} + 2 + 6))
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
nf=${#kFormats[@]}
for tier in plain sdot i8mm; do
  read -r -a short <<<"$(counts $tier 16)"
  read -r -a long <<<"$(counts $tier 32)"
  if [[ $tier == i8mm ]]; then i8s=("${short[@]}"); i8l=("${long[@]}"); continue; fi
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

# The i8mm tier (a CPU with sdot and i8mm), per block and output (one weight row
# by one activation column). Decode: one row by one column, sluice's Q4_K in its
# i8mm tier's rounding (sdot), the other formats their sdot build; ggml's i8mm
# build (its one-row path). Prefill: sluice's Q4_K tile GEMM of 16 rows by 16
# positions with its activations' re-lay (prepare_tile, shared by the 16 rows),
# Q6_K its 4-column sdot dot; ggml's two rows by two columns (nrc 2). MXFP4 has
# no i8mm kernel in either.
per() { echo $(((i8l[$1] - i8s[$1]) / 16)); }
b=$((2 * nf + 3))
one=$(per $b); prep=$(per $((b + 1))); tile=$(per $((b + 2))); g4=$(per $((b + 3))); g6=$(per $((b + 4)))
q6cols=$(((i8l[2 * nf + 1] - i8s[2 * nf + 1]) / 64))
ggml1() { per $((2 * $1 + 1)); }  # ggml's one-row count of format index $1 in the i8mm build
echo
echo "| format (i8mm CPU) | sluice decode: 1 x 1 | ggml decode: 1 x 1 | sluice / ggml | sluice prefill, per output | ggml prefill: 2 x 2, per output | sluice / ggml |"
echo "|---|---|---|---|---|---|---|"
awk -v o="$one" -v g1="$(ggml1 0)" -v p="$prep" -v t="$tile" -v g="$g4" \
  'BEGIN { x = (t + p) / 256; printf "| Q4_K | %d | %d | %.2f | %.1f (16 x 16 tile) | %.1f | %.2f |\n", o, g1, o / g1, x, g / 4, x / (g / 4) }'
awk -v o="$(per 4)" -v g1="$(ggml1 2)" -v c="$q6cols" -v g="$g6" \
  'BEGIN { printf "| Q6_K | %d (sdot) | %d | %.2f | %d (4 columns, sdot) | %.1f | %.2f |\n", o, g1, o / g1, c, g / 4, c / (g / 4) }'
awk -v o="$(per 12)" -v g1="$(ggml1 6)" \
  'BEGIN { printf "| MXFP4 | %d (sdot) | %d | %.2f | - | - | - |\n", o, g1, o / g1 }'
