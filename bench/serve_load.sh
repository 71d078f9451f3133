#!/usr/bin/env bash
# serve_load.sh -m MODEL [--clients 1,2,4,8] [-n 16] [--cap 8G] [--check] [...] [-- SERVE FLAGS]
#
# Load and fault test of `sluice serve` on loopback: N concurrent streaming greedy clients
# (tok/s, time to first token, inter-token latency, MiB read per token beside the union
# model's prediction, peak RSS), then clients that disconnect, send garbage or overflow
# --max-queue. The client is bench/serve_load.py (python3 standard library only);
# `serve_load.sh --help` lists every option. Bounded by --timeout (default 900 s).
set -euo pipefail
command -v python3 >/dev/null || { echo "serve_load.sh: python3 is required" >&2; exit 125; }
exec python3 "$(dirname "$0")/serve_load.py" "$@"
