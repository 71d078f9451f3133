#!/usr/bin/env bash
# bench/figures.sh — the reproducible recipe behind the memory-cap figures of
# docs/benchmarks.md (bench/figures.png). Output goes under bench/out/ (git-ignored).
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
#   tiny     the trained tiny MoE fully resident (--load-all), -t 1,2;
#   llama    (only with --llama-bench PATH) llama.cpp's llama-bench on the same
#            file under the same --caps, cold per process (see run_llama below);
#            its rows join all.csv with engine=llama.cpp and the plot's cap panel.
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
  --llama-bench PATH  also run llama.cpp's llama-bench on the model under every --caps entry
                      (step 'llama', added to the default steps); one cold repetition per
                      process, -r processes per point and metric
  --llama-args ARGS   extra llama-bench arguments, split on spaces (e.g. '-fa on')
  --llama-timeout S   stop a llama-bench process after S seconds and record it as failed
                      (default 1200; under a cap just below its footprint it thrashes)
output
  --out DIR           CSVs, ceiling.json, machine.txt, logs (default: bench/out/figures)
  --png PATH          the plot (default: OUT/figures.png)
sizes (per configuration)
  -p N -n N -r N      30B prompt tokens, decode steps, repetitions (default 16, 16, 2)
  --tiny-p N --tiny-n N --tiny-r N   tiny MoE (default 128, 128, 3)
  -t LIST             30B compute threads (default: nproc)
  --io-threads N      30B expert read lanes (default 4)
sweeps
  --cache-list LIST   cache sweep budgets (default 0,1000,2000,4000,auto)
  --sweep-cap SIZE    cap of the cache sweep (default 8G)
  --caps LIST         cap sweep, sizes or 'none' (default 4G,8G,16G,none)
  --steps LIST        which of ceiling,cache,cap,cold,tiny,llama,plot to run (default: all;
                      llama only with --llama-bench); 'plot' alone re-plots the CSVs in --out
  --skip-capped       when memory cannot be capped, skip capped points (warning) instead of failing
  -h, --help
EOF
}

model="" synth_dir="" tiny_model="" sluice="$repo/build/sluice"
out="$repo/bench/out/figures" png=""
p=16 n=16 r=2 tiny_p=128 tiny_n=128 tiny_r=3
threads=$(nproc) io_threads=4
cache_list="0,1000,2000,4000,auto" sweep_cap=8G caps="4G,8G,16G,none"
steps="ceiling,cache,cap,cold,tiny,plot" steps_given=0 skip_capped=0
llama_bench="" llama_args="" llama_timeout=1200

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
    --steps) need_arg "$@"; steps=$2; steps_given=1; shift 2 ;;
    --llama-bench) need_arg "$@"; llama_bench=$2; shift 2 ;;
    --llama-args) need_arg "$@"; llama_args=$2; shift 2 ;;
    --llama-timeout) need_arg "$@"; llama_timeout=$2; shift 2 ;;
    --skip-capped) skip_capped=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument '$1'" ;;
  esac
done

