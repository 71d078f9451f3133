#!/usr/bin/env python3
"""Load and fault test of `sluice serve` (bench/serve_load.sh runs this; python3 stdlib only).

Starts one server on loopback, then:
  rounds  N = 1, 2, 4, 8 (--clients) concurrent streaming greedy clients, each with its own prompt
          and a fixed -n: aggregate tok/s, p50/p99 time to first token and inter-token latency,
          MiB of experts read per generated token (/metrics deltas) beside the union model's
          prediction from the same steps (sluice_batch_expert_bytes_union_total: each step's
          distinct experts x their bytes), and the server's peak RSS;
  solo    every round's prompts again, one at a time: each round's answer must equal its solo
          run (greedy). Skipped under --route-replay, where routing follows the engine's global
          position counter, so a text depends on what ran before it;
  fault   clients that disconnect mid-stream, garbage bodies (4xx expected), more requests than
          slots + --max-queue (429 expected); then the server must still answer, a round must
          still equal its solo runs, and RSS must be back within 5% + 32 MiB of the baseline
          taken after the rounds.
Everything is bounded: --timeout for the whole run, a socket timeout per request.
--check turns the comparisons into assertions (exit 1 naming each failure).
"""
import argparse
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import serve_load_stats as st

NAMES = ["Lily", "Tom", "Ben", "Mia", "Sam", "Anna", "Max", "Sue", "Tim", "Zoe", "Leo", "Amy", "Jack", "Kim", "Ned"]
PLACES = ["park", "sea", "farm", "shop", "forest", "school", "zoo", "lake"]


def prompts_for(count, first):
    # Distinct prompts: a name and a place each, so no two share more than the opening words.
    return [f"Once upon a time, {NAMES[(first + i) % len(NAMES)]} went to the "
            f"{PLACES[(first + i) % len(PLACES)]} and" for i in range(count)]


class Server:
    """`sluice serve` on a free loopback port, optionally under scripts/lowram.sh."""

    def __init__(self, args, log_path):
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        cmd = [args.sluice, "serve", "-m", args.model, "--host", "127.0.0.1", "--port", "0",
               "--parallel", str(args.parallel), "--max-queue", str(args.max_queue),
               # One HTTP thread per connection: held streams, the queue, the extras and the
               # /metrics poll must all be read at once, or the queue is never reached.
               "--http-threads", str(args.parallel + args.max_queue + 8)] + args.serve_flags
        if args.cap:
            cmd = [os.path.join(root, "scripts", "lowram.sh"), args.cap, "--"] + cmd
        self.log_path = log_path
        self.capped = bool(args.cap)
        self.log = open(log_path, "wb")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        self.port = None
        deadline = time.monotonic() + args.start_timeout
        while self.port is None:
            if self.proc.poll() is not None:
                raise SystemExit(f"serve_load: the server exited ({self.proc.returncode}) before listening; "
                                 f"log {log_path}:\n{open(log_path, errors='replace').read()[-2000:]}")
            if time.monotonic() > deadline:
                self.stop()
                raise SystemExit(f"serve_load: the server did not listen within {args.start_timeout} s; log {log_path}")
            m = re.search(r"serving .* on http://127\.0\.0\.1:(\d+)", open(log_path, errors="replace").read())
            if m:
                self.port = int(m.group(1))
            else:
                time.sleep(0.2)
        self.pid = self._sluice_pid(self.proc.pid)

    @staticmethod
    def _sluice_pid(root_pid):
        # The launched process, or (under lowram.sh) its descendant that is the sluice binary.
        kids = {}
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    fields = open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()
                    kids.setdefault(int(fields[1]), []).append(int(d))
                except OSError:
                    pass
        todo = [root_pid]
        while todo:
            pid = todo.pop()
            try:
                if open(f"/proc/{pid}/comm").read().strip() == "sluice":
                    return pid
            except OSError:
                pass
            todo += kids.get(pid, [])
        raise SystemExit(f"serve_load: no sluice process under pid {root_pid}")

    def status_mib(self, key):
        for line in open(f"/proc/{self.pid}/status"):
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024.0
        return float("nan")

    def cgroup_peak_mib(self):
        # The peak of the memory cgroup lowram.sh made (anonymous + page cache), or None uncapped:
        # cgroup v2 memory.peak, or v1 memory.max_usage_in_bytes.
        if not self.capped:
            return None
        for line in open(f"/proc/{self.pid}/cgroup"):
            _, ctrl, rel = line.strip().split(":", 2)
            for path in ([f"/sys/fs/cgroup{rel}/memory.peak"] if ctrl == "" else
                         [f"/sys/fs/cgroup/memory{rel}/memory.max_usage_in_bytes"] if "memory" in ctrl.split(",") else []):
                try:
                    return int(open(path).read()) / 2**20
                except (OSError, ValueError):
                    pass
        return None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # lowram.sh forwards it to sluice
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        self.log.close()


