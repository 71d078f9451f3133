#!/usr/bin/env bash
# bench/ngram.sh — prompt-lookup drafting (`--ngram`) against plain decoding,
# side by side in one run, on a copy-heavy prompt and on free prose.
#
# Usage: bench/ngram.sh [MODEL] [ROUNDS]
#   MODEL   default ../shared/models/stories-moe-8x-f32.gguf (a trained MoE)
#   ROUNDS  default 3; each round runs every (prompt, mode, storage) once,
#           the modes interleaved so they see the same machine load.
# Prompts: "copy" quotes the first 600 bytes of ../shared/models/corpus_eval.txt
# and then starts it again (the model continues by copying, as when editing a
# file or quoting a document, if the model does copy); "loop" repeats one
# sentence three times (the model keeps repeating it); "prose" is "Once upon a
# time" (nothing to copy).
# Modes: off, --ngram 2 and --ngram 3 (4 drafts per step). Storage: experts
# streamed with the cache off (the default: every verify row's experts are
# read, so the cost of rejected drafts shows as MiB read per emitted token)
# and --load-all (in RAM).
# Prints per row: median decode tok/s over the rounds, MiB read per emitted
# token, tokens per trunk forward, draft acceptance, and whether the text is
# byte-identical to the mode "off" (greedy: it must be; the script fails if not).
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-../shared/models/stories-moe-8x-f32.gguf}
rounds=${2:-3}
sluice=${SLUICE:-build/sluice}
corpus=../shared/models/corpus_eval.txt
[[ -x $sluice ]] || { echo "bench/ngram.sh: $sluice not found (build first: scripts/build.sh)" >&2; exit 1; }
[[ -f $model ]] || { echo "bench/ngram.sh: $model not found" >&2; exit 1; }
[[ -f $corpus ]] || { echo "bench/ngram.sh: $corpus not found" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
head -c 600 "$corpus" >"$out/copy.txt"
printf '\n\n' >>"$out/copy.txt"
head -c 120 "$corpus" >>"$out/copy.txt"
printf 'Once upon a time' >"$out/prose.txt"
printf 'Lily saw a ball. Lily saw a ball. Lily saw a ball. Lily' >"$out/loop.txt"
modes=("off:" "ngram2:--ngram 2 --ngram-draft 4" "ngram3:--ngram 3 --ngram-draft 4")
storages=("streamed:" "in-RAM:--load-all")
echo "bench/ngram.sh: $model, $rounds rounds, $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u '+%Y-%m-%d %H:%M UTC')"
for ((r = 1; r <= rounds; r++)); do
  echo "round $r of $rounds" >&2
  for prompt in copy loop prose; do
    for storage in "${storages[@]}"; do
      for mode in "${modes[@]}"; do
        tag="$prompt.${storage%%:*}.${mode%%:*}"
        # shellcheck disable=SC2086
        "$sluice" run -m "$model" -f "$out/$prompt.txt" -n 96 --temp 0 -t 2 ${storage#*:} ${mode#*:} \
          --json "$out/$tag.$r.json" -q >"$out/$tag.$r.txt" 2>/dev/null
      done
    done
  done
done
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
print(f"| prompt | storage | mode | decode tok/s (median) | MiB read / token | tokens / trunk forward | drafts accepted | text = off |")
print("|---|---|---|--:|--:|--:|--:|:-:|")
bad = False
for prompt in ("copy", "loop", "prose"):
    for storage in ("streamed", "in-RAM"):
        ref = open(f"{out}/{prompt}.{storage}.off.1.txt", "rb").read()
        for mode in ("off", "ngram2", "ngram3"):
            s = [json.load(open(f"{out}/{prompt}.{storage}.{mode}.{r}.json"))["summary"] for r in range(1, rounds + 1)]
            same = all(open(f"{out}/{prompt}.{storage}.{mode}.{r}.txt", "rb").read() == ref for r in range(1, rounds + 1))
            bad |= not same
            acc = f"{s[0]['mtp_accepted']} of {s[0]['mtp_drafted']} ({s[0]['mtp_accept_pct']:.0f}%)" if mode != "off" else ""
            print(f"| {prompt} | {storage} | {mode} | {statistics.median(x['decode_tps'] for x in s):.1f} | "
                  f"{s[0]['decode_MiB_per_tok']:.3f} | {s[0]['decode_tokens_per_forward']:.2f} | {acc} | {'yes' if same else 'NO'} |")
if bad:
    sys.exit("bench/ngram.sh: a drafted text differs from plain decoding (greedy must be identical)")
PY