for flag_var in -p:p -n:n -r:r --tiny-p:tiny_p --tiny-n:tiny_n --tiny-r:tiny_r --io-threads:io_threads \
                --llama-timeout:llama_timeout; do
  v=${flag_var#*:}
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "${flag_var%%:*} must be a positive integer (got '${!v}')"
done
[[ -n $llama_bench && $steps_given == 0 ]] && steps="ceiling,cache,cap,cold,tiny,llama,plot"
has_step() { [[ ,$steps, == *,$1,* ]]; }
for s in ${steps//,/ }; do
  [[ $s =~ ^(ceiling|cache|cap|cold|tiny|llama|plot)$ ]] ||
    die "--steps: unknown step '$s' (ceiling,cache,cap,cold,tiny,llama,plot)"
done
if has_step llama; then
  [[ -n $llama_bench ]] || die "--steps llama needs --llama-bench PATH"
  [[ -x $llama_bench && ! -d $llama_bench ]] ||
    die "--llama-bench: '$llama_bench' is not an executable file (build it: bench/README.md, 'llama.cpp side by side')"
fi

mkdir -p "$out" || die "--out: cannot create '$out'"
[[ -n $png ]] || png="$out/figures.png"
[[ -w $out ]] || die "--out: '$out' is not writable"
log="$out/figures.log"
lowram="$repo/scripts/lowram.sh"
# shellcheck source=bench/llama_common.sh
source "$repo/bench/llama_common.sh"

# ---- inputs ----------------------------------------------------------------------
needs_30b=0
for s in ceiling cache cap cold llama; do has_step $s && needs_30b=1; done
needs_sluice=0
for s in ceiling cache cap cold tiny; do has_step $s && needs_sluice=1; done
# Synthesising the model (below) needs sluice too.
[[ -n $model && -f $model ]] || { ((needs_30b)) && needs_sluice=1; }
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
if has_step cache || has_step cap || has_step llama; then
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

# ---- machine description (for docs/benchmarks.md) ------------------------------------
runs=0
for s in ceiling cache cap cold tiny llama; do has_step $s && runs=1; done
if ((runs)); then
  {
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
    if has_step llama; then
      echo "llama-bench: $llama_bench${llama_args:+ (extra args: $llama_args)}; build in llama_raw_*.csv"
    fi
  } >"$out/machine.txt" || die "cannot write $out/machine.txt"
fi

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
# ---- llama.cpp side by side (--llama-bench) -----------------------------------------------
# The cap sweep's protocol for an mmap engine. sluice's cap rows are cold by
# construction: its expert reads use O_DIRECT, so a repetition never finds them
# in the page cache. llama.cpp maps the file, so a second repetition in the same
# process (or a process started while the file is still cached) would run from
# the page cache the first one filled; and under a memory cgroup, pages cached
# before the process started are not charged to it, so the cap would not bite.
# Hence: one repetition per process (-r 1, --no-warmup: llama-bench's warm-up
# pass would pre-read the weights), the page cache dropped before each process
# (drop_page_cache in bench/llama_common.sh, which says what happens where that is
# not permitted), -r processes per cap and metric; the mean and sample sd are
# over processes. Prefill is pp P, decode tg N at depth P: bench/llama_common.sh
# says why those mean what sluice's prefill_tps and decode_tps mean.
# Threads are -t; -lm mmap states the load mode (llama-bench's "auto" is mmap on CPU).
# A failed process (OOM-killed under a cap, or stopped after --llama-timeout
# seconds: see bench/llama_common.sh) skips the rest of that cap with a warning
# and is listed in llama_failed.csv, which the plot marks.

# llama_one CAP KIND RAW: one cold llama-bench process (KIND pp or tg) under CAP,
# its CSV rows appended to RAW (llama-bench's own format, header once).
# Returns non-zero when llama-bench failed; llama_why says why.
llama_one() {
  local cap=$1 kind=$2 raw=$3 rc=0
  llama_test_args "$kind" "$p" "$n"
  local cmd=("$llama_bench" -m "$model" -t "$threads" -r 1 --no-warmup -lm mmap -o csv "${LLAMA_TEST_ARGS[@]}"
             "${llama_extra[@]}")
  [[ $cap == none ]] || cmd=("$lowram" "$cap" -- "${cmd[@]}")
  cmd=(timeout --kill-after=30 "$llama_timeout" "${cmd[@]}")
  drop_page_cache "$model"
  echo "### $(date +%T) llama.cpp cap $cap $kind: ${cmd[*]}" >>"$log"
  "${cmd[@]}" >"$out/llama.out.tmp" 2>"$out/llama.err.tmp" || rc=$?
  cat "$out/llama.err.tmp" >>"$log"
  if ((rc != 0)); then
    llama_why=$(llama_failure_reason "$out/llama.err.tmp" "$rc" "$llama_timeout")
    grep -q "cannot cap memory" "$out/llama.err.tmp" && die "scripts/lowram.sh cannot cap memory; see $log"
    rm -f "$out/llama.out.tmp" "$out/llama.err.tmp"
    return 1
  fi
  rm -f "$out/llama.err.tmp"
  [[ $(head -1 "$out/llama.out.tmp") == build_commit,* ]] ||
    die "llama-bench -o csv printed no CSV header (cap $cap, $kind); see $out/llama.out.tmp and $log"
  if [[ ! -s $raw ]]; then
    head -1 "$out/llama.out.tmp" >"$raw" || die "cannot write $raw"
  fi
  tail -n +2 "$out/llama.out.tmp" >>"$raw" || die "cannot write $raw"
  rm -f "$out/llama.out.tmp"
}

# llama_convert RAW CAP CSV: llama-bench's rows for one cap as sluice bench CSV
# columns (merge() fills the rest, empty): per thread count, prefill and decode
# mean and sample sd over the processes, reps = processes. The cap is recorded
# as given (sluice reads its mem_cap_MiB from the cgroup instead); empty = none.
llama_convert() {
  local raw=$1 cap=$2 csv=$3 cap_mib=""
  if [[ $cap != none ]]; then
    cap_mib=$("$lowram" --bytes "$cap") || die "--caps: '$cap' is not a size"
    cap_mib=$((cap_mib / 1048576))
  fi
  awk -v cap_mib="$cap_mib" "$LLAMA_CSV_AWK"'
    function stats(key, kind,    k, m, ss, c) {
      c = cnt[key, kind]; m = 0; ss = 0
      if (c == 0) { mean = ""; sd = ""; return }
      for (k = 1; k <= c; ++k) m += v[key, kind, k]
      m /= c
      for (k = 1; k <= c; ++k) ss += (v[key, kind, k] - m) ^ 2
      mean = sprintf("%.3f", m); sd = sprintf("%.3f", c > 1 ? sqrt(ss / (c - 1)) : 0)
    }
    NR == 1 { nh = split_csv($0, h); for (i = 1; i <= nh; ++i) col[h[i]] = i; next }
    {
      split_csv($0, f)
      t = f[col["n_threads"]]
      if (!(t in seen)) { seen[t] = 1; order[++nt] = t }
      kind = f[col["n_gen"]] + 0 > 0 ? "tg" : "pp"
      v[t, kind, ++cnt[t, kind]] = f[col["avg_ts"]]
      if (kind == "pp") np = f[col["n_prompt"]]; else { ng = f[col["n_gen"]]; np = f[col["n_depth"]] }
      name = f[col["model_filename"]]; sub(/.*\//, "", name)
    }
    END {
      print "model,threads,dense_weights,odirect,load_all,cold,n_prompt,n_gen,reps,prefill_tps,prefill_tps_sd,decode_tps,decode_tps_sd,mem_cap_MiB"
      for (i = 1; i <= nt; ++i) {
        t = order[i]
        reps = cnt[t, "pp"] > cnt[t, "tg"] ? cnt[t, "pp"] : cnt[t, "tg"]
        stats(t, "pp"); pm = mean; ps = sd
        stats(t, "tg")
        printf "%s,%s,mmap,0,0,1,%s,%s,%d,%s,%s,%s,%s,%s\n", name, t, np, ng, reps, pm, ps, mean, sd, cap_mib
      }
    }' "$raw" >"$csv.tmp" || die "cannot convert $raw"
  mv "$csv.tmp" "$csv" || die "cannot write $csv"
}

if has_step llama; then
  read -r -a llama_extra <<<"$llama_args"
  rm -f "$out"/llama_raw_*.csv "$out"/llama_cap_*.csv "$out/llama_failed.csv"
  llama_rows=0
  for cap in ${caps//,/ }; do
    if [[ $cap != none ]] && ((!can_cap)); then
      warn "skipping llama.cpp under $cap (cannot cap memory)"
      continue
    fi
    say "llama: cap $cap: llama-bench pp$p and tg$n@d$p, $r cold process(es) each"
    raw="$out/llama_raw_$cap.csv" ok=1
    for ((rep = 1; rep <= r && ok; ++rep)); do
      for kind in pp tg; do
        if ! llama_one "$cap" "$kind" "$raw"; then
          warn "llama-bench failed under cap $cap ($kind, process $rep: $llama_why); no llama.cpp row for this cap"
          echo "$cap,$kind,$llama_why" >>"$out/llama_failed.csv" || die "cannot write $out/llama_failed.csv"
          ok=0
          break
        fi
      done
    done
    if ((ok)); then
      llama_convert "$raw" "$cap" "$out/llama_cap_$cap.csv"
      llama_rows=1
    fi
  done
  ((llama_rows)) || [[ -f $out/llama_failed.csv ]] || die "no llama.cpp point ran (every cap skipped)"
fi

if ((runs)); then
  echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg); runs took $((SECONDS - start)) s" >>"$out/machine.txt"
fi

# ---- merge and plot ----------------------------------------------------------------
# all.csv: every sweep's rows under one header, with a leading `sweep` column
# (cache, cap, cold_direct, cold_buffered, warm_buffered, tiny). When llama.cpp
# rows exist (llama_cap_*.csv, --llama-bench), a second column `engine` (sluice or
# llama.cpp) follows, and the llama.cpp rows join the cap sweep (sweep = cap):
# their columns are placed by name under sluice's header, the others left empty.
merge() {
  local f sweep header="" h engine=0
  compgen -G "$out/llama_cap_*.csv" >/dev/null && engine=1
  for f in "$out"/cache.csv "$out"/cap_*.csv "$out"/cold_direct.csv "$out"/cold_buffered.csv \
           "$out"/warm_buffered.csv "$out"/tiny.csv; do
    [[ -f $f ]] || continue
    sweep=$(basename "$f" .csv)
    [[ $sweep == cap_* ]] && sweep=cap
    ((engine)) && sweep="$sweep,sluice"
    h=$(head -1 "$f")
    if [[ -z $header ]]; then
      header=$h
      echo "sweep,$( ((engine)) && echo "engine,")$header"
    elif [[ $h != "$header" ]]; then
      die "$f has a different CSV header from the other sweeps (written by another sluice version?)"
    fi
    tail -n +2 "$f" | sed "s/^/$sweep,/"
  done
  ((engine)) || return 0
  for f in "$out"/llama_cap_*.csv; do
    if [[ -z $header ]]; then  # llama.cpp rows only: their own columns
      header=$(head -1 "$f")
      echo "sweep,engine,$header"
    fi
    awk -F, -v header="$header" -v file="$f" '
      BEGIN { n = split(header, name, ",") }
      NR == 1 {
        for (i = 1; i <= NF; ++i) col[$i] = i
        for (i = 1; i <= n; ++i) known[name[i]] = 1
        for (i = 1; i <= NF; ++i) if (!($i in known)) {
          printf "figures.sh: error: %s: column %s is not in sluice bench'"'"'s CSV header\n", file, $i > "/dev/stderr"
          exit 1
        }
        next
      }
      {
        line = "cap,llama.cpp"
        for (i = 1; i <= n; ++i) line = line "," (name[i] in col ? $col[name[i]] : "")
        print line
      }' "$f" || exit 1
  done
}

# The plot's data, as whitespace tables gnuplot reads without CSV quirks, each
# sorted by x:
#   plot_cache.dat      cache_MiB decode_tps sd label    (cache sweep; label "auto" or "-")
#   plot_cap_off.dat    cap_GiB decode_tps sd label      (cap sweep + the cache sweep's row, cache off)
#   plot_cap_auto.dat   the same with --cache-mb auto
#   plot_cap_llama.dat  the same for llama.cpp's rows (engine column, --llama-bench)
#   plot_cap_llama_failed.dat  cap_GiB label: caps where llama-bench failed (llama_failed.csv)
# An uncapped row (empty mem_cap_MiB) sits at the machine's RAM, labelled "none".
# all.csv lists the cache sweep before the cap sweep, so a cap sweep row at the
# same cap (from a run of --steps cap alone) replaces the cache sweep's row.
plot_data() {
  local ram_gib f
  ram_gib=$(awk '/^MemTotal/ {printf "%.1f", $2 / 1048576}' /proc/meminfo)
  rm -f "$out"/plot_*.dat
  touch "$out/plot_cache.dat" "$out/plot_cap_off.dat" "$out/plot_cap_auto.dat" "$out/plot_cap_llama.dat" \
        "$out/plot_cap_llama_failed.dat" || die "cannot write the plot tables in $out"
  awk -F, -v ram="$ram_gib" -v dir="$out" '
    NR == 1 { for (i = 1; i <= NF; ++i) col[$i] = i; next }
    {
      tps = $col["decode_tps"]; sd = $col["decode_tps_sd"]; c = $col["cache"]; mib = $col["cache_MiB"]
      cap = $col["mem_cap_MiB"]
      if (tps == "") next
      if (("engine" in col) && $col["engine"] == "llama.cpp") {
        gib = cap == "" ? ram : cap / 1024
        printf "%s %s %s %s\n", gib, tps, sd, (cap == "" ? "none" : sprintf("%g", gib)) >> (dir "/plot_cap_llama.dat")
        next
      }
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
    END { for (k in line) print line[k] >> (dir "/plot_cap_" setting[k] ".dat") }' "$out/all.csv" ||
    die "cannot derive the plot tables from $out/all.csv"
  if [[ -f $out/llama_failed.csv ]]; then
    local cap why gib
    while IFS=, read -r cap _ why; do
      if [[ $cap == none ]]; then
        gib=$ram_gib
      else
        gib=$(awk -v b="$("$lowram" --bytes "$cap")" 'BEGIN { printf "%g", b / 1073741824 }')
      fi
      echo "$gib ${why// /_}"
    done <"$out/llama_failed.csv" | sort -u -g >>"$out/plot_cap_llama_failed.dat" ||
      die "cannot write $out/plot_cap_llama_failed.dat"
  fi
  for f in "$out"/plot_*.dat; do sort -g -o "$f" "$f"; done
}

if has_step plot; then
  merge >"$out/all.csv.tmp" || die "cannot merge the CSV files in $out into all.csv"
  mv "$out/all.csv.tmp" "$out/all.csv" || die "cannot write $out/all.csv"
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
