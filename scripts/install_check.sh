#!/usr/bin/env bash
# Checks what users get from `cmake --install` and from the .deb:
#  - a fresh install into a temporary prefix after building only the `sluice` target: bin/sluice --version, the man
#    page renders with `man -l`, the bash completion sources and completes
#    commands and flags, the docs are there;
#  - scripts/package.sh's .deb: dpkg-deb --info/--contents list the files and
#    Depends; in CI (CI=true, as root) it is installed with apt-get, run as
#    /usr/bin/sluice --version, and removed.
# Usage: scripts/install_check.sh [BUILD_DIR]   (default build, reused as scripts/test.sh left it)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
fail() { echo "install_check: $*" >&2; exit 1; }

scripts/deps.sh
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
# A user who built only the binary (`ninja sluice`) installs the man page and
# completion too: they are steps of the binary's own build. Checked from a
# state where neither exists and the binary must be relinked.
rm -rf "$dir/completion" "$dir/man" "$dir/sluice"
ninja -C "$dir" sluice >/dev/null
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$dir" --prefix "$prefix" >/dev/null

echo "== installed files"
version=$("$prefix/bin/sluice" --version) || fail "$prefix/bin/sluice --version failed"
[[ $version == "sluice "* ]] || fail "--version printed '$version'"
echo "$version"
for f in share/man/man1/sluice.1 share/bash-completion/completions/sluice share/doc/sluice/README.md \
         share/doc/sluice/LICENSE share/doc/sluice/docs/architecture.md; do
  [[ -s $prefix/$f ]] || fail "$prefix/$f is missing or empty"
done

echo "== man page"
page=$(MANWIDTH=100 man -P cat -l "$prefix/share/man/man1/sluice.1" 2>&1) || fail "man -l failed: $page"
for want in NAME SYNOPSIS EXAMPLES "streaming experts from flash" run serve; do
  grep -q -- "$want" <<<"$page" || fail "the man page lacks '$want'"
done

echo "== bash completion"
# Prints the completions of a command line whose last word is being typed.
complete_words() {
  bash --norc --noprofile -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1));
    _sluice; printf "%s\n" "${COMPREPLY[@]}"' _ "$prefix/share/bash-completion/completions/sluice" "$@"
}
got=$(complete_words sluice r | sort | tr '\n' ' ')
[[ $got == "repack route-predict run " ]] || fail "'sluice r<TAB>' completed to '$got', expected 'repack route-predict run'"
got=$(complete_words sluice run --top- | tr '\n' ' ')
[[ $got == *--top-k* && $got == *--top-p* ]] || fail "'sluice run --top-<TAB>' completed to '$got'"
got=$(complete_words sluice run -m x.gguf | tr -d '\n')
[[ -z $got ]] || fail "a value after 'run' completed to '$got' (should fall back to files)"
# Every flag the script offers for a command is one that command accepts.
for cmd in $(complete_words sluice ''); do
  [[ $cmd == -* ]] && continue
  help=$("$prefix/bin/sluice" "$cmd" --help)
  for flag in $(complete_words sluice "$cmd" -); do
    grep -qE -- "(^|[ ,])$flag([^-A-Za-z0-9_]|$)" <<<"$help" || fail "completion offers '$cmd $flag', not in '$cmd --help'"
  done
done

echo "== .deb"
deb=$(realpath "$(scripts/package.sh "$dir")")
info=$(dpkg-deb --info "$deb")
contents=$(dpkg-deb --contents "$deb")
grep -q "^ Version: " <<<"$info" || fail "$deb has no Version"
depends=$(grep "^ Depends: " <<<"$info") || fail "$deb has no Depends"
echo "$(basename "$deb"):$depends"
for lib in libc6 libstdc++6 libpcre2-8-0 libedit2; do
  grep -q "$lib" <<<"$depends" || fail "$deb: Depends lacks $lib"
done
for f in ./usr/bin/sluice ./usr/share/man/man1/sluice.1 ./usr/share/bash-completion/completions/sluice \
         ./usr/share/doc/sluice/README.md; do
  grep -q " $f\$" <<<"$contents" || fail "$deb lacks $f"
done
if [[ ${CI:-} == true && $(id -u) -eq 0 ]]; then
  export DEBIAN_FRONTEND=noninteractive
  log=$(apt-get install -y -qq "$deb" 2>&1) || fail "apt-get install $deb failed: $log"
  /usr/bin/sluice --version || fail "/usr/bin/sluice --version failed after apt-get install"
  log=$(apt-get remove -y -qq sluice 2>&1) || fail "apt-get remove sluice failed: $log"
  [[ ! -e /usr/bin/sluice ]] || fail "/usr/bin/sluice is still there after apt-get remove"
else
  echo "(not CI as root: apt-get install of the .deb skipped)"
fi
echo "== install ok"
