"""Figures of one serve_load round (bench/serve_load.py): latencies from the clients' event
times, bytes from the server's /metrics before and after the round."""

MIB = float(2 ** 20)


def percentile(values, q):
    """Nearest-rank percentile (q in 0..100) of a non-empty list; nan when empty."""
    if not values:
        return float("nan")
    s = sorted(values)
    rank = max(1, -(-len(s) * q // 100))  # ceil(len * q / 100)
    return s[int(rank) - 1]


def round_row(n_clients, results, wall_s, m0, m1):
    """One row: results are serve_load's stream() dicts, m0/m1 /metrics before and after."""
    d = {k: m1[k] - m0[k] for k in m1 if k in m0}
    tokens = sum(r["tokens"] for r in results)
    ttft = [(r["token_times"][0] - r["t_send"]) * 1e3 for r in results if r["token_times"]]
    itl = [(b - a) * 1e3 for r in results for a, b in zip(r["token_times"], r["token_times"][1:])]
    gen = d["sluice_tokens_generated_total"]
    steps = d["sluice_batch_steps_total"]
    return {
        "n": n_clients,
        "tokens": tokens,
        "wall_s": wall_s,
        "tok_s": tokens / wall_s if wall_s > 0 else float("nan"),
        "ttft_p50": percentile(ttft, 50), "ttft_p99": percentile(ttft, 99),
        "itl_p50": percentile(itl, 50), "itl_p99": percentile(itl, 99),
        # Per generated token; the round's prompt rows are in both figures alike.
        "mib_per_tok": d["sluice_expert_bytes_read_total"] / MIB / gen if gen else float("nan"),
        "union_mib_per_tok": d["sluice_batch_expert_bytes_union_total"] / MIB / gen if gen else float("nan"),
        "experts_per_step": d["sluice_batch_experts_union_total"] / steps if steps else float("nan"),
        "rows_per_step": d["sluice_batch_rows_total"] / steps if steps else float("nan"),
        "steps": steps,
    }


def row_line(r):
    return (f"N={r['n']}: {r['tokens']} tokens in {r['wall_s']:.2f} s, {r['tok_s']:.2f} tok/s; "
            f"TTFT p50/p99 {r['ttft_p50']:.0f}/{r['ttft_p99']:.0f} ms; ITL p50/p99 "
            f"{r['itl_p50']:.0f}/{r['itl_p99']:.0f} ms; {r['mib_per_tok']:.3f} MiB/token read vs "
            f"{r['union_mib_per_tok']:.3f} union model; {r['experts_per_step']:.1f} distinct experts/step "
            f"over {r['rows_per_step']:.2f} rows/step; VmHWM {r['vmhwm_mib']:.0f} MiB"
            + (f", cgroup memory.peak {r['cgroup_peak_mib']:.0f} MiB" if r["cgroup_peak_mib"] is not None else ""))


def print_table(rows, replay):
    """A Markdown table; the last column is the union model's tok/s from N=1's: an I/O-bound
    server's tok/s scales as the bytes it reads per token fall."""
    base = next((r for r in rows if r["n"] == 1), None)
    head = ("| N | tok/s | TTFT p50 / p99 ms | ITL p50 / p99 ms | MiB read / token | union model MiB / token "
            "| measured / model | distinct experts / step | rows / step | peak RSS (VmHWM) MiB | cgroup memory.peak MiB | union-model tok/s |")
    print(head)
    print("|" + "---|" * head.count(" | ") + "---|")
    for r in rows:
        ratio = r["mib_per_tok"] / r["union_mib_per_tok"] if r["union_mib_per_tok"] else float("nan")
        pred = (base["tok_s"] * base["mib_per_tok"] / r["union_mib_per_tok"]
                if base and base["mib_per_tok"] and r["union_mib_per_tok"] else float("nan"))
        cg = f"{r['cgroup_peak_mib']:.0f}" if r["cgroup_peak_mib"] is not None else "-"
        print(f"| {r['n']} | {r['tok_s']:.2f} | {r['ttft_p50']:.0f} / {r['ttft_p99']:.0f} | "
              f"{r['itl_p50']:.0f} / {r['itl_p99']:.0f} | {r['mib_per_tok']:.2f} | {r['union_mib_per_tok']:.2f} | "
              f"{ratio:.3f} | {r['experts_per_step']:.1f} | {r['rows_per_step']:.2f} | {r['vmhwm_mib']:.0f} | {cg} | {pred:.2f} |")
    if replay:
        print("(routing replayed from a trace: --route-replay)")
