#!/usr/bin/env bash
# The main job on a built-in default: build sluice and stream the bundled
# trained tiny MoE (models/stories-moe-8x-q8_0.gguf), its experts read from
# disk on demand, greedy from "Once upon a time". Extra args go to `sluice run`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh build >/dev/null
./build/sluice run -m models/stories-moe-8x-q8_0.gguf -p "Once upon a time" -n 64 "$@"
