"""The HTTP side of bench/serve_load.py (python3 stdlib): the prompts, one streaming client, and
running clients together. Every call is bounded by the client's socket timeout."""
import http.client
import json
import re
import socket
import threading
import time

NAMES = ["Lily", "Tom", "Ben", "Mia", "Sam", "Anna", "Max", "Sue", "Tim", "Zoe", "Leo", "Amy", "Jack", "Kim", "Ned"]
PLACES = ["park", "sea", "farm", "shop", "forest", "school", "zoo", "lake"]


def prompts_for(count, first):
    # Distinct prompts: a name and a place each, so no two share more than the opening words.
    return [f"Once upon a time, {NAMES[(first + i) % len(NAMES)]} went to the "
            f"{PLACES[(first + i) % len(PLACES)]} and" for i in range(count)]


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


