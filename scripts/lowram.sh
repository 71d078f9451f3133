#!/usr/bin/env bash
# lowram.sh SIZE -- CMD [ARGS...]
# lowram.sh --bytes SIZE     prints SIZE in bytes (for scripts that record the cap)
#
# Runs CMD with its memory (anonymous + page cache) capped at SIZE and no swap,
# to reproduce "model bigger than RAM" on a large machine. SIZE is bytes or a
# number with a K/M/G/T suffix (powers of 1024), e.g. 2G, 512M.
#
# Tries, in order:
#   1. cgroup v2 (a cgroup2 mount with the memory controller): a child cgroup
#      with memory.max=SIZE, memory.swap.max=0;
#   2. cgroup v1 memory controller: memory.limit_in_bytes=SIZE (and
#      memory.memsw.limit_in_bytes=SIZE where swap accounting exists);
#   3. systemd-run --scope -p MemoryMax=SIZE -p MemorySwapMax=0 (needs a
#      running systemd).
# The cgroup is created by this script, CMD runs in a child process moved into
# it, and the cgroup is removed when CMD ends. Needs root (or a delegated
# cgroup). Exit status: CMD's; 125 when no method works. If the kernel
# OOM-killed something in the cgroup, a line on stderr says so.
set -euo pipefail

prog=lowram.sh
die() { echo "$prog: $*" >&2; exit 125; }
usage() { echo "usage: $prog SIZE -- CMD [ARGS...] | $prog --bytes SIZE   (SIZE: bytes or e.g. 512M, 2G)" >&2; exit 125; }

if [[ $# -eq 2 && $1 == --bytes ]]; then
  print_bytes=1
  size_arg=$2
else
  [[ $# -ge 3 && $2 == "--" ]] || usage
  print_bytes=0
  size_arg=$1
  shift 2
fi

to_bytes() {
  local s=${1^^} n mult=1
  [[ $s =~ ^([0-9]+)([KMGT]?)(I?B)?$ ]] || return 1
  n=${BASH_REMATCH[1]}
  case ${BASH_REMATCH[2]} in
    K) mult=1024 ;; M) mult=$((1024 ** 2)) ;; G) mult=$((1024 ** 3)) ;; T) mult=$((1024 ** 4)) ;;
  esac
  echo $((n * mult))
}
bytes=$(to_bytes "$size_arg") || die "SIZE '$size_arg' is not a size (expected bytes or e.g. 512M, 2G)"
((bytes >= 4 * 1024 * 1024)) || die "SIZE '$size_arg' is below 4 MiB; nothing useful runs in that"
if ((print_bytes)); then
  echo "$bytes"
  exit 0
fi

cg=""          # the cgroup directory we created
cg_kind=""     # v2 | v1
child=""

cleanup() {
  [[ -n $cg && -d $cg ]] || return 0
  # The cgroup empties once CMD and its descendants have exited; give stragglers a moment.
  local i
  for i in $(seq 1 50); do
    rmdir "$cg" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "$prog: warning: could not remove cgroup $cg (processes left in it?)" >&2
}
forward() { [[ -n $child ]] && kill -"$1" "$child" 2>/dev/null || true; }
trap cleanup EXIT
trap 'forward INT' INT
trap 'forward TERM' TERM

# The mount point of a cgroup2 hierarchy that offers the memory controller.
find_v2() {
  local dev mnt type rest
  while read -r dev mnt type rest; do
    [[ $type == cgroup2 ]] || continue
    grep -qw memory "$mnt/cgroup.controllers" 2>/dev/null && { echo "$mnt"; return 0; }
  done </proc/mounts
  return 1
}

# The mount point of the cgroup v1 memory hierarchy.
find_v1() {
  local dev mnt type opts rest
  while read -r dev mnt type opts rest; do
    [[ $type == cgroup && ,$opts, == *,memory,* ]] && { echo "$mnt"; return 0; }
  done </proc/mounts
  return 1
}

