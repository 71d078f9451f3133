#!/usr/bin/env bash
# bench/figures.sh — the reproducible recipe behind bench/README.md's figures.
#
# Runs `sluice bench` sweeps on the synthesised Qwen3-30B-A3B-shaped model and
# on the trained tiny MoE, writes one CSV per sweep into --out, merges them
# (all.csv, with a leading `sweep` column), and plots bench/plot.gp into --png:
#   ceiling  the device's random-read ceiling (sluice bench --io, short), fed
#            to every model run as --io-ceiling so rows carry efficiencies;
#   cache    decode vs --cache-mb (default 0,1000,2000,4000,auto) under --sweep-cap;
#   cap      cache off and auto under each --caps entry (4G,8G,16G,none); the
#            --sweep-cap entry reuses the cache sweep's off/auto rows;
#   cold     cache off, uncapped: O_DIRECT with the page cache dropped, buffered
#            cold (--no-odirect --cold), and buffered warm (after a discarded
#            warm-up pass with the same prompts, so the page cache holds the
#            experts those prompts route to, where RAM allows);
#   tiny     the trained tiny MoE fully resident (--load-all), -t 1,2.
# Every row is self-describing: it names its cache setting, the budget that
# resolved to, and the memory cap it ran under (mem_cap_MiB).
#
# Capping needs scripts/lowram.sh to work (root or a delegated cgroup). When it
# cannot, the script stops with an error naming the problem; --skip-capped
# runs the uncapped points only, with a warning.
#
# Usage: bench/figures.sh [options]     (bench/figures.sh --help)
set -euo pipefail

prog=figures.sh
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

die() { echo "$prog: error: $*" >&2; exit 1; }
warn() { echo "$prog: warning: $*" >&2; }
say() { echo "$prog: $*" >&2; }

usage() {
  cat <<EOF
usage: bench/figures.sh [options]

model and tools
  --model PATH        Qwen3-30B-A3B-shaped GGUF (default: SYNTH_DIR/qwen3-30b-a3b.gguf,
                      synthesised there when absent: 17.4 GB, needs --synth-dir)
  --synth-dir DIR     where to synthesise the model when --model is not given
  --tiny-model PATH   trained tiny MoE (default: \$SLUICE_SHARED_DIR/models/stories-moe-8x-q8_0.gguf,
                      SLUICE_SHARED_DIR defaulting to /work/shared)
  --sluice PATH       sluice binary (default: build/sluice)
output
  --out DIR           CSVs, ceiling.json, machine.txt, logs (default: bench/results)
  --png PATH          the plot (default: bench/figures.png)
sizes (per configuration)
  -p N -n N -r N      30B prompt tokens, decode steps, repetitions (default 16, 16, 2)
  --tiny-p N --tiny-n N --tiny-r N   tiny MoE (default 128, 128, 3)
  -t LIST             30B compute threads (default: nproc)
  --io-threads N      30B expert read lanes (default 4)
sweeps
  --cache-list LIST   cache sweep budgets (default 0,1000,2000,4000,auto)
  --sweep-cap SIZE    cap of the cache sweep (default 8G)
  --caps LIST         cap sweep, sizes or 'none' (default 4G,8G,16G,none)
  --steps LIST        which of ceiling,cache,cap,cold,tiny,plot to run (default: all);
                      'plot' alone re-plots the CSVs already in --out
  --skip-capped       when memory cannot be capped, skip capped points (warning) instead of failing
  -h, --help
EOF
}

model="" synth_dir="" tiny_model="" sluice="$repo/build/sluice"
out="$repo/bench/results" png="$repo/bench/figures.png"
p=16 n=16 r=2 tiny_p=128 tiny_n=128 tiny_r=3
threads=$(nproc) io_threads=4
cache_list="0,1000,2000,4000,auto" sweep_cap=8G caps="4G,8G,16G,none"
steps="ceiling,cache,cap,cold,tiny,plot" skip_capped=0

