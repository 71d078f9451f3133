# shellcheck shell=bash
# bench/llama_common.sh — sourced by bench/figures.sh (--llama-bench) and
# bench/vs_llama.sh: the pieces both need to run llama.cpp's llama-bench beside
# `sluice bench` with the same meaning. Not a script of its own.
#
# The caller defines die MESSAGE and warn MESSAGE (each prints with its own
# program name; die exits), and may set `log` to a file that gets a line per
# page-cache drop.
#
# How llama-bench's figures map onto `sluice bench -m`'s (bench/README.md):
#   sluice prefill_tps = P / the wall time of a P-token prompt, from an empty context;
#     llama-bench pp P   (-p P -n 0): the same.
#   sluice decode_tps  = N / the wall time of N one-token steps that follow the
#     P-token prefill of the same repetition (context depth P);
#     llama-bench tg N @ d P (-p 0 -n N -d P): an untimed P-token prefill, then N timed
#     one-token steps: the same.
# Each figure is its own llama-bench test, so the two run as separate tests
# (llama_test_args); both are llama-bench's avg_ts over its repetitions.
#
# Every engine process runs under timeout(1) (the scripts' --timeout): an mmap
# engine whose working set is just above a memory cap is not OOM-killed but
# thrashes (pages of the mapped file evicted and read back, for ever; seen with
# llama-bench on a 1.7 GB model under a 1 GiB cap: 20 minutes at 27% CPU on an
# 8-token prompt), so a run that cannot finish must be stopped and reported.

# llama_test_args KIND P N: sets the array LLAMA_TEST_ARGS to llama-bench's
# arguments for KIND pp (prefill of P tokens) or tg (N decode steps at depth P).
# shellcheck disable=SC2034  # read by the scripts that source this file
llama_test_args() {
  case $1 in
    pp) LLAMA_TEST_ARGS=(-p "$2" -n 0) ;;
    tg) LLAMA_TEST_ARGS=(-p 0 -n "$3" -d "$2") ;;
    *) die "llama_test_args: unknown kind '$1'" ;;
  esac
}

# An awk function, to prepend to awk programs that read llama-bench -o csv:
# split_csv(line, f) splits one row into f[1..n] and returns n. llama-bench
# quotes every value and doubles quotes inside (its header is unquoted).
# shellcheck disable=SC2034  # used by the scripts that source this file
LLAMA_CSV_AWK='
function split_csv(line, f,    n, i, c, q, cur) {
  n = 0; cur = ""; q = 0
  for (i = 1; i <= length(line); ++i) {
    c = substr(line, i, 1)
    if (q) {
      if (c != "\"") cur = cur c
      else if (substr(line, i + 1, 1) == "\"") { cur = cur c; ++i }
      else q = 0
    } else if (c == "\"") q = 1
    else if (c == ",") { f[++n] = cur; cur = "" }
    else cur = cur c
  }
  f[++n] = cur
  return n
}
'

# drop_page_cache FILE: empties the page cache before a cold process, so an
# mmap engine reads FILE from the disk and, under a memory cgroup, its page
# cache is charged to that cgroup (pages cached earlier are not).
# `sync; echo 3 >/proc/sys/vm/drop_caches` where permitted (root). Where not
# (no root, or /proc/sys read-only in a container) it drops FILE's own pages
# instead with `dd iflag=nocache count=0` (posix_fadvise DONTNEED on the whole
# file: no root needed; it drops the clean pages no process maps, which is every
# page of FILE once the previous process has exited), with one warning. Dies
# when neither works. BENCH_DROP_CACHES=file asks for the file-only drop even
# as root (the scripts' tests use it, so they leave a shared machine's page
# cache alone). With fincore (util-linux), $log records how much of FILE was
# still cached afterwards.
_drop_warned=0
drop_page_cache() {
  local file=$1
  sync
  if [[ ${BENCH_DROP_CACHES:-} == file ]]; then
    dd if="$file" iflag=nocache count=0 status=none || die "'dd iflag=nocache' failed on '$file'"
  elif ! { echo 3 >/proc/sys/vm/drop_caches; } 2>/dev/null; then
    dd if="$file" iflag=nocache count=0 status=none ||
      die "cannot drop the page cache: /proc/sys/vm/drop_caches is not writable and 'dd iflag=nocache' failed on '$file'"
    if ((!_drop_warned)); then
      warn "/proc/sys/vm/drop_caches is not writable (not root?): dropping only $(basename "$file")'s cached pages (dd iflag=nocache) before each cold process"
      _drop_warned=1
    fi
  fi
  if [[ -n ${log:-} ]] && command -v fincore >/dev/null; then
    echo "page cache after the drop: $(fincore -n -o RES "$file" 2>&1) of $(basename "$file") resident" >>"$log" ||
      die "cannot write $log"
  fi
}

# llama_failure_reason ERRFILE STATUS TIMEOUT: a short phrase for a failed
# run (for warnings, tables and llama_failed.csv): "timed out after TIMEOUT s"
# for timeout(1)'s status 124, OOM-killed when scripts/lowram.sh reported an OOM
# kill, else the exit status.
llama_failure_reason() {
  if (($2 == 124)); then
    echo "timed out after $3 s"
  elif grep -q "OOM-killed" "$1" 2>/dev/null; then
    echo "OOM-killed"
  else
    echo "exit status $2"
  fi
}
