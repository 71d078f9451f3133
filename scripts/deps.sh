#!/usr/bin/env bash
# Installs the Debian packages sluice needs to build and test, if missing.
# As root it runs apt-get; otherwise it prints the apt-get line to run.
# Usage: scripts/deps.sh [--with-fuzz] [--with-plot] [--aarch64]
#   --with-fuzz  clang + libFuzzer runtime (scripts/fuzz.sh)
#   --with-plot  gnuplot-nox, for bench/figures.sh's plot (bench/plot.gp); CI does not need it
#   --aarch64    the cross compiler, qemu and the :arm64 libraries the build links
#                (scripts/build.sh --aarch64, scripts/test.sh --aarch64); adds the
#                arm64 dpkg architecture. nlohmann-json and CLI11 are header-only
#                (the build machine's copies serve); benchmark is not cross-built.
set -euo pipefail

pkgs=(g++ cmake ninja-build pkg-config libcli11-dev nlohmann-json3-dev libpcre2-dev
      liburing-dev libcpp-httplib-dev libgtest-dev libgmock-dev libbenchmark-dev libedit-dev
      python3-jinja2   # the reference renderer of the chat-template test
      help2man man-db  # the man page (built from --help) and its render check
      dpkg-dev)        # dpkg-shlibdeps: the .deb's Depends (scripts/package.sh)
for arg in "$@"; do
  case $arg in
    --with-fuzz) pkgs+=(clang libclang-rt-14-dev) ;;
    --with-plot) pkgs+=(gnuplot-nox) ;;
    --aarch64)
      aarch64=1
      pkgs+=(g++-aarch64-linux-gnu qemu-user-static libpcre2-dev:arm64 libedit-dev:arm64 libcpp-httplib-dev:arm64
             libgtest-dev:arm64 libgmock-dev:arm64) ;;
    *) echo "usage: scripts/deps.sh [--with-fuzz] [--with-plot] [--aarch64]" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

if [[ $(id -u) -eq 0 ]]; then
  echo "sluice: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  [[ -n ${aarch64:-} ]] && dpkg --add-architecture arm64
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "sluice: missing packages; run:" >&2
  [[ -n ${aarch64:-} ]] && echo "  sudo dpkg --add-architecture arm64 && sudo apt-get update" >&2
  echo "  sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