need_arg() { [[ $# -ge 2 && -n $2 ]] || die "$1 needs a value (see --help)"; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --model) need_arg "$@"; model=$2; shift 2 ;;
    --synth-dir) need_arg "$@"; synth_dir=$2; shift 2 ;;
    --tiny-model) need_arg "$@"; tiny_model=$2; shift 2 ;;
    --sluice) need_arg "$@"; sluice=$2; shift 2 ;;
    --out) need_arg "$@"; out=$2; shift 2 ;;
    --png) need_arg "$@"; png=$2; shift 2 ;;
    -p) need_arg "$@"; p=$2; shift 2 ;;
    -n) need_arg "$@"; n=$2; shift 2 ;;
    -r) need_arg "$@"; r=$2; shift 2 ;;
    --tiny-p) need_arg "$@"; tiny_p=$2; shift 2 ;;
    --tiny-n) need_arg "$@"; tiny_n=$2; shift 2 ;;
    --tiny-r) need_arg "$@"; tiny_r=$2; shift 2 ;;
    -t) need_arg "$@"; threads=$2; shift 2 ;;
    --io-threads) need_arg "$@"; io_threads=$2; shift 2 ;;
    --cache-list) need_arg "$@"; cache_list=$2; shift 2 ;;
    --sweep-cap) need_arg "$@"; sweep_cap=$2; shift 2 ;;
    --caps) need_arg "$@"; caps=$2; shift 2 ;;
    --steps) need_arg "$@"; steps=$2; shift 2 ;;
    --skip-capped) skip_capped=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument '$1'" ;;
  esac
done