class Client:
    def __init__(self, port, timeout):
        self.port, self.timeout = port, timeout

    def conn(self):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)

    def get(self, path):
        c = self.conn()
        try:
            c.request("GET", path)
            r = c.getresponse()
            return r.status, r.read().decode(errors="replace")
        finally:
            c.close()

    def metrics(self):
        status, body = self.get("/metrics")
        if status != 200:
            raise SystemExit(f"serve_load: /metrics answered {status}")
        return {k: float(v) for k, v in re.findall(r"^(sluice_\w+) (\S+)$", body, re.M)}

    def post_raw(self, body, content_type="application/json"):
        c = self.conn()
        try:
            c.request("POST", "/v1/completions", body=body, headers={"Content-Type": content_type})
            r = c.getresponse()
            return r.status, r.read().decode(errors="replace")
        finally:
            c.close()

    def stream(self, prompt, n, disconnect_after=None, hold=None, sampling=None):
        """One streaming greedy completion. Returns a dict: status, text, tokens (usage), t_send,
        token_times (perf_counter of every event carrying text), error body for non-200.
        disconnect_after: close the socket after that many text events. hold: a threading.Event
        to wait on (reading nothing) once the response head came, then close."""
        out = {"status": None, "text": "", "tokens": 0, "token_times": [], "finish": None}
        req = {"prompt": prompt, "max_tokens": n, "temperature": 0, "stream": True, "logprobs": 0}
        body = json.dumps({**req, **(sampling or {})})
        c = self.conn()
        try:
            out["t_send"] = time.perf_counter()
            c.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
            sock = c.sock  # getresponse() lets go of it when the server says Connection: close
            r = c.getresponse()
            out["status"] = r.status
            if r.status != 200:
                out["body"] = r.read().decode(errors="replace")
                return out
            if hold is not None:
                hold.wait(self.timeout)
                sock.shutdown(socket.SHUT_RDWR)
                return out
            while True:
                line = r.readline()
                if not line:
                    break
                if not line.startswith(b"data: "):
                    continue
                payload = line[6:].strip()
                if payload == b"[DONE]":
                    break
                j = json.loads(payload)
                choice = j["choices"][0]
                out["text"] += choice.get("text") or ""
                # logprobs: 0 makes every sampled token an event, even one whose text is held back
                # (an incomplete UTF-8 sequence) or empty (a random-weight model's special tokens).
                lp = choice.get("logprobs") or {}
                out["token_times"] += [time.perf_counter()] * len(lp.get("tokens") or [])
                if choice.get("finish_reason"):
                    out["finish"] = choice["finish_reason"]
                if "usage" in j:
                    out["tokens"] = j["usage"]["completion_tokens"]
                if disconnect_after is not None and len(out["token_times"]) >= disconnect_after:
                    sock.shutdown(socket.SHUT_RDWR)
                    return out
        except (OSError, http.client.HTTPException, ValueError) as e:
            out["error"] = repr(e)
        finally:
            c.close()
        return out


def run_concurrent(fns):
    """Runs the callables at once (a barrier releases them together); returns (results, wall s)."""
    results = [None] * len(fns)
    barrier = threading.Barrier(len(fns) + 1)

    def body(i):
        barrier.wait()
        results[i] = fns[i]()

    threads = [threading.Thread(target=body, args=(i,), daemon=True) for i in range(len(fns))]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    return results, time.perf_counter() - t0


def wait_idle(client, deadline_s):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        m = client.metrics()
        if m["sluice_slots_busy"] == 0 and m["sluice_queue_depth"] == 0:
            return True
        time.sleep(0.05)
    return False


