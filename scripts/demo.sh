#!/usr/bin/env bash
# The main job on a built-in default: build sluice and stream the bundled
# trained tiny MoE (models/stories-moe-8x-q8_0.gguf), its experts read from
# disk on demand, greedy from "Once upon a time". Extra args go to `sluice run`.
# Builds only the binary (not the tests). Progress goes to stderr, one line per
# phase and one per tenth of the build, so a first run (packages, then about
# 150 compile steps: minutes on 2 cores) never looks like a hang.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { echo "demo: $*" >&2; }
say "checking the Debian packages the build needs (scripts/deps.sh)"
scripts/deps.sh
say "configuring build/ (cmake)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
say "building build/sluice (ninja, $(nproc) jobs)"
# ninja prints "[N/M] ..." per step; keep one line per tenth, and the errors.
NINJA_STATUS='[%f/%t] ' ninja -C build -j"$(nproc)" sluice | awk 'BEGIN { shown = -1 }
  /^\[[1-9][0-9]*\/[0-9]+\] / { split(substr($1, 2, length($1) - 2), nm, "/")
                          tenth = int(10 * nm[1] / nm[2])
                          if (tenth > shown || nm[1] == nm[2]) { shown = tenth; printf "demo: building %d/%d\n", nm[1], nm[2] > "/dev/stderr" }
                          next }
  /^\[0\// { next }
  /^ninja: no work to do/ { print "demo: build/sluice is up to date" > "/dev/stderr"; next }
  /^ninja: Entering directory/ { next }
  { print > "/dev/stderr" }'
say "streaming the story (sluice run; experts read from disk on demand)"
./build/sluice run -m models/stories-moe-8x-q8_0.gguf -p "Once upon a time" -n 64 "$@"