for flag_var in -p:p -n:n -r:r --tiny-p:tiny_p --tiny-n:tiny_n --tiny-r:tiny_r --io-threads:io_threads; do
  v=${flag_var#*:}
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "${flag_var%%:*} must be a positive integer (got '${!v}')"
done
has_step() { [[ ,$steps, == *,$1,* ]]; }
for s in ${steps//,/ }; do
  [[ $s =~ ^(ceiling|cache|cap|cold|tiny|plot)$ ]] || die "--steps: unknown step '$s' (ceiling,cache,cap,cold,tiny,plot)"
done

mkdir -p "$out"
log="$out/figures.log"
lowram="$repo/scripts/lowram.sh"

# ---- inputs ----------------------------------------------------------------------
needs_30b=0
for s in ceiling cache cap cold; do has_step $s && needs_30b=1; done
needs_sluice=$needs_30b
has_step tiny && needs_sluice=1
if ((needs_sluice)); then
  [[ -x $sluice ]] || die "sluice binary '$sluice' not found (build it: scripts/build.sh, or pass --sluice)"
fi
if ((needs_30b)); then
  if [[ -z $model ]]; then
    [[ -n $synth_dir ]] || die "no --model given and no --synth-dir to synthesise it into"
    model="$synth_dir/qwen3-30b-a3b.gguf"
  fi
  if [[ ! -f $model ]]; then
    [[ -n $synth_dir ]] || die "model '$model' does not exist (pass --synth-dir DIR to synthesise it)"
    mkdir -p "$synth_dir"
    avail=$(df -Pk "$synth_dir" | awk 'NR == 2 {print $4}')
    ((avail > 18 * 1024 * 1024)) || die "synthesising needs ~17.4 GB in $synth_dir; only $((avail / 1024)) MiB free"
    say "synthesising qwen3-30b-a3b into $model (17.4 GB; minutes)"
    "$sluice" synth --preset qwen3-30b-a3b -o "$model"
  fi
fi
if has_step tiny; then
  [[ -n $tiny_model ]] || tiny_model="${SLUICE_SHARED_DIR:-/work/shared}/models/stories-moe-8x-q8_0.gguf"
  [[ -f $tiny_model ]] || die "tiny model '$tiny_model' not found (pass --tiny-model)"
fi

if has_step plot; then
  command -v gnuplot >/dev/null || die "gnuplot not found (scripts/deps.sh --with-plot installs gnuplot-nox)"
fi

# Can this host cap memory? Checked once, with a harmless command.
can_cap=1
if has_step cache || has_step cap; then
  if ! cap_err=$("$lowram" 64M -- true 2>&1); then
    can_cap=0
    msg="scripts/lowram.sh: ${cap_err##*lowram.sh: }"
    if ((skip_capped)); then
      warn "$msg; skipping every capped point (--skip-capped)"
    else
      die "$msg; or pass --skip-capped to run only the uncapped points"
    fi
  fi
fi

# ---- machine description (for the README's figures) --------------------------------
runs=0
for s in ceiling cache cap cold tiny; do has_step $s && runs=1; done
((runs)) && {
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "sluice: $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$repo" diff --quiet 2>/dev/null || echo ' (dirty)')"
  echo "kernel: $(uname -sr)"
  echo "cpu: $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo) x $(nproc)"
  echo "ram: $(awk '/^MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
  if [[ -n $model && -f $model ]]; then
    echo "model: $model ($(stat -c %s "$model") bytes)"
    echo "model filesystem: $(df -PT "$model" | awk 'NR == 2 {print $1, $2}')"
  fi
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "settings: -p $p -n $n -r $r -t $threads --io-threads $io_threads; tiny -p $tiny_p -n $tiny_n -r $tiny_r"
} >"$out/machine.txt"

# ---- runs ------------------------------------------------------------------------------
# bench_30b CSV CAP ARGS...: one `sluice bench -m` run of the 30B into CSV,
# under CAP ('none' = uncapped). Progress goes to the log.
bench_30b() {
  local csv=$1 cap=$2
  shift 2
  local cmd=("$sluice" bench -m "$model" -p "$p" -n "$n" -r "$r" -t "$threads" --io-threads "$io_threads"
             -o csv "$@")
  [[ -f $out/ceiling.json ]] && cmd+=(--io-ceiling "$out/ceiling.json")
  if [[ $cap != none ]]; then
    if ((!can_cap)); then
      warn "skipping $(basename "$csv") under $cap (cannot cap memory)"
      return 0
    fi
    cmd=("$lowram" "$cap" -- "${cmd[@]}")
  fi
  say "$(basename "$csv" .csv): cap $cap: ${*}"
  echo "### $(date +%T) cap $cap: ${cmd[*]}" >>"$log"
  "${cmd[@]}" >"$csv.tmp" 2>>"$log" || die "sluice bench failed (cap $cap, $*); see $log"
  mv "$csv.tmp" "$csv"
}

# Whether --cache-list holds the setting "off" (spelled off or 0) or "auto".
has_cache_setting() {
  local c
  for c in ${cache_list//,/ }; do
    [[ $c == "$1" || ( $1 == off && $c =~ ^0+$ ) ]] && return 0
  done
  return 1
}

start=$SECONDS
if has_step ceiling; then
  say "ceiling: sluice bench --io on the model file (direct and buffered, 1 s per point)"
  echo "### $(date +%T) ceiling" >>"$log"
  "$sluice" bench --io -m "$model" --lanes "$io_threads" --seconds 1 --both -o json \
    >"$out/ceiling.json.tmp" 2>>"$log" || die "sluice bench --io failed; see $log"
  mv "$out/ceiling.json.tmp" "$out/ceiling.json"
fi

if has_step cache; then
  bench_30b "$out/cache.csv" "$sweep_cap" --cache-mb "$cache_list"
fi

if has_step cap; then
  rm -f "$out"/cap_*.csv
  for cap in ${caps//,/ }; do
    if [[ $cap == "$sweep_cap" ]] && has_step cache && has_cache_setting off && has_cache_setting auto; then
      say "cap $cap: reusing the cache sweep's off and auto rows"
      continue
    fi
    bench_30b "$out/cap_$cap.csv" "$cap" --cache-mb off,auto
  done
fi

if has_step cold; then
  bench_30b "$out/cold_direct.csv" none --cache-mb off --cold
  bench_30b "$out/cold_buffered.csv" none --cache-mb off --cold --no-odirect
  # Warm: a discarded pass with the same prompts (they depend on seed and rep
  # only) loads the experts they route to into the page cache.
  bench_30b "$out/warmup.csv.discard" none --cache-mb off --no-odirect
  bench_30b "$out/warm_buffered.csv" none --cache-mb off --no-odirect
fi

if has_step tiny; then
  say "tiny: $(basename "$tiny_model") fully resident, -t 1,2"
  echo "### $(date +%T) tiny" >>"$log"
  "$sluice" bench -m "$tiny_model" --load-all -p "$tiny_p" -n "$tiny_n" -r "$tiny_r" -t 1,2 -o csv \
    >"$out/tiny.csv.tmp" 2>>"$log" || die "sluice bench (tiny) failed; see $log"
  mv "$out/tiny.csv.tmp" "$out/tiny.csv"
fi
if ((runs)); then
  echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg); runs took $((SECONDS - start)) s" >>"$out/machine.txt"
fi

# ---- merge and plot ----------------------------------------------------------------
# all.csv: every sweep's rows under one header, with a leading `sweep` column
# (cache, cap, cold_direct, cold_buffered, warm_buffered, tiny).
merge() {
  local f sweep header="" h
  for f in "$out"/cache.csv "$out"/cap_*.csv "$out"/cold_direct.csv "$out"/cold_buffered.csv \
           "$out"/warm_buffered.csv "$out"/tiny.csv; do
    [[ -f $f ]] || continue
    sweep=$(basename "$f" .csv)
    [[ $sweep == cap_* ]] && sweep=cap
    h=$(head -1 "$f")
    if [[ -z $header ]]; then
      header=$h
      echo "sweep,$header"
    elif [[ $h != "$header" ]]; then
      die "$f has a different CSV header from the other sweeps (written by another sluice version?)"
    fi
    tail -n +2 "$f" | sed "s/^/$sweep,/"
  done
}

# The plot's data, as whitespace tables gnuplot reads without CSV quirks, each
# sorted by x:
#   plot_cache.dat      cache_MiB decode_tps sd label    (cache sweep; label "auto" or "-")
#   plot_cap_off.dat    cap_GiB decode_tps sd label      (cap sweep + the cache sweep's row, cache off)
#   plot_cap_auto.dat   the same with --cache-mb auto
# An uncapped row (empty mem_cap_MiB) sits at the machine's RAM, labelled "none".
# all.csv lists the cache sweep before the cap sweep, so a cap sweep row at the
# same cap (from a run of --steps cap alone) replaces the cache sweep's row.
plot_data() {
  local ram_gib f
  ram_gib=$(awk '/^MemTotal/ {printf "%.1f", $2 / 1048576}' /proc/meminfo)
  rm -f "$out"/plot_*.dat
  touch "$out/plot_cache.dat" "$out/plot_cap_off.dat" "$out/plot_cap_auto.dat"
  awk -F, -v ram="$ram_gib" -v dir="$out" '
    NR == 1 { for (i = 1; i <= NF; ++i) col[$i] = i; next }
    {
      tps = $col["decode_tps"]; sd = $col["decode_tps_sd"]; c = $col["cache"]; mib = $col["cache_MiB"]
      cap = $col["mem_cap_MiB"]
      if (tps == "") next
      if ($1 == "cache") printf "%s %s %s %s\n", mib, tps, sd, (c == "auto" ? "auto" : "-") >> (dir "/plot_cache.dat")
      if (($1 == "cap" || $1 == "cache") && (c == "off" || c == "auto")) {
        gib = cap == "" ? ram : cap / 1024
        key = c SUBSEP gib
        # A cap sweep row wins over the cache sweep row at the same cap and setting.
        if ($1 == "cache" && (key in line)) next
        line[key] = sprintf("%s %s %s %s", gib, tps, sd, (cap == "" ? "none" : sprintf("%g", gib)))
        setting[key] = c
      }
    }
    END { for (k in line) print line[k] >> (dir "/plot_cap_" setting[k] ".dat") }' "$out/all.csv"
  for f in "$out"/plot_*.dat; do sort -g -o "$f" "$f"; done
}

if has_step plot; then
  merge >"$out/all.csv.tmp"
  mv "$out/all.csv.tmp" "$out/all.csv"
  [[ $(wc -l <"$out/all.csv") -gt 1 ]] || die "no bench CSV in $out to plot (run the sweeps first)"
  plot_data
  # The title describes the runs as the CSV records them (not this call's flags).
  read -r model_name settings < <(awk -F, '
    NR == 1 { for (i = 1; i <= NF; ++i) col[$i] = i; next }
    $1 == "cache" || $1 == "cap" {
      printf "%s -p %s -n %s -r %s, -t %s, io-threads %s\n", $col["model"], $col["n_prompt"], $col["n_gen"],
             $col["reps"], $col["threads"], $col["io_threads"]
      exit
    }' "$out/all.csv") || true  # only tiny rows: no 30B title
  gnuplot -e "dir='$out'; png='$png'; model='${model_name:-}'; sweep_cap='$sweep_cap'; settings='${settings:-}'" \
    "$repo/bench/plot.gp" || die "gnuplot failed on bench/plot.gp"
  say "wrote $out/all.csv and $png"
fi
say "done in $((SECONDS - start)) s$( ((runs)) && echo "; machine description in $out/machine.txt")"
