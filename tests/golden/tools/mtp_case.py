"""The `mtp` block of a golden case from llama_mtp's outputs (tests/golden/README.md,
"MTP cases"): the files copied next to NAME.json, their noise floors and the
tolerance, in the layout of shared/golden's deepseek2-mtp-f32.json, so one
test reads both. Standard library only."""
import os
import shutil

from make_case import compare, margin, read_f32, sha256, stats

FILES = {  # key -> (llama_mtp output, layout)
    "mtp_logits": ("mtp_logits.f32", "float32 LE, row-major [n_tokens-1][n_vocab]; row i = draft logits of the MTP "
                   "row at position i+1: inputs token tokens[i+1] and trunk hidden h_i; it predicts tokens[i+2]"),
    "h_nextn": ("h_nextn.f32", "float32 LE [n_tokens][n_embd]; row p = h_p (trunk hidden state after output_norm, "
                "the MTP input paired with tokens[p+1])"),
    "mtp_h": ("mtp_h.f32", "float32 LE [n_tokens-1][n_embd]; row i = g of the MTP row at position i (i = 0..n-2; "
              "row 0 is the row (tokens[0], zero hidden)), after nextn.shared_head_norm"),
    "mtp_chain": ("mtp_chain.f32", "float32 LE [n_tokens-1][K][n_vocab]; [m-1][k-1] = logits of draft step k for "
                  "anchor m (id_last = tokens[m], hidden h_{m-1}); step k >= 2 fed the argmax of step k-1 "
                  "(chain.draft_tokens) and that step's g"),
}


def tolerance(floors, std, n_rows, what):
    worst_max = max(f["max_abs_diff_over_std"] for f in floors.values())
    worst_mean = max(f["mean_abs_diff_over_std"] for f in floors.values())
    mean_s, pos_s = max(0.002, 4 * worst_mean), max(0.01, 4 * worst_max)
    return {
        "mean_abs_diff_over_std": round(mean_s, 6), "mean_abs_diff": round(mean_s * std, 6),
        "position_max_abs_diff_over_std": round(pos_s, 6), "position_max_abs_diff": round(pos_s * std, 6),
        "max_fraction_positions_exceeding": round(1 / n_rows + 1e-9, 6), "argmax_agreement_min": 0.95,
        "argmax_margin_threshold": 0.001, "n_rows_gated": n_rows,
        "rule": f"over the {n_rows} rows of {what}: PASS if (1) mean over all values of |delta| <= mean_abs_diff, "
                "(2) the fraction of rows whose max |delta| exceeds position_max_abs_diff is <= "
                "max_fraction_positions_exceeding, (3) argmax agrees at >= argmax_agreement_min of the rows, (4) every "
                "row whose reference top1-top2 margin is >= argmax_margin_threshold has the reference argmax",
        "note": "4x the largest measured llama.cpp variant, at least 0.002 / 0.01 std (shared/golden's F32 floors)",
    }


def mtp_block(name, work, out, nv, n_tokens, k):
    """Copies the MTP files to `out` and returns the case's `mtp` object."""
    files, sums = {}, {}
    for key, (src, _) in FILES.items():
        dst = f"{name}.{key}.f32"
        shutil.copyfile(os.path.join(work, src), os.path.join(out, dst))
        files[key], sums[dst] = dst, sha256(os.path.join(out, dst))
    ref = read_f32(os.path.join(work, "mtp_logits.f32"), nv)
    assert len(ref) == n_tokens - 1, "mtp_logits rows"
    st = stats(ref)
    floors = {"threads_1_vs_2": compare(ref, read_f32(os.path.join(work, "mtp_logits_t1.f32"), nv), st["std"]),
              "incremental_vs_batch": compare(ref, read_f32(os.path.join(work, "mtp_logits_inc.f32"), nv), st["std"])}
    chain = read_f32(os.path.join(work, "mtp_chain.f32"), nv)
    assert len(chain) == (n_tokens - 1) * k, "mtp_chain rows"
    step1 = [chain[i * k] for i in range(n_tokens - 1)]
    chain_floors = {
        "threads_1_vs_2": compare(chain, read_f32(os.path.join(work, "mtp_chain_t1.f32"), nv), st["std"]),
        "step1_vs_mtp_logits_batch": compare(ref, step1, st["std"]),
    }
    drafts, margins = [], []
    for line in open(os.path.join(work, "chain.txt")).read().splitlines():
        d, m = line.split("|")
        drafts.append([int(x) for x in d.split()])
        margins.append([round(float(x), 6) for x in m.split()])
    assert len(drafts) == n_tokens - 1 and all(len(d) == k for d in drafts), "chain.txt"
    sanity = {"logits_finite": st["finite"], "std_gt_0_5": st["std"] > 0.5,
              "argmax_not_constant": st["distinct_argmax"] > 1,
              "chain_step1_is_the_batch_row": chain_floors["step1_vs_mtp_logits_batch"]["max_abs_diff_over_std"] < 1e-4,
              "chain_margins_are_the_logits": all(abs(margin(chain[i * k + j]) - margins[i][j]) < 1e-3
                                                  for i in range(n_tokens - 1) for j in range(k))}
    if not all(sanity.values()):
        raise SystemExit(f"{name}: MTP sanity failed: {sanity}")
    return {
        "files": files, "sha256": sums, "layouts": {key: lay for key, (_, lay) in FILES.items()},
        "eval": {"n_ctx": 512, "n_batch": 512, "n_ubatch": 512, "threads": 2, "kv_cache_type": "F32",
                 "flash_attn": False, "load_mtp": True,
                 "trunk": "all tokens in ONE llama_decode, h_nextn (llama_set_embeddings_nextn, unmasked) at every row",
                 "mtp": "a LLAMA_CONTEXT_TYPE_MTP context; all n_tokens rows (row p = (tokens[p], h_{p-1}), h_{-1} "
                        "= 0) in ONE llama_decode, outputs at every row"},
        "stats": st, "noise_floor": floors, "tolerance": tolerance(floors, st["std"], n_tokens - 1, "mtp_logits"),
        "chain": {"k": k, "anchors": f"m = 1..{n_tokens - 1}", "draft_tokens": drafts, "top1_top2_margins": margins,
                  "procedure": "tests/golden/tools/llama_mtp.cpp, chain()", "noise_floor": chain_floors,
                  "tolerance": tolerance({"threads_1_vs_2": chain_floors["threads_1_vs_2"]}, st["std"],
                                         (n_tokens - 1) * k, "mtp_chain")},
        "sanity": sanity,
    }