def parse_args(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(prog="serve_load.sh", description=__doc__.split("\n")[0],
                                epilog="Arguments after -- go to `sluice serve` (e.g. --route-replay T --load-all).")
    p.add_argument("-m", "--model", required=True)
    p.add_argument("--sluice", default=os.path.join(os.path.dirname(here), "build", "sluice"))
    p.add_argument("--clients", default="1,2,4,8", help="concurrency levels, comma-separated")
    p.add_argument("-n", type=int, default=16, help="tokens per client (max_tokens)")
    p.add_argument("--parallel", type=int, default=0, help="server slots (default: the largest N)")
    p.add_argument("--max-queue", type=int, default=2, help="server --max-queue (the fault round overflows it)")
    p.add_argument("--cap", default="", help="memory cap for the server via scripts/lowram.sh, e.g. 8G")
    p.add_argument("--no-solo", action="store_true", help="skip the solo reference runs")
    p.add_argument("--no-fault", action="store_true", help="skip the fault round")
    p.add_argument("--fault-n", type=int, default=400, help="max_tokens of the fault round's long requests "
                   "(they must outlast the poll that sees slots + queue full; fit -c)")
    p.add_argument("--check", action="store_true", help="assert: answers = solo runs, bytes within 5%% of the "
                   "union model, the fault round's outcomes; exit 1 on any failure")
    p.add_argument("--timeout", type=float, default=900, help="seconds for the whole run")
    p.add_argument("--start-timeout", type=float, default=300, help="seconds for the server to listen")
    p.add_argument("--request-timeout", type=float, default=300, help="socket timeout of one request")
    p.add_argument("--log", default="", help="server log file (default: a temp name printed at the end)")
    a, rest = p.parse_known_args(argv)
    if rest and rest[0] == "--":
        rest = rest[1:]
    a.serve_flags = rest
    a.levels = [int(x) for x in a.clients.split(",") if x]
    if not a.levels or min(a.levels) < 1:
        p.error("--clients: positive integers, comma-separated")
    a.parallel = a.parallel or max(a.levels)
    a.replay = "--route-replay" in a.serve_flags
    return a


def main(argv):
    a = parse_args(argv)
    start = time.monotonic()
    failures = []

    def check(ok, what):
        if not ok:
            failures.append(what)
            print(f"CHECK FAIL: {what}", flush=True)

    def left():
        remaining = a.timeout - (time.monotonic() - start)
        if remaining <= 0:
            raise SystemExit(f"serve_load: --timeout {a.timeout:g} s reached")
        return remaining

    log_path = a.log or f"/tmp/serve_load.{os.getpid()}.log"
    srv = Server(a, log_path)
    try:
        cl = Client(srv.port, min(a.request_timeout, a.timeout))
        print(f"serve_load: sluice pid {srv.pid} on port {srv.port}; model {a.model}; -n {a.n}; "
              f"--parallel {a.parallel} --max-queue {a.max_queue}; cap {a.cap or 'none'}; "
              f"serve flags: {' '.join(a.serve_flags) or '(none)'}", flush=True)
        cl.stream("Hello", 2)  # warm-up: faults in the dense weights before any round is timed
        rows, answers, first = [], {}, 0
        for n_clients in a.levels:
            left()
            prompts = prompts_for(n_clients, first)
            first += n_clients
            m0 = cl.metrics()
            res, wall = run_concurrent([lambda p=p: cl.stream(p, a.n) for p in prompts])
            m1 = cl.metrics()
            for p, r in zip(prompts, res):
                check(r["status"] == 200 and "error" not in r, f"N={n_clients}: request failed: {r}")
                answers[p] = r["text"]
            row = st.round_row(n_clients, res, wall, m0, m1)
            row["vmhwm_mib"] = srv.status_mib("VmHWM")
            row["cgroup_peak_mib"] = srv.cgroup_peak_mib()
            rows.append(row)
            if row["union_mib_per_tok"] > 0 and row["mib_per_tok"] > 0:
                check(abs(row["mib_per_tok"] / row["union_mib_per_tok"] - 1) <= 0.05,
                      f"N={n_clients}: measured {row['mib_per_tok']:.3f} MiB/token is not within 5% of the "
                      f"union model's {row['union_mib_per_tok']:.3f}")
            print(st.row_line(row), flush=True)
        st.print_table(rows, a.replay)

        solo = {}
        if a.no_solo or a.replay:
            print("solo: skipped" + (" (--route-replay: routing follows the global position, texts differ by "
                                     "design)" if a.replay else ""), flush=True)
        else:
            for p in answers:
                left()
                solo[p] = cl.stream(p, a.n)["text"]
                check(solo[p] == answers[p], f"answer != solo run for {p!r}: {answers[p]!r} vs {solo[p]!r}")
            print(f"solo: {sum(solo[p] == answers[p] for p in answers)}/{len(answers)} concurrent answers "
                  "equal their solo runs", flush=True)

        if not a.no_fault:
            left()
            fault_round(a, srv, cl, solo, check)
        print(f"elapsed {time.monotonic() - start:.1f} s" + (f"; server log {log_path}" if a.log or failures else ""),
              flush=True)
    finally:
        srv.stop()
    if not a.log and not failures:
        os.unlink(log_path)  # a temp log is kept only when something failed
    if a.check:
        if failures:
            print(f"serve_load: {len(failures)} check(s) failed", flush=True)
            return 1
        print("SERVE_LOAD_CHECKS_OK", flush=True)
    return 0


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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
