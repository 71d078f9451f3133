#!/usr/bin/env bash
# bench/vs_llama.sh — sluice and llama.cpp side by side on one GGUF, measured in
# one run and interleaved, so both see the same machine load and disk drift.
#
# Each round runs `sluice bench -m` and llama.cpp's llama-bench once per
# condition, alternating which goes first (odd rounds sluice, even rounds
# llama.cpp). A sample is one round's figure: the mean over that process's
# repetitions. The table gives, per condition and metric, both engines'
# medians over the rounds, every sample, and the ratio of the medians
# sluice / llama.cpp (above 1: sluice is faster).
#
# Metrics (bench/llama_common.sh has the full correspondence):
#   pp P  prefill tok/s: P / the wall time of a P-token prompt, empty context.
#         sluice: prefill_tps; llama-bench: pp P (-p P -n 0).
#   tg N  decode tok/s: N / the wall time of N one-token steps after a P-token
#         prefill (context depth P). sluice: decode_tps (its repetition is the
#         prefill, then the N steps); llama-bench: tg N @ d P (-p 0 -n N -d P,
#         the depth prefill untimed).
# llama-bench runs pp and tg as two processes (two tests, each its own load).
#
# Conditions:
#   warm  (default) both engines compute from RAM, nothing read from disk while timed.
#         sluice: --load-all (every expert read into memory at load; dense weights are
#         read at load too, --dense-weights anon by default), -r R in one process.
#         llama.cpp: -lm mmap; before each process the model file is read once through
#         the page cache (cat FILE >/dev/null; the log records how much of it fincore
#         found resident), and llama-bench's own warm-up pass runs before its -r R
#         timed repetitions. Needs RAM for the whole file (sluice's --load-all holds
#         the experts in its own memory; llama.cpp holds them in the page cache, or,
#         where its CPU backend repacks the weight type (Q4_0, Q4_K on AVX2/NEON), in
#         its own memory).
#   cap   (--cap SIZE) cold, under a memory cap (scripts/lowram.sh SIZE): one repetition
#         per process, the page cache dropped before each process (bench/llama_common.sh:
#         drop_page_cache); llama-bench with --no-warmup (its warm-up would pre-read the
#         weights). sluice runs with its defaults (O_DIRECT expert reads, cache off).
#         A run that fails (OOM-killed, or stopped after --timeout seconds: an mmap
#         engine just above the cap thrashes rather than dies) is a sample
#         "failed (reason)", left out of the median. Before round 1 the model is read
#         once with O_DIRECT and the bytes discarded: the first cold process of a series
#         otherwise also pays for storage that has been idle (on a VM, the host's cache
#         of the disk image; 2026-12-06: sluice pp64 4.7 tok/s first, 21-26 after), and
#         the script's order always gives that process to sluice.
#
# A sample below half its engine's median (same condition and metric) is named under
# the table: one such sample barely moves a median of three, but it means a cold start or
# a disturbance, and a run with one is worth repeating.
#
# Extra flags: --sluice-args '...' go to every `sluice bench` run (e.g.
# '--resident-layout plain' for an A/B), --llama-args '...' to every llama-bench
# run; both split on spaces.
#
# Usage: bench/vs_llama.sh --model GGUF [options]   (bench/vs_llama.sh --help)
set -euo pipefail

prog=vs_llama.sh
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

die() { echo "$prog: error: $*" >&2; exit 1; }
warn() { echo "$prog: warning: $*" >&2; }
say() { echo "$prog: $*" >&2; }

