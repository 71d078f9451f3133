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
import os
import re
import signal
import subprocess
import sys
import time

import serve_load_stats as st
from serve_load_client import Client, prompts_for, run_concurrent
from serve_load_fault import fault_round


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
    # Cache hits and --load-all make reads fall below the union model by design: no bytes check then.
    f = a.serve_flags
    budgets = [f[i + 1] for i in range(len(f) - 1) if f[i] == "--cache-mb"] + \
              [x.split("=", 1)[1] for x in f if x.startswith("--cache-mb=")]
    a.cached = "--load-all" in f or any(b not in ("off", "0") for b in budgets)
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
            if not a.cached and row["union_mib_per_tok"] > 0:
                check(abs(row["mib_per_tok"] / row["union_mib_per_tok"] - 1) <= 0.05,
                      f"N={n_clients}: measured {row['mib_per_tok']:.3f} MiB/token is not within 5% of the "
                      f"union model's {row['union_mib_per_tok']:.3f}")
            print(st.row_line(row), flush=True)
        st.print_table(rows, a.replay)
        if a.cached:
            print("bytes: not compared with the union model (an expert cache or --load-all serves hits)", flush=True)

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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
