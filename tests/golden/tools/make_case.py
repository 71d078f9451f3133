#!/usr/bin/env python3
"""Assembles a golden case (NAME.json + NAME.logits.f32) from llama_logits'
outputs: the reference logits (one batch, 2 threads), the noise floors of
llama.cpp's own variants and the tolerance rule (tests/golden/README.md).
Standard library only (no numpy on the build machines)."""
import argparse
import array
import hashlib
import json
import math
import os
import shutil


def read_f32(path, n_vocab):
    a = array.array("f")
    with open(path, "rb") as f:
        a.frombytes(f.read())
    assert len(a) % n_vocab == 0, path
    return [a[i:i + n_vocab] for i in range(0, len(a), n_vocab)]


def argmax(row):
    best = 0
    for v in range(1, len(row)):
        if row[v] > row[best]:
            best = v
    return best


def margin(row):
    s = sorted(row, reverse=True)
    return s[0] - s[1]


def stats(rows):
    flat = [x for r in rows for x in r]
    n = len(flat)
    mean = sum(flat) / n
    std = math.sqrt(sum((x - mean) ** 2 for x in flat) / n)
    am = [argmax(r) for r in rows]
    return {"finite": all(math.isfinite(x) for x in flat), "std": std, "mean": mean, "min": min(flat),
            "max": max(flat), "argmax": am, "distinct_argmax": len(set(am)),
            "top1_top2_margins": [margin(r) for r in rows]}