usage() {
  cat <<EOF
usage: bench/vs_llama.sh --model GGUF [options]

  --model PATH        the GGUF both engines run (required)
  --sluice PATH       sluice binary (default: build/sluice)
  --llama-bench PATH  llama.cpp's llama-bench (default: \$LLAMA_BENCH, else llama-bench on PATH)
  --rounds N          interleaved rounds (default 3)
  -t N                compute threads, both engines (default 2)
  -p N                prompt tokens: pp N, and the depth of tg (default 64)
  -n N                decode steps: tg N (default 16)
  -r N                warm: repetitions per process (default 2); cap: always 1
  --cap SIZE          also measure cold under a memory cap of SIZE (e.g. 8G)
  --skip-warm         only the capped condition (needs --cap)
  --timeout S         stop any engine process after S seconds; recorded as failed (default 1800)
  --sluice-args ARGS  extra \`sluice bench\` flags, split on spaces
  --llama-args ARGS   extra llama-bench flags, split on spaces
  --out DIR           samples.csv, per-run CSVs and vs_llama.log (default: a new
                      directory bench/out/vs_llama-MODEL-TIME.XXXX)
  -h, --help
The table (markdown) goes to stdout; progress to stderr.
EOF
}

model="" sluice="$repo/build/sluice" llama_bench=${LLAMA_BENCH:-$(command -v llama-bench || true)}
rounds=3 threads=2 p=64 n=16 r=2 cap="" warm=1 sluice_args="" llama_args="" out="" timeout_s=1800

need_arg() { [[ $# -ge 2 && -n $2 ]] || die "$1 needs a value (see --help)"; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --model) need_arg "$@"; model=$2; shift 2 ;;
    --sluice) need_arg "$@"; sluice=$2; shift 2 ;;
    --llama-bench) need_arg "$@"; llama_bench=$2; shift 2 ;;
    --rounds) need_arg "$@"; rounds=$2; shift 2 ;;
    -t) need_arg "$@"; threads=$2; shift 2 ;;
    -p) need_arg "$@"; p=$2; shift 2 ;;
    -n) need_arg "$@"; n=$2; shift 2 ;;
    -r) need_arg "$@"; r=$2; shift 2 ;;
    --cap) need_arg "$@"; cap=$2; shift 2 ;;
    --skip-warm) warm=0; shift ;;
    --timeout) need_arg "$@"; timeout_s=$2; shift 2 ;;
    --sluice-args) need_arg "$@"; sluice_args=$2; shift 2 ;;
    --llama-args) need_arg "$@"; llama_args=$2; shift 2 ;;
    --out) need_arg "$@"; out=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument '$1'" ;;
  esac
done

for flag_var in --rounds:rounds -t:threads -p:p -n:n -r:r --timeout:timeout_s; do
  v=${flag_var#*:}
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "${flag_var%%:*} must be a positive integer (got '${!v}')"
done
[[ -n $model ]] || die "--model is required (see --help)"
[[ -f $model && -r $model ]] || die "--model: '$model' is not a readable file"
[[ -x $sluice && ! -d $sluice ]] || die "--sluice: '$sluice' is not an executable file (build it: scripts/build.sh)"
[[ -n $llama_bench ]] || die "no llama-bench on PATH: pass --llama-bench PATH (bench/README.md, 'llama.cpp side by side')"
[[ -x $llama_bench && ! -d $llama_bench ]] ||
  die "--llama-bench: '$llama_bench' is not an executable file (build it: bench/README.md, 'llama.cpp side by side')"
((warm)) || [[ -n $cap ]] || die "--skip-warm leaves nothing to measure without --cap SIZE"
lowram="$repo/scripts/lowram.sh"
if [[ -n $cap ]]; then
  "$lowram" --bytes "$cap" >/dev/null 2>&1 || die "--cap: '$cap' is not a size (bytes or e.g. 512M, 8G)"
  cap_err=$("$lowram" 64M -- true 2>&1) || die "--cap needs scripts/lowram.sh: ${cap_err##*lowram.sh: }"
fi
read -r -a sluice_extra <<<"$sluice_args"
read -r -a llama_extra <<<"$llama_args"

if [[ -z $out ]]; then
  # A new directory per run under bench/out/ (git-ignored), named after the model and the time.
  mkdir -p "$repo/bench/out" || die "cannot create $repo/bench/out"
  out=$(mktemp -d "$repo/bench/out/vs_llama-$(basename "$model" .gguf)-$(date -u +%Y%m%dT%H%M%SZ).XXXX") ||
    die "cannot create a directory under $repo/bench/out"
fi
mkdir -p "$out" || die "--out: cannot create '$out'"
[[ -w $out ]] || die "--out: '$out' is not writable"
log="$out/vs_llama.log"
samples="$out/samples.csv"
: >"$log" || die "cannot write $log"
echo "condition,round,engine,metric,tok_s" >"$samples" || die "cannot write $samples"

# shellcheck source=bench/llama_common.sh
source "$repo/bench/llama_common.sh"

# record CONDITION ROUND ENGINE METRIC VALUE: one sample.
record() {
  echo "$1,$2,$3,$4,$5" >>"$samples" || die "cannot write $samples"
}

# run_logged OUTFILE CMD...: CMD's stdout into OUTFILE, stderr into the log
# (and into $out/last.err, for the failure reason), stopped after --timeout
# seconds. Returns CMD's status (124: timed out).
run_logged() {
  local outfile=$1 rc=0
  shift
  { echo "### $(date -u +%T) $*"; echo "conditions: $("$sluice" bench --conditions 2>&1)"; } >>"$log" ||
    die "cannot write $log"
  timeout --kill-after=30 "$timeout_s" "$@" >"$outfile" 2>"$out/last.err" || rc=$?
  cat "$out/last.err" >>"$log" || die "cannot write $log"
  return "$rc"
}

# warm_page_cache: reads the model once through the page cache (llama.cpp's warm condition).
warm_page_cache() {
  cat "$model" >/dev/null || die "cannot read '$model'"
  if command -v fincore >/dev/null; then
    echo "page cache after reading the model: $(fincore -n -o RES "$model" 2>&1) resident" >>"$log" ||
      die "cannot write $log"
  fi
}

# sluice_round CONDITION ROUND: one `sluice bench` process; records pp and tg.
sluice_round() {
  local cond=$1 round=$2 csv="$out/sluice_$1_$2.csv" rc=0 cmd
  if [[ $cond == warm ]]; then
    cmd=("$sluice" bench -m "$model" --load-all -t "$threads" -p "$p" -n "$n" -r "$r" -o csv "${sluice_extra[@]}")
  else
    cmd=("$lowram" "$cap" -- "$sluice" bench -m "$model" -t "$threads" -p "$p" -n "$n" -r 1 -o csv "${sluice_extra[@]}")
    drop_page_cache "$model"
  fi
  say "round $round, $cond: sluice"
  run_logged "$csv" "${cmd[@]}" || rc=$?
  if ((rc != 0)); then
    local why
    why=$(llama_failure_reason "$out/last.err" "$rc" "$timeout_s")
    warn "sluice bench failed (round $round, $cond: $why); see $log"
    record "$cond" "$round" sluice pp "failed ($why)"
    record "$cond" "$round" sluice tg "failed ($why)"
    return 0
  fi
  awk -F, -v cond="$cond" -v round="$round" '
    NR == 1 { for (i = 1; i <= NF; ++i) col[$i] = i; next }
    NR == 2 {
      if (!("prefill_tps" in col) || !("decode_tps" in col)) exit 1
      printf "%s,%s,sluice,pp,%s\n%s,%s,sluice,tg,%s\n", cond, round, $col["prefill_tps"], cond, round, $col["decode_tps"]
      found = 1
    }
    END { exit !found }' "$csv" >>"$samples" || die "no prefill_tps/decode_tps row in $csv (sluice bench -o csv)"
}

# llama_round CONDITION ROUND: two llama-bench processes (pp, then tg); records both.
llama_round() {
  local cond=$1 round=$2 kind csv rc cmd
  for kind in pp tg; do
    csv="$out/llama_${cond}_${round}_$kind.csv" rc=0
    llama_test_args "$kind" "$p" "$n"
    cmd=("$llama_bench" -m "$model" -t "$threads" -lm mmap -o csv "${LLAMA_TEST_ARGS[@]}")
    if [[ $cond == warm ]]; then
      cmd+=(-r "$r" "${llama_extra[@]}")
      warm_page_cache
    else
      cmd=("$lowram" "$cap" -- "${cmd[@]}" -r 1 --no-warmup "${llama_extra[@]}")
      drop_page_cache "$model"
    fi
    say "round $round, $cond: llama.cpp $kind"
    run_logged "$csv" "${cmd[@]}" || rc=$?
    if ((rc != 0)); then
      local why
      why=$(llama_failure_reason "$out/last.err" "$rc" "$timeout_s")
      warn "llama-bench failed (round $round, $cond, $kind: $why); see $log"
      record "$cond" "$round" llama.cpp "$kind" "failed ($why)"
      continue
    fi
    awk -v cond="$cond" -v round="$round" -v kind="$kind" "$LLAMA_CSV_AWK"'
      NR == 1 { n = split_csv($0, h); for (i = 1; i <= n; ++i) col[h[i]] = i; next }
      NR == 2 {
        if (!("avg_ts" in col)) exit 1
        split_csv($0, f)
        printf "%s,%s,llama.cpp,%s,%s\n", cond, round, kind, f[col["avg_ts"]]
        found = 1
      }
      END { exit !found }' "$csv" >>"$samples" || die "no avg_ts row in $csv (llama-bench -o csv)"
  done
}

conds=()
((warm)) && conds+=(warm)
[[ -n $cap ]] && conds+=(cap)
say "model $(basename "$model"), -t $threads, pp$p / tg$n@d$p, $rounds round(s), conditions: ${conds[*]}; output in $out"
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
# The conditions that move the figures (CPU, clock, governor, THP, free memory, page cache, load),
# also logged before every process; a busy machine is said now, not discovered in the table.
conditions_start=$("$sluice" bench --conditions) || die "'$sluice bench --conditions' failed"
say "conditions: $conditions_start"
if awk -v l="${load_start%% *}" -v c="$(nproc)" 'BEGIN { exit !(l > c / 2) }'; then
  warn "the machine is busy (1-minute load ${load_start%% *} on $(nproc) CPUs): the figures will be low and noisy"
fi
# median(list, k): the median of the numeric entries of list[1..k] ("" when none); failed samples are skipped.
MEDIAN_AWK='
  function median(list, k,    a, m, i, j, t) {
    m = 0
    for (i = 1; i <= k; ++i) if (list[i] ~ /^[0-9.]+$/) a[++m] = list[i] + 0
    if (m == 0) return ""
    for (i = 2; i <= m; ++i) for (j = i; j > 1 && a[j - 1] > a[j]; --j) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
    return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
  }'

# mem_probe: "GBps,bytes_per_token,roofline_tps" from `sluice bench --mem -m MODEL -t THREADS`
# (the memory read bandwidth at the engines' thread count and the model's in-RAM decode
# roofline, the same for both engines: they read the same weights); empty, with a warning,
# when the probe fails (the table then has no roofline line).
mem_probe() {
  local row
  { echo "### $(date -u +%T) $sluice bench --mem -m $model -t $threads -o csv"; } >>"$log" || die "cannot write $log"
  if row=$("$sluice" bench --mem -m "$model" -t "$threads" -o csv 2>>"$log" |
           awk -F, 'NR == 2 && $3 != "" && $5 != "" { print $3 "," $5 "," $6; f = 1 } END { exit !f }'); then
    echo "$row"
  else
    warn "the memory bandwidth probe failed (see $log); no roofline in the table"
  fi
}
# prime_storage: the discarded read before the first capped process (see Conditions, cap).
prime_storage() {
  local t0=$SECONDS
  say "cap: reading $(basename "$model") once (O_DIRECT, discarded) so the first cold process starts from the same storage state as the others"
  { echo "### $(date -u +%T) discarded read: dd if=$model iflag=direct"; } >>"$log" || die "cannot write $log"
  # Buffered where O_DIRECT is refused (e.g. tmpfs); the page cache is dropped before each process anyway.
  dd if="$model" of=/dev/null bs=8M iflag=direct status=none 2>>"$log" ||
    dd if="$model" of=/dev/null bs=8M status=none 2>>"$log" || die "cannot read '$model' (see $log)"
  echo "discarded read: $((SECONDS - t0)) s" >>"$log" || die "cannot write $log"
}
mem_start="" mem_end=""
((warm)) && mem_start=$(mem_probe)
[[ -n $cap ]] && prime_storage
start=$SECONDS
for ((round = 1; round <= rounds; ++round)); do
  for cond in "${conds[@]}"; do
    if ((round % 2)); then
      sluice_round "$cond" "$round"
      llama_round "$cond" "$round"
    else
      llama_round "$cond" "$round"
      sluice_round "$cond" "$round"
    fi
  done
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
[[ -n $mem_start ]] && mem_end=$(mem_probe)
rm -f "$out/last.err"

# ---- the table -------------------------------------------------------------------------
{
  echo "### sluice vs llama.cpp: $(basename "$model")"
  echo
  echo "-t $threads, pp$p = $p-token prompt, tg$n = $n decode steps after it (depth $p); $rounds interleaved" \
       "round(s), sample = one process's mean$( ((warm)) && echo " (warm: -r $r)"). Load average" \
       "$load_start at start, $load_end at end; $((SECONDS - start)) s."
  echo
  echo "Machine at the start: $conditions_start."
  [[ -n $sluice_args ]] && echo "sluice flags: \`$sluice_args\`."
  [[ -n $llama_args ]] && echo "llama-bench flags: \`$llama_args\`."
  echo
  echo "| condition | metric | sluice median | llama.cpp median | sluice / llama.cpp | sluice samples | llama.cpp samples |"
  echo "|---|---|--:|--:|--:|---|---|"
  for cond in "${conds[@]}"; do
    for kind in pp tg; do
      awk -F, -v cond="$cond" -v kind="$kind" -v p="$p" -v n="$n" -v cap="$cap" "$MEDIAN_AWK"'
        function join(list, k,    s, i) {
          s = ""
          for (i = 1; i <= k; ++i) s = s (i > 1 ? ", " : "") (list[i] ~ /^[0-9.]+$/ ? sprintf("%.2f", list[i]) : list[i])
          return s
        }
        NR > 1 && $1 == cond && $4 == kind {
          if ($3 == "sluice") s[++ns] = $5; else l[++nl] = $5
        }
        END {
          ms = median(s, ns); ml = median(l, nl)
          ratio = (ms != "" && ml != "" && ml > 0) ? sprintf("%.2f", ms / ml) : "n/a"
          printf "| %s | %s tok/s | %s | %s | %s | %s | %s |\n",
                 cond == "warm" ? "in RAM, warm" : "cap " cap ", cold per process",
                 kind == "pp" ? "pp" p : "tg" n, ms == "" ? "n/a" : sprintf("%.2f", ms),
                 ml == "" ? "n/a" : sprintf("%.2f", ml), ratio, join(s, ns), join(l, nl)
        }' "$samples"
    done
  done
  if [[ -n $mem_start ]]; then
    # Both engines' in-RAM decode medians as a share of the roofline (the start's bandwidth).
    echo
    awk -F, -v mem_start="$mem_start" -v mem_end="$mem_end" -v threads="$threads" -v n="$n" "$MEDIAN_AWK"'
      NR > 1 && $1 == "warm" && $4 == "tg" { if ($3 == "sluice") s[++ns] = $5; else l[++nl] = $5 }
      function share(x) { return x == "" ? "n/a" : sprintf("%.0f%%", 100 * x / roof) }
      END {
        split(mem_start, a, ","); split(mem_end, b, ",")
        roof = a[3] + 0
        printf "Roofline: memory read bandwidth at -t %s %.2f GB/s at the start, %s at the end " \
               "(`sluice bench --mem`); the model reads %.3f GB of weights per decode token, so in-RAM " \
               "decode cannot pass %.2f tok/s here. tg%s medians: sluice %s, llama.cpp %s of it.\n",
               threads, a[1], b[1] == "" ? "n/a" : sprintf("%.2f", b[1]), a[2] / 1e9, roof, n,
               share(median(s, ns)), share(median(l, nl))
        if (b[1] != "" && (b[1] - a[1] > 0.1 * a[1] || a[1] - b[1] > 0.1 * a[1]))
          printf "\n**Warning: the memory bandwidth moved by %+.0f%% during the run** (another load on the " \
                 "host, or a clock change): the rounds did not see the same machine; run again.\n",
                 100 * (b[1] - a[1]) / a[1]
      }' "$samples"
  fi
  # Samples below half their engine's median (same condition and metric).
  far=$(awk -F, "$MEDIAN_AWK"'
    NR > 1 { key = $1 SUBSEP $3 SUBSEP $4; v[key, ++nv[key]] = $5; rd[key, nv[key]] = $2 }
    END {
      for (key in nv) {
        k = nv[key]
        for (i = 1; i <= k; ++i) list[i] = v[key, i]
        m = median(list, k)
        split(key, part, SUBSEP)
        for (i = 1; i <= k; ++i)
          if (m != "" && list[i] ~ /^[0-9.]+$/ && list[i] < 0.5 * m)
            printf "%s %s %s round %s: %.2f (median %.2f)\n", part[2], part[1] == "warm" ? "in RAM" : "cap", part[3], rd[key, i], list[i], m
        delete list
      }
    }' "$samples" | sort) || die "cannot read $samples"
  if [[ -n $far ]]; then
    echo
    echo "**Warning: samples below half their engine's median** (a cold start or a disturbance; the medians"
    echo "above include them: run again before quoting a ratio they could move):"
    while IFS= read -r line; do echo "- $line"; done <<<"$far"
  fi
} || die "cannot write the table"
[[ -n ${far:-} ]] && warn "$(wc -l <<<"$far") sample(s) below half their engine's median: see under the table"
say "samples in $samples; log in $log"
