#!/usr/bin/env bash
# Regenerates the golden cases of tests/golden/ with llama.cpp (see README.md):
# for each case `sluice synth` writes the tiny GGUF, tools/llama_logits.cpp
# (compiled here against LLAMA_CPP's headers and build/bin/libllama.so) runs
# llama.cpp on it, tools/make_case.py writes NAME.json + NAME.logits.f32.
#
# Usage: tests/golden/make_reference.sh [CASE...]   (default: every case below)
#        tests/golden/make_reference.sh --synth-args "ARGS" --name NAME [--quantized] [--tokens N]
#          one ad-hoc case (e.g. another --seed; N tokens, default 24) written to $WORK/out
#          ([--mtp-head]: an F32 file written with --mtp, whose NextN head llama_mtp runs too)
#          instead of tests/golden/
# Environment: LLAMA_CPP (a built llama.cpp checkout, default /work/llama.cpp),
#   LLAMA_CPP_VERSION (recorded in NAME.json, default b10573), SLUICE (default
#   build/sluice), WORK (GGUFs and scratch, default build/golden-ref; never the repo).
set -euo pipefail
cd "$(dirname "$0")/../.."
LLAMA_CPP=${LLAMA_CPP:-/work/llama.cpp}
LLAMA_CPP_VERSION=${LLAMA_CPP_VERSION:-b10573}
SLUICE=${SLUICE:-build/sluice}
WORK=${WORK:-build/golden-ref}
PROMPT_LEN=8
N_GEN=16
MTP_K=3  # draft steps of an MTP case's chains (shared/golden's deepseek2-mtp-f32: 3)

# NAME | arch | f32, quant or f32+mtp (with the MTP head's files) | tokens | sluice synth arguments (without -o)
cases() {
  cat <<'EOF'
qwen2moe-f32|qwen2moe|f32|24|--preset tiny --arch qwen2moe --type f32 --dense-type f32 --seed 1
qwen2moe-q8_0|qwen2moe|quant|24|--preset tiny --arch qwen2moe --type q8_0 --dense-type q8_0 --seed 2
lfm2moe-f32|lfm2moe|f32|24|--preset tiny --arch lfm2moe --type f32 --dense-type f32 --seed 3
lfm2moe-q8_0|lfm2moe|quant|24|--preset tiny --arch lfm2moe --type q8_0 --dense-type q8_0 --seed 4
deepseek4-tiny-f32|deepseek4|f32|160|--preset tiny --arch deepseek4 --type f32 --dense-type f32 --seed 5
glm-dsa-tiny-f32|glm-dsa|f32|48|--preset tiny --arch glm-dsa --type f32 --dense-type f32 --seed 8
glm-dsa-mtp-f32|glm-dsa|f32+mtp|48|--preset tiny --arch glm-dsa --type f32 --dense-type f32 --seed 10 --mtp
deepseek4-mtp-f32|deepseek4|f32+mtp|48|--preset tiny --arch deepseek4 --type f32 --dense-type f32 --seed 5 --mtp
bailingmoe3-f32|bailingmoe3|f32|24|--preset tiny --arch bailingmoe3 --type f32 --dense-type f32 --seed 11
bailingmoe3-q8_0|bailingmoe3|quant|24|--preset tiny --arch bailingmoe3 --type q8_0 --dense-type q8_0 --seed 12
bailingmoe3-mtp-f32|bailingmoe3|f32+mtp|48|--preset tiny --arch bailingmoe3 --type f32 --dense-type f32 --seed 13 --mtp
EOF
}

# N tokens: BOS, then N-1 byte tokens (ids 0..255, normal tokens of every
# vocabulary synth writes), a fixed pseudo-random draw (one stream for every
# N: a longer case's tokens extend a shorter one's).
tokens() {
  python3 -c 'import random, sys; n = int(sys.argv[1]); r = random.Random(24); print(",".join(["bos"] + [str(r.randrange(256)) for _ in range(n - 1)]))' "$1"
}

mkdir -p "$WORK"
# build_tool NAME: tests/golden/tools/NAME.cpp against llama.cpp's headers (src/ for llama-ext.h) and libllama.so.
build_tool() {
  if [[ ! -x "$WORK/$1" || tests/golden/tools/$1.cpp -nt "$WORK/$1" || tests/golden/tools/llama_common.h -nt "$WORK/$1" ]]; then
    g++ -std=c++17 -O2 -I"$LLAMA_CPP/include" -I"$LLAMA_CPP/ggml/include" -I"$LLAMA_CPP/src" tests/golden/tools/"$1".cpp \
      -L"$LLAMA_CPP/build/bin" -lllama -Wl,-rpath,"$LLAMA_CPP/build/bin" -o "$WORK/$1"
  fi
}
build_tool llama_logits
build_tool llama_mtp
tool="$WORK/llama_logits"

# make_one NAME ARCH KIND N_TOKENS "SYNTH ARGS" OUT_DIR
make_one() {
  local name=$1 arch=$2 kind=$3 n_tokens=$4 args=$5 out=$6
  local gguf="$WORK/$name.gguf" run="$WORK/$name.run"
  mkdir -p "$run" "$out"
  # shellcheck disable=SC2086  # the synth arguments are words
  "$SLUICE" synth -q --force $args -o "$gguf"
  timeout 600 "$tool" "$gguf" "$run" "$(tokens "$n_tokens")" "$PROMPT_LEN" "$N_GEN"
  local q=()
  [[ $kind == quant ]] && q=(--quantized)
  if [[ $kind == f32+mtp ]]; then  # the NextN/MTP head too: draft logits, hidden states, K-step chains
    timeout 600 "$WORK/llama_mtp" "$gguf" "$run" "$(tokens "$n_tokens")" "$MTP_K"
    q=(--mtp-k "$MTP_K")
  fi
  python3 tests/golden/tools/make_case.py --name "$name" --arch "$arch" --synth-args "$args" --gguf "$gguf" \
    --work "$run" --tokens "$(cat "$run/tokens.txt" | tr ' ' ,)" --prompt-len "$PROMPT_LEN" \
    --llama-cpp "$LLAMA_CPP_VERSION" --out "$out" "${q[@]}"
}

if [[ "${1:-}" == --synth-args ]]; then
  args=$2; name=$4; kind=f32; n_tokens=24
  shift 4
  while [[ $# -gt 0 ]]; do
    case $1 in
      --quantized) kind=quant; shift ;;
      --mtp-head) kind=f32+mtp; shift ;;  # synth args with --mtp: the head's files too
      --tokens) n_tokens=$2; shift 2 ;;
      *) echo "make_reference.sh: unknown option $1" >&2; exit 2 ;;
    esac
  done
  arch=$(sed -n 's/.*--arch \([^ ]*\).*/\1/p' <<<"$args")
  make_one "$name" "$arch" "$kind" "$n_tokens" "$args" "$WORK/out"
  exit 0
fi

want=" $* "
while IFS='|' read -r name arch kind n_tokens args; do
  [[ $# -gt 0 && "$want" != *" $name "* ]] && continue
  make_one "$name" "$arch" "$kind" "$n_tokens" "$args" tests/golden
done < <(cases)