setup_v2() {
  local mnt=$1
  # Under the hierarchy root: a non-root cgroup holding processes could not
  # enable controllers for children ("no internal processes").
  grep -qw memory "$mnt/cgroup.subtree_control" 2>/dev/null ||
    echo +memory >"$mnt/cgroup.subtree_control" 2>/dev/null || return 1
  cg="$mnt/sluice-lowram.$$"
  mkdir "$cg" 2>/dev/null || { cg=""; return 1; }
  echo "$bytes" >"$cg/memory.max" || return 1
  if [[ -e $cg/memory.swap.max ]]; then echo 0 >"$cg/memory.swap.max" || return 1; fi
  cg_kind=v2
}

setup_v1() {
  local mnt=$1 parent here
  # Nest under our current memory cgroup when it is visible, so any limit
  # already placed on us keeps applying.
  here=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ {print $3}' /proc/self/cgroup)
  parent=$mnt
  [[ -n $here && -d $mnt$here ]] && parent=$mnt$here
  cg="$parent/sluice-lowram.$$"
  mkdir "$cg" 2>/dev/null || { cg=""; return 1; }
  echo "$bytes" >"$cg/memory.limit_in_bytes" || return 1
  if [[ -e $cg/memory.memsw.limit_in_bytes ]]; then
    echo "$bytes" >"$cg/memory.memsw.limit_in_bytes" || return 1
  fi
  [[ -e $cg/memory.swappiness ]] && { echo 0 >"$cg/memory.swappiness" 2>/dev/null || true; }
  cg_kind=v1
}

# Reports an OOM kill inside our cgroup, if the kernel recorded one.
report_oom() {
  local n=0
  if [[ $cg_kind == v2 && -r $cg/memory.events ]]; then
    n=$(awk '$1 == "oom_kill" {print $2}' "$cg/memory.events")
  elif [[ $cg_kind == v1 && -r $cg/memory.oom_control ]]; then
    n=$(awk '$1 == "oom_kill" {print $2}' "$cg/memory.oom_control")
  fi
  if [[ ${n:-0} -gt 0 ]]; then
    echo "$prog: the kernel OOM-killed $n process(es) in the $size_arg memory cgroup" >&2
  fi
}

method=""
if mnt=$(find_v2) && setup_v2 "$mnt"; then
  method="cgroup v2 ($cg)"
elif [[ -n $cg ]]; then
  rmdir "$cg" 2>/dev/null || true
  cg=""
fi
if [[ -z $method ]] && mnt=$(find_v1) && setup_v1 "$mnt"; then
  method="cgroup v1 ($cg)"
elif [[ -z $method && -n $cg ]]; then
  rmdir "$cg" 2>/dev/null || true
  cg=""
fi

if [[ -n $method ]]; then
  echo "$prog: memory capped at $size_arg ($bytes bytes), no swap, via $method" >&2
  # The child joins the cgroup itself, then becomes CMD; this shell stays
  # outside so it can remove the cgroup afterwards.
  (echo "$BASHPID" >"$cg/cgroup.procs" && exec "$@") &
  child=$!
  status=0
  wait "$child" || status=$?
  # wait returns early (>128) when a trapped signal arrives; wait again for the real end.
  while kill -0 "$child" 2>/dev/null; do wait "$child" || status=$?; done
  report_oom
  exit "$status"
fi

if command -v systemd-run >/dev/null 2>&1 && [[ -d /run/systemd/system ]]; then
  echo "$prog: memory capped at $size_arg via systemd-run --scope" >&2
  trap - EXIT
  exec systemd-run --quiet --scope -p MemoryMax="$bytes" -p MemorySwapMax=0 -- "$@"
fi

die "cannot cap memory: no writable cgroup v2 memory controller, no cgroup v1 memory" \
  "hierarchy, and no running systemd for systemd-run (run as root, or on a host with cgroups)"
