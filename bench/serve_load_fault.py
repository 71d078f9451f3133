"""bench/serve_load.py's fault round: clients that disconnect mid-stream, garbage bodies, a body
cut short, slots + --max-queue overflowed (429); then the server must still answer, a round must
still equal its solo runs, and RSS must stay within 5% + 32 MiB of the baseline taken before."""
import json
import socket
import threading
import time

from serve_load_client import prompts_for, run_concurrent, wait_idle


def fault_round(a, srv, cl, solo, check):
    wait_idle(cl, 30)
    base_rss = srv.status_mib("VmRSS")
    m0 = cl.metrics()
    # 1. Clients that go away after two tokens of a long answer.
    k = min(a.parallel, 4)
    gone, _ = run_concurrent([lambda p=p: cl.stream(p, a.fault_n, disconnect_after=2)
                              for p in prompts_for(k, 100)])
    check(all(g["status"] == 200 for g in gone), f"disconnecting clients: {gone}")
    check(wait_idle(cl, 60), "the server did not go idle within 60 s after the disconnects")
    m1 = cl.metrics()
    cancelled = int(m1["sluice_requests_cancelled_total"] - m0["sluice_requests_cancelled_total"])
    check(cancelled >= 1, f"no disconnected request was cancelled (of {k})")
    # 2. Garbage bodies: each a 4xx with a JSON error, never a crash.
    garbage = [b"{not json", b"\xff\xfe\x00\x01garbage", b"", b"[1, 2, 3]", b'{"prompt": 7, "max_tokens": 4}',
               b'{"prompt": "x", "max_tokens": "many"}', b'{"prompt": "x", "max_tokens": -5}',
               b'{"prompt": "x", "temperature": "hot"}', b"{" * 10000]
    bad = []
    for body in garbage:
        status, text = cl.post_raw(body)
        try:
            has_error = "error" in json.loads(text)
        except ValueError:
            has_error = False
        if not (400 <= status < 500 and has_error):
            bad.append((body[:40], status, text[:200]))
    check(not bad, f"garbage bodies not answered 4xx with a JSON error: {bad}")
    # A body cut short of its Content-Length, then the socket closed.
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 1000\r\n\r\n{\"prompt\": \"Once")
    # 3. More requests than slots + queue: the extra ones get 429.
    hold = threading.Event()
    held = [None] * (a.parallel + a.max_queue)
    threads = []
    for i, p in enumerate(prompts_for(len(held), 200)):
        # Near-uniform sampling: end-of-generation is as unlikely as any token, so each runs its
        # full -n while the slots and the queue must be seen full.
        hot = {"temperature": 2.0, "top_k": 0, "top_p": 1, "min_p": 0, "seed": i}
        t = threading.Thread(target=lambda i=i, p=p, hot=hot: held.__setitem__(
            i, cl.stream(p, a.fault_n, hold=hold, sampling=hot)), daemon=True)
        t.start()
        threads.append(t)
    full = False
    end = time.monotonic() + 60
    while time.monotonic() < end and not full:
        m = cl.metrics()
        full = m["sluice_slots_busy"] == a.parallel and m["sluice_queue_depth"] == a.max_queue
        if not full:
            time.sleep(0.01)
    extra = 2
    over = [cl.stream(p, 4) for p in prompts_for(extra, 300)] if full else []
    hold.set()
    for t in threads:
        t.join()
    check(full, f"slots + queue never filled ({a.parallel} + {a.max_queue}); fault -n {a.fault_n} too small?")
    check(all(o["status"] == 429 and "error" in json.loads(o.get("body", "{}")) for o in over),
          f"over the queue: expected 429 with a JSON error, got {[(o['status'], o.get('body')) for o in over]}")
    check(wait_idle(cl, 120), "the server did not go idle within 120 s after the overflow")
    m2 = cl.metrics()
    rejected = int(m2["sluice_requests_rejected_total"] - m0["sluice_requests_rejected_total"])
    check(not full or rejected == extra, f"sluice_requests_rejected_total rose by {rejected}, expected {extra}")
    # 4. Still serving, still exact, nothing leaked.
    status, _ = cl.get("/health")
    check(status == 200, f"/health answered {status} after the faults")
    again = list(solo)[-min(4, a.parallel):] if solo else prompts_for(min(4, a.parallel), 0)
    res, _ = run_concurrent([lambda p=p: cl.stream(p, a.n) for p in again])
    same = sum(1 for p, r in zip(again, res) if p in solo and r["text"] == solo[p])
    if solo:
        check(same == len(again), f"after the faults, {len(again) - same} of {len(again)} answers differ from solo")
    check(all(r["status"] == 200 for r in res), "a request failed after the faults")
    wait_idle(cl, 30)
    rss = srv.status_mib("VmRSS")
    bound = base_rss * 1.05 + 32
    check(rss <= bound, f"RSS {rss:.1f} MiB after the faults exceeds the bound {bound:.1f} MiB "
                        f"(baseline {base_rss:.1f} MiB x 1.05 + 32)")
    print(f"fault: {k} disconnects ({cancelled} cancelled), {len(garbage)} garbage bodies + 1 cut body "
          f"({len(garbage) - len(bad)} answered 4xx), {len(held)} held + {len(over)} over the queue "
          f"({rejected} got 429); after: /health {status}, "
          + (f"{same}/{len(again)} answers equal solo, " if solo else "")
          + f"RSS {rss:.1f} MiB vs baseline {base_rss:.1f} MiB (bound {bound:.1f})", flush=True)


