#!/usr/bin/env python3
"""bench/serve_load.py — N concurrent streaming clients against `octo serve` (docs/server.md),
and optionally against llama-server under the same load in the same run.

Starts `octo serve -m MODEL --parallel P` on a free loopback port (and with --llama-server, that
binary with `-np P -cb`), then for each N in --clients runs N client threads that together send
--requests streaming completions (max_tokens tokens, temperature 0.8 unless --temperature, a different seed each).
Per N and server: aggregate completion tokens/s (every request's completion tokens over the
wall time of the N-client run), requests/s, median time to first token, and how many responses
completed with [DONE] — nothing may be lost; for octo, from its /metrics, the mean batch of its
shared steps and the bytes of experts read per generated token (a Mixture-of-Experts model). With --rounds R the servers alternate R times per N
and the medians are quoted.

    python3 bench/serve_load.py MODEL [--octo build/octo] [--parallel 4] [--clients 1,2,4,8]
                                [--requests 16] [--max-tokens 64] [--rounds 1] [--temperature 0.8]
                                [--llama-server PATH] [--threads 2] [--ctx 2048] [--octo-args '--moe-cache 25%']
"""
import argparse
import json
import socket
import statistics
import subprocess
import threading
import time
import urllib.request


TEMPERATURE = 0.8


def one(url, seed, max_tokens):
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": max_tokens, "temperature": TEMPERATURE, "seed": seed,
                       "stream": True, "stream_options": {"include_usage": True}}).encode()
    t0 = time.perf_counter()
    first, done, usage, chunks = None, False, None, 0
    req = urllib.request.Request(url + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        for line in r:
            line = line.strip()
            if not line:
                continue
            if line == b"data: [DONE]":
                done = True
                break
            ev = json.loads(line[6:].decode("utf-8", "replace"))  # a synthetic model's bytes need not be UTF-8
            usage = ev.get("usage") or usage
            if ev.get("choices") and ev["choices"][0].get("text"):
                chunks += 1
                if first is None:
                    first = time.perf_counter()
    n = usage["completion_tokens"] if usage else chunks
    return {"ttft": (first or time.perf_counter()) - t0, "tokens": n, "ok": done}


def run(url, clients, requests, max_tokens):
    results, lock, seeds = [], threading.Lock(), iter(range(1, requests + 1))

    def worker():
        while True:
            with lock:
                seed = next(seeds, None)
            if seed is None:
                return
            res = one(url, seed, max_tokens)
            with lock:
                results.append(res)

    t0 = time.perf_counter()
    ts = [threading.Thread(target=worker) for _ in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    wall = time.perf_counter() - t0
    return {"tps": sum(r["tokens"] for r in results) / wall, "rps": len(results) / wall,
            "ttft": statistics.median(r["ttft"] for r in results), "ok": sum(r["ok"] for r in results)}


def octo_counters(url):
    """octo's /metrics: its unlabelled samples."""
    with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
        return {k: float(v) for k, v in (l.split() for l in r.read().decode().splitlines()
                                          if l and not l.startswith("#") and "{" not in l)}


def octo_figures(before, after):
    """The mean batch of the shared steps between two readings, and expert bytes read per completion token."""
    d = {k: after[k] - before[k] for k in after}
    steps = d["octo_batch_steps_total"]
    return {"batch": d["octo_batch_sessions_total"] / steps if steps else 1.0,
            "expert_mib": d["octo_expert_bytes_read_total"] / max(d["octo_completion_tokens_total"], 1) / 2**20}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_octo(a):
    srv = subprocess.Popen([a.octo, "serve", "-m", a.model, "--port", "0", "--parallel", str(a.parallel),
                            *a.octo_args.split()], stderr=subprocess.PIPE, text=True)
    line = srv.stderr.readline()
    return srv, line.split(" on ")[1].split(" ")[0]


def start_llama(a):
    port = free_port()
    srv = subprocess.Popen([a.llama_server, "-m", a.model, "--port", str(port), "-np", str(a.parallel), "-cb",
                            "-t", str(a.threads), "-tb", str(a.threads), "-c", str(a.ctx), "--log-disable"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            with urllib.request.urlopen(url + "/health", timeout=1) as r:
                if r.status == 200:
                    return srv, url
        except OSError:
            pass
        time.sleep(0.1)
    srv.kill()
    raise SystemExit("llama-server did not start")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--octo", default="build/octo")
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--clients", default="1,2,4,8")
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--llama-server")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=2048)
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--octo-args", default="", help="more options for octo serve, e.g. '--moe-cache 25%%'")
    a = ap.parse_args()
    global TEMPERATURE
    TEMPERATURE = a.temperature
    servers = {"octo": start_octo(a)}
    try:
        if a.llama_server:
            servers["llama"] = start_llama(a)
        print(f"{a.model}: --parallel {a.parallel}, {a.requests} streaming requests of {a.max_tokens} tokens per "
              f"row, {a.rounds} alternated round(s), medians\n")
        names = list(servers)
        head = " | ".join(f"{n} tokens/s | {n} requests/s | {n} TTFT | {n} completed" for n in names)
        print(f"| clients | {head} |" + (" octo / llama |" if len(names) > 1 else ""))
        print("|---:|" + "---:|---:|---:|---:|" * len(names) + ("---:|" if len(names) > 1 else ""))
        for n in [int(x) for x in a.clients.split(",")]:
            got = {name: [] for name in names}
            for r in range(a.rounds):
                for name in (names if r % 2 == 0 else names[::-1]):
                    c0 = octo_counters(servers[name][1]) if name == "octo" else None
                    got[name].append(run(servers[name][1], n, a.requests, a.max_tokens))
                    if c0:
                        got[name][-1].update(octo_figures(c0, octo_counters(servers[name][1])))
            cells = []
            for name in names:
                g = got[name]
                cells.append(f"{statistics.median(x['tps'] for x in g):.1f} | {statistics.median(x['rps'] for x in g):.2f}"
                             f" | {1000 * statistics.median(x['ttft'] for x in g):.0f} ms | "
                             f"{min(x['ok'] for x in g)} / {a.requests}")
            ratio = ""
            batch = statistics.median(x["batch"] for x in got["octo"])
            expert = statistics.median(x["expert_mib"] for x in got["octo"])
            if len(names) > 1:
                ratio = f" {statistics.median(x['tps'] for x in got['octo']) / statistics.median(x['tps'] for x in got['llama']):.2f} |"
            print(f"| {n} | " + " | ".join(cells) + " |" + ratio + f" octo: mean batch {batch:.2f}, "
                  f"{expert:.2f} MiB of experts read per token", flush=True)
    finally:
        for srv, _ in servers.values():
            srv.terminate()
            srv.wait()


if __name__ == "__main__":
    main()
