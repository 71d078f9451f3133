#!/usr/bin/env bash
# Runs .ci/run from a fresh clone inside a clean Debian 12 root, the way CI's fresh
# machine starts: no compiler, no git, no python3, nothing the project installed.
#   scripts/clean_root_ci.sh [ROOT_DIR]     (as root; default /var/tmp/sluice-clean-root)
# Makes ROOT_DIR with debootstrap (installed with apt-get if missing) unless it already holds a
# root, clones this repository's HEAD into ROOT_DIR/ci/repo, copies ../shared beside it when
# present, binds /proc, /sys (cgroups: scripts/lowram.sh caps memory) and /dev, runs
# `CI=true bash .ci/run` under chroot and prints how long it took. Network: Debian's archive
# (and npm, if the root gets Node.js). The binds are undone when the script exits, however it
# exits (a kill -9 cannot be trapped: then run `umount -R ROOT_DIR/{proc,sys,dev}` by hand).
# Never `rm -rf ROOT_DIR` while anything is mounted under it: through the /dev bind that
# deletes the host's device nodes.
set -euo pipefail
cd "$(dirname "$0")/.."
root=${1:-/var/tmp/sluice-clean-root}
[[ $(id -u) == 0 ]] || { echo "clean_root_ci.sh: run as root (debootstrap, mount, chroot)" >&2; exit 1; }
if [[ ! -x $root/bin/bash ]]; then
  command -v debootstrap >/dev/null || apt-get install -y debootstrap
  echo "clean_root_ci: debootstrap bookworm $root"
  debootstrap bookworm "$root" http://deb.debian.org/debian
fi
unbind() {
  local m
  for m in dev sys proc; do mountpoint -q "$root/$m" && umount -R "$root/$m" || true; done
}
trap unbind EXIT
mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
mountpoint -q "$root/sys" || mount --rbind /sys "$root/sys"
mountpoint -q "$root/dev" || mount --rbind /dev "$root/dev"
cp /etc/resolv.conf "$root/etc/resolv.conf"
rm -rf "$root/ci" && mkdir -p "$root/ci"
git clone -q . "$root/ci/repo"
[[ -d ../shared ]] && cp -r ../shared "$root/ci/shared"
echo "clean_root_ci: $(git -C "$root/ci/repo" log --oneline -1)"
start=$(date +%s)
rc=0
chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 CI=true \
  bash -c 'cd /ci/repo && bash .ci/run' || rc=$?
echo "clean_root_ci: .ci/run exit $rc after $(($(date +%s) - start)) s"
exit "$rc"