def compare(ref, got, std):
    diffs = [[abs(a - b) for a, b in zip(r, g)] for r, g in zip(ref, got)]
    pos_max = [max(d) for d in diffs]
    n = sum(len(d) for d in diffs)
    s = sorted(p / std for p in pos_max)
    mism = [[i, margin(r)] for i, (r, g) in enumerate(zip(ref, got)) if argmax(r) != argmax(g)]
    return {"max_abs_diff": max(pos_max), "max_abs_diff_over_std": max(pos_max) / std,
            "mean_abs_diff_over_std": sum(sum(d) for d in diffs) / n / std,
            "median_position_max_abs_diff_over_std": s[len(s) // 2],
            "p95_position_max_abs_diff_over_std": s[min(len(s) - 1, int(0.95 * len(s)))],
            "argmax_agreement": 1 - len(mism) / len(ref), "argmax_mismatches": mism,
            "bitwise_identical": all(a == b for r, g in zip(ref, got) for a, b in zip(r, g))}


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--name", required=True)
    ap.add_argument("--arch", required=True)
    ap.add_argument("--synth-args", required=True, help="the `sluice synth` arguments that write the GGUF")
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--work", required=True, help="llama_logits' output directory")
    ap.add_argument("--tokens", required=True)
    ap.add_argument("--prompt-len", type=int, required=True)
    ap.add_argument("--quantized", action="store_true")
    ap.add_argument("--llama-cpp", required=True, help="llama.cpp version string")
    ap.add_argument("--out", required=True, help="directory of the case files")
    ap.add_argument("--mtp-k", type=int, default=0, help="chain length of the MTP part (llama_mtp's outputs in --work)")
    a = ap.parse_args()

    info = dict(line.split(" ", 1) for line in open(os.path.join(a.work, "info.txt")).read().splitlines())
    nv = int(info["n_vocab"])
    tokens = [int(t) for t in a.tokens.split(",")]
    ref = read_f32(os.path.join(a.work, "batch_t2.f32"), nv)
    assert len(ref) == len(tokens)
    st = stats(ref)
    std = st["std"]
    floors = {
        "threads_1_vs_2": compare(ref, read_f32(os.path.join(a.work, "batch_t1.f32"), nv), std),
        "incremental_vs_batch": compare(ref, read_f32(os.path.join(a.work, "decode_t2.f32"), nv), std),
        "kv_f16_flash_attn_vs_reference": compare(ref, read_f32(os.path.join(a.work, "fa_f16.f32"), nv), std),
    }
    worst_max = max(f["max_abs_diff_over_std"] for f in floors.values())
    worst_mean = max(f["mean_abs_diff_over_std"] for f in floors.values())
    worst_abs = max(f["max_abs_diff"] for f in floors.values())
    n = len(tokens)
    if a.quantized:
        # 3x the largest variant, floored at the level of shared/golden's Q8_0
        # cases, whose largest variant (F32 activations) these do not measure.
        mean_s, pos_s = max(0.04, 3 * worst_mean), max(0.14, 3 * worst_max)
        frac, am, gate = 2 / n, 0.85, max(0.5, 3 * worst_abs)
        note = ("Quantized weights: llama.cpp quantizes activations inside quantized matmuls; an engine that keeps "
                "them in F32 (or rounds them differently) differs by more than llama.cpp's own variants, so the "
                "limits are 3x the largest measured variant but at least the level of shared/golden's Q8_0 cases "
                "(mean/std 0.04, position max/std 0.14), 2 positions may exceed (expert-routing near-ties).")
    else:
        mean_s, pos_s = max(0.002, 4 * worst_mean), max(0.01, 4 * worst_max)
        frac, am, gate = 1 / n, 0.9, max(0.001, 2 * worst_abs)
        note = ("F32 weights: an engine computing in F32 matches llama.cpp to ~1e-5 relative; the limits are 4x the "
                "largest measured llama.cpp variant (mainly an F16 KV cache with flash attention), at least "
                "mean/std 0.002 and position max/std 0.01 as in shared/golden; one position may exceed (an "
                "expert-routing near-tie).")
    greedy = dict(line.split(":", 1) for line in open(os.path.join(a.work, "greedy.txt")).read().splitlines())
    g2 = [int(x) for x in greedy["t2"].split()]
    g1 = [int(x) for x in greedy["t1"].split()]
    margins = [float(x) for x in greedy["margins"].split()]
    tol = {
        "mean_abs_diff_over_std": round(mean_s, 6), "mean_abs_diff": round(mean_s * std, 6),
        "position_max_abs_diff_over_std": round(pos_s, 6), "position_max_abs_diff": round(pos_s * std, 6),
        "max_fraction_positions_exceeding": round(frac + 1e-9, 5), "argmax_agreement_min": am,
        "greedy_margin_threshold": round(gate, 6),
        "rule": "PASS if (1) mean over all logits of |delta| <= mean_abs_diff, (2) the fraction of positions whose "
                "max |delta| exceeds position_max_abs_diff is <= max_fraction_positions_exceeding, (3) argmax agrees "
                "at >= argmax_agreement_min of the positions, (4) the greedy continuation is identical at every step "
                "before the first step whose llama.cpp top1-top2 margin (greedy.top1_top2_margins) is < "
                "greedy_margin_threshold. Applied to the batch (prefill) logits and to the token-by-token logits.",
        "note": note,
    }
    sanity = {"greedy_threads_1_vs_2_agree": g1 == g2, "finite": st["finite"], "std_over_0.5": std > 0.5,
              "argmax_not_constant": st["distinct_argmax"] > 1}
    if not all(sanity.values()):
        raise SystemExit(f"{a.name}: sanity failed: {sanity}")

    logits_file = a.name + ".logits.f32"
    shutil.copyfile(os.path.join(a.work, "batch_t2.f32"), os.path.join(a.out, logits_file))
    case = {
        "name": a.name, "arch": a.arch,
        "synth_args": a.synth_args,
        "gguf_bytes": os.path.getsize(a.gguf), "gguf_sha256": sha256(a.gguf),
        "llama_cpp": a.llama_cpp, "backend": info["system_info"].strip(),
        "n_vocab": nv, "n_tokens": n, "tokens": tokens,
        "logits_file": logits_file, "logits_sha256": sha256(os.path.join(a.out, logits_file)),
        "logits_layout": "float32 little-endian, row-major [n_tokens][n_vocab], row i = logits after tokens[0..i]",
        "eval": {"n_ctx": 512, "n_batch": 512, "n_ubatch": 512, "n_seq_max": 1, "threads": 2, "one_batch": True,
                 "kv_cache_type": "F32", "flash_attn": False, "swa_full": True},
        "greedy": {"prompt": tokens[:a.prompt_len], "n_generated": len(g2), "tokens": g2, "threads_1_tokens": g1,
                   "top1_top2_margins": margins},
        "stats": st, "noise_floor": floors, "tolerance": tol, "sanity": sanity,
    }
    if a.mtp_k:
        from mtp_case import mtp_block  # imports this file's helpers
        case["mtp"] = mtp_block(a.name, a.work, a.out, nv, n, a.mtp_k)
    with open(os.path.join(a.out, a.name + ".json"), "w") as f:
        json.dump(case, f, indent=1)
        f.write("\n")
    print(f"{a.name}: std {std:.3f}, distinct argmax {st['distinct_argmax']}/{n}, "
          f"worst variant max/std {worst_max:.3g} mean/std {worst_mean:.3g}; "
          f"tolerance mean/std {mean_s:.3g} position max/std {pos_s:.3g}")


if __name__ == "__main__":
    main()
