#!/usr/bin/env bash
# Builds the Debian package with CPack: BUILD_DIR/package/sluice_VERSION_ARCH.deb
# (version from project() in CMakeLists.txt; Depends from dpkg-shlibdeps).
# Usage: scripts/package.sh [BUILD_DIR]   (default build; an existing build is reused)
# Prints the .deb's path on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
scripts/deps.sh
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C "$dir" sluice_dist >/dev/null  # the binary, man page and completion; not the tests
rm -rf "$dir/package"
(cd "$dir" && cpack -G DEB >package.log 2>&1) || { cat "$dir/package.log" >&2; exit 1; }
ls "$dir"/package/sluice_*.deb
