#!/usr/bin/env bash
# The main job on a built-in default: build sluice, synthesize a tiny
# qwen3moe model and inspect it (streaming sizing included).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh build >/dev/null
mkdir -p build/demo
./build/sluice synth --preset tiny -o build/demo/tiny-qwen3moe.gguf
./build/sluice inspect build/demo/tiny-qwen3moe.gguf
