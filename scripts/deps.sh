#!/usr/bin/env bash
# Installs the Debian packages sluice needs to build and test, if missing.
# As root it runs apt-get; otherwise it prints the apt-get line to run.
# Usage: scripts/deps.sh [--check] [--with-fuzz] [--with-plot] [--aarch64]
#   (no mode)    the native build, the ASan+UBSan build, the tests, install and .deb
#   --with-fuzz  clang + libFuzzer runtime (scripts/fuzz.sh)
#   --with-plot  gnuplot-nox, for bench/figures.sh's plot (bench/plot.gp); CI does not need it
#   --aarch64    the cross compiler, qemu and the :arm64 libraries the static build links
#                (scripts/build.sh --aarch64, scripts/test.sh --aarch64); adds the
#                arm64 dpkg architecture. nlohmann-json and CLI11 are header-only
#                (the build machine's copies serve); benchmark is not cross-built.
#   --check      installs nothing: names every package, pkg-config module and tool the
#                chosen modes need that this machine lacks; exit 1 if any is missing.
# This list is the one place that knows what a fresh Debian 12 machine must get: a package
# installed by hand and missing here makes CI fail on the next fresh machine.
set -euo pipefail

pkgs=(g++ cmake ninja-build pkg-config libcli11-dev nlohmann-json3-dev libpcre2-dev
      liburing-dev libcpp-httplib-dev libgtest-dev libgmock-dev libbenchmark-dev libedit-dev
      python3-jinja2   # the reference renderer of the chat-template test
      help2man man-db  # the man page (built from --help) and its render check
      dpkg-dev         # dpkg-shlibdeps: the .deb's Depends (scripts/package.sh)
      file)            # CPack's DEB generator runs file(1) before dpkg-shlibdeps (not in a bare Debian root)
# pkg-config modules CMakeLists.txt asks for, per target architecture.
native_modules=(libpcre2-8 libedit liburing cpp-httplib)
arm64_modules=(libpcre2-8 libedit liburing)
tools=(g++ cmake ninja pkg-config help2man man dpkg-shlibdeps file)
check=
for arg in "$@"; do
  case $arg in
    --check) check=1 ;;
    --with-fuzz) pkgs+=(clang libclang-rt-14-dev); tools+=(clang++) ;;
    --with-plot) pkgs+=(gnuplot-nox); tools+=(gnuplot) ;;
    --aarch64)
      aarch64=1
      pkgs+=(g++-aarch64-linux-gnu qemu-user-static libpcre2-dev:arm64 libedit-dev:arm64
             libcpp-httplib-dev:arm64 liburing-dev:arm64 libgtest-dev:arm64 libgmock-dev:arm64)
      tools+=(aarch64-linux-gnu-g++ qemu-aarch64-static) ;;
    *) echo "usage: scripts/deps.sh [--check] [--with-fuzz] [--with-plot] [--aarch64]" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [[ -n $check ]]; then
  problems=()
  ((${#missing[@]})) && problems+=("packages: ${missing[*]}")
  for t in "${tools[@]}"; do command -v "$t" >/dev/null || problems+=("tool: $t"); done
  python3 -c 'import jinja2' 2>/dev/null || problems+=("python module: jinja2")
  if command -v pkg-config >/dev/null; then
    for m in "${native_modules[@]}"; do
      pkg-config --exists "$m" || problems+=("pkg-config module (native): $m")
    done
    if [[ -n ${aarch64:-} ]]; then
      for m in "${arm64_modules[@]}"; do
        PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig PKG_CONFIG_PATH= \
          pkg-config --exists "$m" || problems+=("pkg-config module (arm64): $m")
      done
    fi
  fi
  if ((${#problems[@]})); then
    printf 'deps: missing %s\n' "${problems[@]}" >&2
    echo "deps: run scripts/deps.sh $(printf '%s ' "$@" | sed 's/--check //')as root to install them" >&2
    exit 1
  fi
  echo "deps: nothing missing (${#pkgs[@]} packages, ${#tools[@]} tools)"
  exit 0
fi

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
